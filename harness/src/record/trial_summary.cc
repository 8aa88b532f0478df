// A trial as capacity data keeps it: its summary's codec, and the summary read from a trial
// directory (verdict.json, metrics.json and the files beside them).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "capacity_data_internal.h"
#include "capq/file_io.h"
#include "capq/record/capacity_data.h"

namespace capq {

namespace fs = std::filesystem;
using namespace capjson;

namespace {

json TotalsToJson(const CorrectnessTotals& t) {
  return json{{"streams", t.streams},
              {"completion_tokens", t.completion_tokens},
              {"nonempty_chunks", t.nonempty_chunks},
              {"utf8_bytes", t.utf8_bytes},
              {"unique_output_hashes", t.unique_output_hashes},
              {"warmup_prompts", t.warmup_prompts},
              {"measured_prompts", t.measured_prompts}};
}

CorrectnessTotals TotalsFromJson(const json& j) {
  CorrectnessTotals t;
  if (!j.is_object()) return t;
  t.streams = Get<int64_t>(j, "streams", 0);
  t.completion_tokens = Get<int64_t>(j, "completion_tokens", 0);
  t.nonempty_chunks = Get<int64_t>(j, "nonempty_chunks", 0);
  t.utf8_bytes = Get<int64_t>(j, "utf8_bytes", 0);
  t.unique_output_hashes = Get<int64_t>(j, "unique_output_hashes", 0);
  t.warmup_prompts = Get<int64_t>(j, "warmup_prompts", 0);
  t.measured_prompts = Get<int64_t>(j, "measured_prompts", 0);
  return t;
}

// [[t_s, in_flight, server_waiting or null], ...], as verdict.json and capacity-data.json keep it.
std::vector<TrialSummary::QueuePoint> QueueSeriesFromJson(const json& a) {
  std::vector<TrialSummary::QueuePoint> out;
  if (!a.is_array()) return out;
  for (const json& p : a) {
    if (!p.is_array() || p.size() != 3 || !p[0].is_number() || !p[1].is_number()) continue;
    out.push_back(
        {p[0].get<double>(), p[1].get<double>(), p[2].is_number() ? p[2].get<double>() : -1.0});
  }
  return out;
}

json FailedGatesToJson(const std::vector<FailedGate>& gates) {
  json a = json::array();
  for (const FailedGate& g : gates) a.push_back({{"name", g.name}, {"evidence", g.evidence}});
  return a;
}

std::vector<FailedGate> FailedGatesFromJson(const json& a) {
  std::vector<FailedGate> out;
  for (const json& g : a) {
    // Capacity data written before FailedGate kept "name: evidence" as one string: it is kept
    // whole, as the gate's words, never split.
    if (g.is_string()) {
      out.push_back({g.get<std::string>(), ""});
      continue;
    }
    out.push_back({g.at("name").get<std::string>(), g.value("evidence", "")});
  }
  return out;
}

json QueueSeriesToJson(const std::vector<TrialSummary::QueuePoint>& series) {
  json a = json::array();
  for (const auto& p : series) {
    a.push_back({p.t_s, p.in_flight, p.server_waiting >= 0 ? json(p.server_waiting) : json()});
  }
  return a;
}

}  // namespace

namespace capjson {

json ChecksToJson(const std::vector<SloCheck>& checks) {
  json a = json::array();
  for (const auto& s : checks) {
    a.push_back({{"metric", s.metric},
                 {"percentile", s.percentile},
                 {"below_ms", s.below_ms},
                 {"measured_ms", Num(s.measured_ms)},
                 {"passed", s.passed},
                 {"confidence", ConfidenceToJson(s.confidence)}});
    if (s.at_least) a.back()["at_least"] = true;
  }
  return a;
}

std::vector<SloCheck> ChecksFromJson(const json& a) {
  std::vector<SloCheck> out;
  for (const auto& s : a) {
    out.push_back(SloCheck{
        s.at("metric").get<std::string>(), s.at("percentile").get<double>(),
        s.at("below_ms").get<double>(), GetNum(s, "measured_ms"), Get<bool>(s, "passed", false),
        ConfidenceFromJson(s.value("confidence", json())), Get<bool>(s, "at_least", false)});
  }
  return out;
}

TrialSummary TrialFromJson(const json& j) {
  TrialSummary t;
  t.phase = PhaseAt(j, "phase");
  // A rate row's trial names its level and rate; a closed-loop trial its concurrency.
  t.level = j.contains("level") ? j.at("level").get<int>() : j.at("concurrency").get<int>();
  t.rate_rps = Get<double>(j, "rate_rps", 0);
  t.trial = j.at("trial").get<int>();
  t.seed = Get<uint64_t>(j, "seed", 0);
  t.corpus = Get<std::string>(j, "corpus", "");
  t.max_cached_tokens = Get<int64_t>(j, "max_cached_tokens", -1);
  t.cold_allowed_tokens = Get<int64_t>(j, "cold_allowed_tokens", -1);
  t.move = Get<std::string>(j, "move", "");
  t.outcome = OutcomeAt(j, "outcome");
  t.exit_code = Get<int>(j, "exit_code", 3);
  t.latency_pass = Get<bool>(j, "latency_pass", false);
  t.correctness_pass = Get<bool>(j, "correctness_pass", false);
  t.complete = Get<bool>(j, "complete", false);
  t.slo = ChecksFromJson(j.value("slo", json::array()));
  t.tier_slo = ChecksFromJson(j.value("tier_slo", json::array()));
  t.reasons = j.value("reasons", std::vector<std::string>{});
  t.failed_gates = FailedGatesFromJson(j.value("failed_gates", json::array()));
  t.misses = GateMissesFromJson(j.value("misses", json::array()));
  if (j.contains("early_decision")) t.decided = EarlyDecisionFromJson(j.at("early_decision"));
  // A rate trial written before GateMiss kept its stability failures as reason strings: each is
  // kept whole, as the gate's words (no figures), never taken apart.
  if (!j.contains("misses")) {
    for (const auto& s : j.value("stability_failures", json::array())) {
      GateMiss m;
      m.gate = m.text = s.get<std::string>();
      t.misses.push_back(std::move(m));
    }
  }
  t.queue_series = QueueSeriesFromJson(j.value("queue_series", json()));
  t.send_lateness_p99_ms = GetNum(j, "send_lateness_p99_ms");
  t.time_scale = Get<double>(j, "time_scale", 1.0);
  t.percentile_method = Get<std::string>(j, "percentile_method", "");
  if (j.contains("latency") && j["latency"].is_object()) {
    const json& l = j["latency"];
    t.has_metrics = true;
    t.requests = Get<size_t>(l, "requests", 0);
    t.ttft_ms = DistributionFromJson(l.value("ttft_ms", json()));
    t.itl_ms = DistributionFromJson(l.value("itl_ms", json()));
    t.e2e_ms = DistributionFromJson(l.value("e2e_ms", json()));
    t.ttft_p95_steady_ms = GetNum(l, "ttft_p95_steady_ms");
    for (const auto& v : l.value("ttft_ms_by_arrival", json::array())) {
      t.ttft_ms_by_arrival.push_back(v.is_number() ? v.get<double>() : NAN);
    }
    t.output_tok_s = GetNum(l, "output_tok_s");
    t.request_per_s = GetNum(l, "request_per_s");
    t.duration_s = GetNum(l, "duration_s");
    t.prompt_tokens_min = Get<int64_t>(l, "prompt_tokens_min", 0);
    t.prompt_tokens_max = Get<int64_t>(l, "prompt_tokens_max", 0);
  }
  t.totals = TotalsFromJson(j.value("correctness_totals", json()));
  t.dir = Get<std::string>(j, "dir", "");
  t.command = Get<std::string>(j, "command", "");
  t.sha256sums = Get<std::string>(j, "sha256sums", "");
  t.started_utc = Get<std::string>(j, "started_utc", "");
  t.start_offset_s = Get<double>(j, "start_offset_s", 0);
  t.wall_s = Get<double>(j, "wall_s", 0);
  t.classes = ClassVerdictsFromJson(j.value("classes", json::array()));
  t.class_slo = ClassChecksOf(t);
  if (j.contains("reuse") && j["reuse"].is_object()) t.reuse = ReuseFiguresFromJson(j["reuse"]);
  if (j.contains("sent") && j["sent"].is_object()) t.sent = SentRequestsFromJson(j["sent"]);
  return t;
}

}  // namespace capjson

std::vector<SloCheck> SloChecksOf(const std::vector<SloGateResult>& results) {
  std::vector<SloCheck> out;
  for (const auto& r : results) {
    out.push_back(SloCheck{SloMetricName(r.gate.metric), r.gate.percentile, r.gate.below_ms,
                           r.measured_ms, r.passed, r.confidence, r.at_least});
  }
  return out;
}

std::vector<SloCheck> ClassChecksOf(const TrialSummary& t) {
  std::vector<SloCheck> worst;
  double worst_ratio = -1;
  for (const ClassVerdict& c : t.classes) {
    if (c.gate_ms.size() != t.slo.size()) continue;
    std::vector<SloCheck> checks = t.slo;
    double ratio = 0;
    for (size_t i = 0; i < checks.size(); ++i) {
      checks[i].metric = c.name + " " + checks[i].metric;
      checks[i].measured_ms = c.gate_ms[i];
      checks[i].passed = c.gate_passed[i];
      const double r = std::isfinite(c.gate_ms[i]) ? c.gate_ms[i] / checks[i].below_ms : INFINITY;
      ratio = std::max(ratio, r);
    }
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst = std::move(checks);
    }
  }
  return worst;
}

double TrialSummary::GateRatio() const {
  // A trial decided early measured only a bound on its deciding gate, the least its percentile
  // could still end at. The locator aims by it as it would by the whole trial's figure: without
  // it a blind locator bisected where the whole trial let it interpolate (sim_small_azure: a
  // probe more with early decision than with --full-trials). Being a lower bound, it can only aim
  // the next probe at or above where the whole figure would.
  if (decided) {
    return decided->gate.below_ms > 0 ? decided->lowest_reachable_ms / decided->gate.below_ms : NAN;
  }
  double worst = NAN;
  for (const auto& s : slo) {
    if (!std::isfinite(s.measured_ms) || s.below_ms <= 0) continue;
    double r = s.measured_ms / s.below_ms;
    if (!std::isfinite(worst) || r > worst) worst = r;
  }
  return worst;
}

double TrialSummary::GatingMs() const { return slo.empty() ? NAN : slo.front().measured_ms; }

json TrialSummaryToJson(const TrialSummary& t) {
  json slo = ChecksToJson(t.slo);
  json j{{"phase", PhaseName(t.phase)},
         {"trial", t.trial},
         {"seed", t.seed},
         {"corpus", t.corpus},
         {"max_cached_tokens", t.max_cached_tokens},
         {"cold_allowed_tokens", t.cold_allowed_tokens},
         {"move", t.move},
         {"outcome", TrialOutcomeName(t.outcome)},
         {"exit_code", t.exit_code},
         {"latency_pass", t.latency_pass},
         {"correctness_pass", t.correctness_pass},
         {"complete", t.complete},
         {"slo", slo},
         {"reasons", t.reasons},
         {"failed_gates", FailedGatesToJson(t.failed_gates)},
         {"time_scale", t.time_scale},
         {"percentile_method", t.percentile_method},
         {"correctness_totals", TotalsToJson(t.totals)},
         {"dir", t.dir},
         {"command", t.command},
         {"sha256sums", t.sha256sums},
         {"started_utc", t.started_utc},
         {"start_offset_s", t.start_offset_s},
         {"wall_s", t.wall_s}};
  if (!t.tier_slo.empty()) j["tier_slo"] = ChecksToJson(t.tier_slo);
  if (!t.misses.empty()) j["misses"] = GateMissesToJson(t.misses);
  if (t.decided) j["early_decision"] = EarlyDecisionToJson(*t.decided);
  if (t.rate_rps > 0) {
    j["level"] = t.level;
    j["rate_rps"] = t.rate_rps;
    j["queue_series"] = QueueSeriesToJson(t.queue_series);
    j["send_lateness_p99_ms"] = Num(t.send_lateness_p99_ms);
  } else {
    j["concurrency"] = t.level;
  }
  if (t.has_metrics) {
    json arrival = json::array();
    for (double v : t.ttft_ms_by_arrival) arrival.push_back(Num(v));
    j["latency"] = json{{"requests", t.requests},
                        {"ttft_ms", DistributionToJson(t.ttft_ms)},
                        {"ttft_p95_steady_ms", Num(t.ttft_p95_steady_ms)},
                        {"itl_ms", DistributionToJson(t.itl_ms)},
                        {"e2e_ms", DistributionToJson(t.e2e_ms)},
                        {"output_tok_s", Num(t.output_tok_s)},
                        {"request_per_s", Num(t.request_per_s)},
                        {"duration_s", Num(t.duration_s)},
                        {"prompt_tokens_min", t.prompt_tokens_min},
                        {"prompt_tokens_max", t.prompt_tokens_max},
                        {"ttft_ms_by_arrival", arrival}};
  } else {
    j["latency"] = nullptr;
  }
  if (!t.classes.empty()) j["classes"] = ClassVerdictsToJson(t.classes);
  if (t.reuse) j["reuse"] = ReuseFiguresToJson(*t.reuse);
  if (t.sent) j["sent"] = SentRequestsToJson(*t.sent);
  return j;
}

json SentRequestsToJson(const SentRequests& s) {
  json requests = json::array();
  for (const SentRequest& r : s.requests) {
    requests.push_back({r.input_tokens, r.output_tokens, Num(r.send_s)});
  }
  json j = {{"requests", std::move(requests)}};
  if (s.first_trace_index >= 0) j["first_trace_index"] = s.first_trace_index;
  return j;
}

SentRequests SentRequestsFromJson(const json& j) {
  SentRequests s;
  s.first_trace_index = Get<int64_t>(j, "first_trace_index", -1);
  for (const json& r : j.value("requests", json::array())) {
    if (!r.is_array() || r.size() != 3) continue;
    s.requests.push_back(
        {r[0].get<int64_t>(), r[1].get<int64_t>(), r[2].is_number() ? r[2].get<double>() : NAN});
  }
  return s;
}

json ReuseFiguresToJson(const ReuseFigures& r) {
  return json{{"requests", r.requests},
              {"declared_ratio", Num(r.declared_ratio)},
              {"served_ratio", Num(r.served_ratio)},
              {"think_turns", r.think_turns},
              {"think_declared_mean_s", Num(r.think_declared_mean_s)},
              {"think_applied_mean_s", Num(r.think_applied_mean_s)}};
}

ReuseFigures ReuseFiguresFromJson(const json& j) {
  ReuseFigures r;
  r.requests = Get<int>(j, "requests", 0);
  r.declared_ratio = GetNum(j, "declared_ratio");
  r.served_ratio = GetNum(j, "served_ratio");
  r.think_turns = Get<int>(j, "think_turns", 0);
  r.think_declared_mean_s = GetNum(j, "think_declared_mean_s");
  r.think_applied_mean_s = GetNum(j, "think_applied_mean_s");
  return r;
}

namespace {

// The correctness gates that failed, the one fail fast stopped at first.
std::vector<FailedGate> FailedGatesOf(const std::optional<StreamBreak>& stopped_at,
                                      const json& corr) {
  std::vector<FailedGate> out;
  // The gate fail fast stopped at comes first: it is what ended the trial.
  if (stopped_at) {
    out.push_back({stopped_at->gate, "stopped at the first broken stream " +
                                         stopped_at->request_id + ": " + stopped_at->evidence});
  }
  for (const auto& g : corr.value("gates", json::array())) {
    if (Get<bool>(g, "enabled", true) && !Get<bool>(g, "passed", false) &&
        !Get<bool>(g, "capacity", false)) {
      out.push_back({Get<std::string>(g, "name", "?"), Get<std::string>(g, "evidence", "")});
    }
  }
  return out;
}

// A trial's verdict, read by verdict.json's one reader (record/verdict.h), in the summary's terms:
// the outcome, its checks, misses and reasons, the queue over time, the failed gates.
Status SummaryFromVerdict(const StoredVerdict& s, TrialSummary* t) {
  const TrialVerdict& v = s.verdict;
  t->level = s.context.level;
  t->trial = s.context.trial_index;
  t->seed = s.context.seed;
  t->phase = s.context.phase;
  t->complete = s.context.complete;
  t->time_scale = s.context.time_scale;
  t->started_utc = s.context.started_utc;
  t->outcome = v.outcome;
  t->exit_code = v.ExitCode();
  t->latency_pass = v.latency_pass;
  t->correctness_pass = v.correctness_pass;
  t->slo = SloChecksOf(v.slo);
  t->tier_slo = SloChecksOf(v.tier_slo);
  t->reasons = v.reasons;
  t->misses = v.misses;
  t->decided = v.decided;
  t->classes = v.classes;
  t->class_slo = ClassChecksOf(*t);
  if (v.stability) {
    for (const auto& p : v.stability->series) {
      t->queue_series.push_back({p.t_s, p.in_flight, p.server_waiting});
    }
    t->send_lateness_p99_ms = v.stability->send_lateness_p99_ms;
  }
  try {
    t->failed_gates = FailedGatesOf(v.stopped_at, s.correctness_json);
    t->totals = TotalsFromJson(s.correctness_json.value("totals", json()));
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("correctness: ") + e.what());
  }
  return Status::Ok();
}

// metrics.json, read by its one reader (measurement/metrics.h): the latency distributions,
// throughput and the prompt range; and a reuse row's figures, which the trial adds to it.
void SummaryFromMetrics(const json& m, TrialSummary* t) {
  const TrialMetrics x = MetricsFromJson(m);
  t->has_metrics = true;
  t->percentile_method = PercentileMethodName(x.method);
  t->requests = x.requests;
  t->ttft_ms = x.ttft_ms;
  t->itl_ms = x.itl_ms;
  t->e2e_ms = x.e2e_ms;
  t->ttft_p95_steady_ms = x.ttft_p95_steady_ms;
  t->ttft_ms_by_arrival = x.ttft_ms_by_arrival;
  t->output_tok_s = x.output_tok_s;
  t->request_per_s = x.request_per_s;
  t->duration_s = x.duration_s;
  t->prompt_tokens_min = x.prompt_tokens_min;
  t->prompt_tokens_max = x.prompt_tokens_max;
  t->tokens_per_chunk_mean = std::isfinite(x.tokens_per_chunk_mean) ? x.tokens_per_chunk_mean : 0;
  if (m.contains("reuse") && m["reuse"].is_object()) t->reuse = ReuseFiguresFromJson(m["reuse"]);
  if (m.contains("sent") && m["sent"].is_object()) t->sent = SentRequestsFromJson(m["sent"]);
}

std::string TrialFile(const std::string& dir, const char* name) {
  return (fs::path(dir) / name).string();
}

// The file `name` of the trial directory as a JSON object; nullopt when it is missing or is not
// one.
std::optional<json> OptionalObject(const std::string& dir, const char* name) {
  Result<std::string> text = ReadWholeFile(TrialFile(dir, name));
  if (!text.ok()) return std::nullopt;
  json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  return j;
}

// What the other files of the directory add, each read only when it is there and well formed:
// the corpus (plan.json), the cold prefix (identity.json), the server's limits (server_info.json),
// the command and the checksums.
void ExtrasFromDir(const std::string& dir, TrialSummary* t) {
  if (auto plan = OptionalObject(dir, "plan.json")) {
    if (plan->contains("corpus") && (*plan)["corpus"].is_object()) {
      t->corpus = Get<std::string>((*plan)["corpus"], "id", "");
    }
  }
  if (auto id = OptionalObject(dir, "identity.json")) {
    if (id->contains("cold_prefix") && (*id)["cold_prefix"].is_object()) {
      const json& c = (*id)["cold_prefix"];
      t->cold_allowed_tokens = Get<int64_t>(c, "allowed_tokens", -1);
      if (c.contains("max_cached_tokens") && c["max_cached_tokens"].is_number_integer()) {
        t->max_cached_tokens = c["max_cached_tokens"].get<int64_t>();
      }
    }
  }
  if (auto info = OptionalObject(dir, "server_info.json")) {
    if (info->contains("limits") && (*info)["limits"].is_object()) {
      for (const auto& [k, v] : (*info)["limits"].items()) {
        if (v.is_string()) t->server_limits[k] = v.get<std::string>();
      }
    }
  }
  if (auto c = ReadWholeFile(TrialFile(dir, "command.txt")); c.ok()) {
    std::string s = *c;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    t->command = s;
  }
  if (auto c = ReadWholeFile(TrialFile(dir, "SHA256SUMS")); c.ok()) {
    t->sha256sums = *c;
  }
}

}  // namespace

Result<TrialSummary> ReadTrialDir(const std::string& dir) {
  TrialSummary t;
  t.dir = dir;
  auto vtext = ReadWholeFile(TrialFile(dir, "verdict.json"));
  if (!vtext.ok()) return vtext.status();
  json v = json::parse(*vtext, nullptr, false);
  if (v.is_discarded() || !v.is_object()) {
    return Status::InvalidArgument(dir + "/verdict.json: not a JSON object");
  }
  Result<StoredVerdict> stored = VerdictFromJson(v);
  if (!stored.ok()) return stored.status().WithContext(dir);
  CAPQ_RETURN_IF_ERROR(SummaryFromVerdict(*stored, &t).WithContext(dir + "/verdict.json"));
  if (auto mtext = ReadWholeFile(TrialFile(dir, "metrics.json")); mtext.ok()) {
    json m = json::parse(*mtext, nullptr, false);
    if (m.is_discarded() || !m.is_object()) {
      return Status::InvalidArgument(dir + "/metrics.json: not a JSON object");
    }
    try {
      SummaryFromMetrics(m, &t);
    } catch (const json::exception& e) {
      return Status::InvalidArgument(dir + "/metrics.json: " + e.what());
    }
  }
  ExtrasFromDir(dir, &t);
  return t;
}

}  // namespace capq

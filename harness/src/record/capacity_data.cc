#include "capq/record/capacity_data.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "capq/model/reuse.h"
#include "capq/record/artifacts.h"

namespace capq {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json Num(double v) { return std::isfinite(v) ? json(v) : json(nullptr); }

// A number or NaN; throws json::type_error for a value of the wrong type (caught by the caller).
double GetNum(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return NAN;
  if (!it->is_number()) {
    throw json::type_error::create(302, std::string("key '") + key + "' must be a number", &j);
  }
  return it->get<double>();
}

template <typename T>
T Get(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

json DistToJson(const Distribution& d) {
  return json{{"n", d.n},          {"min", Num(d.min)}, {"p50", Num(d.p50)}, {"p90", Num(d.p90)},
              {"p95", Num(d.p95)}, {"p99", Num(d.p99)}, {"max", Num(d.max)}, {"mean", Num(d.mean)}};
}

Distribution DistFromJson(const json& j) {
  Distribution d;
  if (!j.is_object()) {
    d.min = d.p50 = d.p90 = d.p95 = d.p99 = d.max = d.mean = NAN;
    return d;
  }
  d.n = Get<size_t>(j, "n", 0);
  d.min = GetNum(j, "min");
  d.p50 = GetNum(j, "p50");
  d.p90 = GetNum(j, "p90");
  d.p95 = GetNum(j, "p95");
  d.p99 = GetNum(j, "p99");
  d.max = GetNum(j, "max");
  d.mean = GetNum(j, "mean");
  return d;
}

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

Result<SloMetric> ParseSloMetric(const std::string& s) {
  if (s == "ttft") return SloMetric::kTtft;
  if (s == "itl") return SloMetric::kItl;
  if (s == "e2e") return SloMetric::kE2e;
  return Status::InvalidArgument("unknown SLO metric '" + s + "'");
}

json ChecksToJson(const std::vector<SloCheck>& checks) {
  json a = json::array();
  for (const auto& s : checks) {
    a.push_back({{"metric", s.metric},
                 {"percentile", s.percentile},
                 {"below_ms", s.below_ms},
                 {"measured_ms", Num(s.measured_ms)},
                 {"passed", s.passed}});
  }
  return a;
}

std::vector<SloCheck> ChecksFromJson(const json& a) {
  std::vector<SloCheck> out;
  for (const auto& s : a) {
    out.push_back(SloCheck{s.at("metric").get<std::string>(), s.at("percentile").get<double>(),
                           s.at("below_ms").get<double>(), GetNum(s, "measured_ms"),
                           Get<bool>(s, "passed", false)});
  }
  return out;
}

json GatesToJson(const std::vector<SloGate>& gates) {
  json a = json::array();
  for (const auto& g : gates) {
    a.push_back({{"metric", SloMetricName(g.metric)},
                 {"percentile", g.percentile},
                 {"below_ms", g.below_ms}});
  }
  return a;
}

json RowInfoToJson(const RowInfo& r) {
  json slo = json::array();
  for (const auto& g : r.slo) {
    slo.push_back({{"metric", SloMetricName(g.metric)},
                   {"percentile", g.percentile},
                   {"below_ms", g.below_ms}});
  }
  json out{{"id", r.id},
           {"title", r.title},
           {"family", r.family},
           {"source_path", r.source_path},
           {"identity",
            {{"engine", r.engine},
             {"image", r.image},
             {"model", r.model},
             {"model_revision", r.model_revision},
             {"served_model_name", r.served_model_name},
             {"hardware", r.hardware},
             {"driver", r.driver},
             {"sim_profile", r.sim_profile},
             {"time_scale", r.time_scale}}},
           {"workload", {{"input_tokens", r.input_tokens}, {"output_tokens", r.output_tokens}}},
           {"slo", slo},
           {"percentile_method", r.percentile_method},
           {"warmup", {{"requests", r.warmup_requests}, {"concurrency", r.warmup_concurrency}}},
           {"measured", {{"min_requests", r.min_requests}, {"per_concurrency", r.per_concurrency}}},
           {"trials", {{"count", r.trials_count}, {"quiet_period_s", r.quiet_period_s}}},
           {"expected_cmax", r.expected_cmax ? json(*r.expected_cmax) : json(nullptr)}};
  json arrival{{"kind", r.arrival}};
  if (r.open_loop()) {
    arrival["rate_step_rps"] = r.rate_step_rps;
    arrival["ramp_s"] = r.ramp_s;
    if (r.measured_duration_s) arrival["duration_s"] = *r.measured_duration_s;
    if (r.measured_requests) arrival["requests"] = *r.measured_requests;
    out["expected_rmax_rps"] = r.expected_rmax_rps ? json(*r.expected_rmax_rps) : json(nullptr);
  }
  out["arrival"] = arrival;
  if (!r.mix.empty()) out["mix"] = MixInfoToJson(r.mix);
  if (!r.reuse.empty()) out["reuse"] = r.reuse;
  return out;
}

Result<RowInfo> RowInfoFromJson(const json& j) {
  RowInfo r;
  r.id = j.at("id").get<std::string>();
  r.title = Get<std::string>(j, "title", "");
  r.family = Get<std::string>(j, "family", "");
  r.source_path = Get<std::string>(j, "source_path", "");
  const json& id = j.at("identity");
  r.engine = Get<std::string>(id, "engine", "");
  r.image = Get<std::string>(id, "image", "");
  r.model = Get<std::string>(id, "model", "");
  r.model_revision = Get<std::string>(id, "model_revision", "");
  r.served_model_name = Get<std::string>(id, "served_model_name", "");
  r.hardware = Get<std::string>(id, "hardware", "");
  r.driver = Get<std::string>(id, "driver", "");
  r.sim_profile = Get<std::string>(id, "sim_profile", "");
  r.time_scale = Get<double>(id, "time_scale", 1.0);
  const json& w = j.at("workload");
  r.input_tokens = w.at("input_tokens").get<int64_t>();
  r.output_tokens = w.at("output_tokens").get<int64_t>();
  for (const auto& g : j.at("slo")) {
    auto m = ParseSloMetric(g.at("metric").get<std::string>());
    if (!m.ok()) return m.status().WithContext("slo");
    r.slo.push_back(SloGate{*m, g.at("percentile").get<double>(), g.at("below_ms").get<double>()});
  }
  r.percentile_method = Get<std::string>(j, "percentile_method", "linear");
  if (j.contains("warmup")) {
    r.warmup_requests = Get<int>(j["warmup"], "requests", 0);
    r.warmup_concurrency = Get<int>(j["warmup"], "concurrency", 1);
  }
  if (j.contains("measured")) {
    r.min_requests = Get<int>(j["measured"], "min_requests", 0);
    r.per_concurrency = Get<int>(j["measured"], "per_concurrency", 0);
  }
  if (j.contains("trials")) {
    r.trials_count = Get<int>(j["trials"], "count", 0);
    r.quiet_period_s = Get<double>(j["trials"], "quiet_period_s", 0);
  }
  if (j.contains("expected_cmax") && !j["expected_cmax"].is_null()) {
    r.expected_cmax = j["expected_cmax"].get<int>();
  }
  // Data written before rate rows has no "arrival": its rows are closed loop.
  if (j.contains("arrival") && j["arrival"].is_object()) {
    const json& a = j["arrival"];
    r.arrival = a.at("kind").get<std::string>();
    if (r.open_loop()) {
      r.rate_step_rps = a.at("rate_step_rps").get<double>();
      if (!(r.rate_step_rps > 0)) {
        return Status::InvalidArgument("arrival.rate_step_rps: a rate row needs a step > 0");
      }
      r.ramp_s = Get<double>(a, "ramp_s", 0);
      if (a.contains("duration_s")) r.measured_duration_s = a["duration_s"].get<double>();
      if (a.contains("requests")) r.measured_requests = a["requests"].get<int>();
    }
  }
  if (j.contains("expected_rmax_rps") && !j["expected_rmax_rps"].is_null()) {
    r.expected_rmax_rps = j["expected_rmax_rps"].get<double>();
  }
  r.mix = MixInfoFromJson(j.value("mix", json::array()));
  r.reuse = Get<std::string>(j, "reuse", "");
  return r;
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

json QueueSeriesToJson(const std::vector<TrialSummary::QueuePoint>& series) {
  json a = json::array();
  for (const auto& p : series) {
    a.push_back({p.t_s, p.in_flight, p.server_waiting >= 0 ? json(p.server_waiting) : json()});
  }
  return a;
}

// Where the locator's hint came from, the curve it predicted and how each engine-model parameter
// was obtained: the prediction beside the outcome.
json PredictionToJson(const RowQualification& q) {
  json curve = json::array(), params = json::array();
  for (const PredictedPoint& p : q.predicted_curve) {
    curve.push_back({{"level", p.level}, {"gating_ms", Num(p.gating_ms)}, {"passes", p.passes}});
  }
  for (const engine::Parameter& p : q.prediction_parameters) {
    params.push_back({{"name", p.name},
                      {"value", Num(p.value)},
                      {"basis", engine::BasisName(p.basis)},
                      {"how", p.how}});
  }
  const std::optional<int> proven = q.proven_level();
  return json{{"source", q.prediction_source},
              {"refined_cmax", q.refined_cmax ? json(*q.refined_cmax) : json(nullptr)},
              {"curve", curve},
              {"parameters", params},
              {"error_levels",
               proven && q.predicted_cmax ? json(*proven - *q.predicted_cmax) : json(nullptr)}};
}

engine::Basis BasisFromName(const std::string& name) {
  if (name == "reported") return engine::Basis::kReported;
  if (name == "measured") return engine::Basis::kMeasured;
  return engine::Basis::kAssumed;
}

void PredictionFromJson(const json& d, RowQualification* q) {
  q->prediction_source = Get<std::string>(d, "source", "");
  if (d.contains("refined_cmax") && d["refined_cmax"].is_number_integer()) {
    q->refined_cmax = d["refined_cmax"].get<int>();
  }
  for (const auto& p : d.value("curve", json::array())) {
    q->predicted_curve.push_back(PredictedPoint{p.at("level").get<int>(), GetNum(p, "gating_ms"),
                                                Get<bool>(p, "passes", false)});
  }
  for (const auto& p : d.value("parameters", json::array())) {
    q->prediction_parameters.push_back(engine::Parameter{
        Get<std::string>(p, "name", ""), GetNum(p, "value"),
        BasisFromName(Get<std::string>(p, "basis", "")), Get<std::string>(p, "how", "")});
  }
}

TrialSummary TrialFromJson(const json& j) {
  TrialSummary t;
  t.phase = j.at("phase").get<std::string>();
  // A rate row's trial names its level and rate; a closed-loop trial its concurrency.
  t.concurrency = j.contains("level") ? j.at("level").get<int>() : j.at("concurrency").get<int>();
  t.rate_rps = Get<double>(j, "rate_rps", 0);
  t.trial = j.at("trial").get<int>();
  t.seed = Get<uint64_t>(j, "seed", 0);
  t.corpus = Get<std::string>(j, "corpus", "");
  t.max_cached_tokens = Get<int64_t>(j, "max_cached_tokens", -1);
  t.cold_allowed_tokens = Get<int64_t>(j, "cold_allowed_tokens", -1);
  t.move = Get<std::string>(j, "move", "");
  t.outcome = j.at("outcome").get<std::string>();
  t.exit_code = Get<int>(j, "exit_code", 3);
  t.latency_pass = Get<bool>(j, "latency_pass", false);
  t.correctness_pass = Get<bool>(j, "correctness_pass", false);
  t.complete = Get<bool>(j, "complete", false);
  t.slo = ChecksFromJson(j.value("slo", json::array()));
  t.tier_slo = ChecksFromJson(j.value("tier_slo", json::array()));
  t.reasons = j.value("reasons", std::vector<std::string>{});
  t.failed_gates = j.value("failed_gates", std::vector<std::string>{});
  t.stability_failures = j.contains("stability_failures")
                             ? j.at("stability_failures").get<std::vector<std::string>>()
                             : StabilityFailuresOf(t.reasons);
  t.queue_series = QueueSeriesFromJson(j.value("queue_series", json()));
  t.send_lateness_p99_ms = GetNum(j, "send_lateness_p99_ms");
  t.time_scale = Get<double>(j, "time_scale", 1.0);
  t.percentile_method = Get<std::string>(j, "percentile_method", "");
  if (j.contains("latency") && j["latency"].is_object()) {
    const json& l = j["latency"];
    t.has_metrics = true;
    t.requests = Get<size_t>(l, "requests", 0);
    t.ttft_ms = DistFromJson(l.value("ttft_ms", json()));
    t.itl_ms = DistFromJson(l.value("itl_ms", json()));
    t.e2e_ms = DistFromJson(l.value("e2e_ms", json()));
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
  return t;
}

json MarginToJson(const KeptMargin& m) {
  return json{{"level", m.level},
              {"at_recommended", m.at_recommended},
              {"trials", m.trials},
              {"gate", m.gate},
              {"measured_ms", Num(m.measured_ms)},
              {"below_ms", Num(m.below_ms)},
              {"headroom_pct", Num(m.headroom_pct())},
              {"text", m.text}};
}

KeptMargin MarginFromJson(const json& j) {
  KeptMargin m;
  m.level = j.at("level").get<int>();
  m.at_recommended = Get<bool>(j, "at_recommended", false);
  m.trials = Get<int>(j, "trials", 0);
  m.gate = Get<std::string>(j, "gate", "");
  m.measured_ms = GetNum(j, "measured_ms");
  m.below_ms = GetNum(j, "below_ms");
  m.text = Get<std::string>(j, "text", "");
  return m;
}

// A rate row's levels are written beside the rates they stand for, as in "result".
json RecommendationToJson(const Recommendation& r, const LoadScale& scale) {
  json pinned = json::array();
  for (const auto& p : r.requalify_on) pinned.push_back({{"field", p.field}, {"value", p.value}});
  json j{{"level", r.level ? json(*r.level) : json(nullptr)},
         {"from_level", r.from_level},
         {"steps_down", r.steps_down},
         {"thin_margin", r.thin_margin},
         {"noisy", r.noisy},
         {"rule", r.rule},
         {"reason", r.reason},
         {"margin", r.margin ? MarginToJson(*r.margin) : json(nullptr)},
         {"requalify_on", pinned}};
  if (scale.open_loop) j["rate_rps"] = r.level ? json(scale.Rate(*r.level)) : json(nullptr);
  return j;
}

Recommendation RecommendationFromJson(const json& j) {
  Recommendation r;
  if (!j.at("level").is_null()) r.level = j["level"].get<int>();
  r.from_level = Get<int>(j, "from_level", 0);
  r.steps_down = Get<int>(j, "steps_down", 0);
  r.thin_margin = Get<bool>(j, "thin_margin", false);
  r.noisy = Get<bool>(j, "noisy", false);
  r.rule = Get<std::string>(j, "rule", "");
  r.reason = Get<std::string>(j, "reason", "");
  if (j.contains("margin") && !j["margin"].is_null()) r.margin = MarginFromJson(j["margin"]);
  for (const auto& p : j.value("requalify_on", json::array())) {
    r.requalify_on.push_back({p.at("field").get<std::string>(), p.at("value").get<std::string>()});
  }
  return r;
}

json TierTrialToJson(const TierTrial& t) {
  return json{{"phase", t.phase},
              {"concurrency", t.concurrency},
              {"trial", t.trial},
              {"outcome", t.outcome},
              {"reused", t.reused}};
}

json TierToJson(const TierQualification& t) {
  auto level = [](const std::optional<int>& v) { return v ? json(*v) : json(nullptr); };
  json trials = json::array();
  for (const auto& x : t.trials) trials.push_back(TierTrialToJson(x));
  json decided = json::array();
  for (const auto* x : t.DecidedBy()) decided.push_back(TierTrialToJson(*x));
  return json{{"name", t.name},
              {"slo", GatesToJson(t.slo)},
              {"status", QualifyStatusName(t.status)},
              {"cmax", level(t.cmax)},
              {"operating_point", level(t.operating_point)},
              {"message", t.message},
              {"summary_line", t.summary_line},
              {"trials_run", t.trials_run},
              {"trials_reused", t.trials_reused},
              {"decided_by", decided},
              {"trials", trials}};
}

// "decided_by" is written for readers; it follows from "trials" and is derived again on reading.
Result<TierQualification> TierFromJson(const json& j) {
  TierQualification t;
  t.name = j.at("name").get<std::string>();
  for (const auto& g : j.at("slo")) {
    auto m = ParseSloMetric(g.at("metric").get<std::string>());
    if (!m.ok()) return m.status().WithContext(t.name + ".slo");
    t.slo.push_back(SloGate{*m, g.at("percentile").get<double>(), g.at("below_ms").get<double>()});
  }
  auto st = ParseQualifyStatus(j.at("status").get<std::string>());
  if (!st.ok()) return st.status().WithContext(t.name + ".status");
  t.status = *st;
  if (!j.at("cmax").is_null()) t.cmax = j["cmax"].get<int>();
  if (!j.at("operating_point").is_null()) t.operating_point = j["operating_point"].get<int>();
  t.message = Get<std::string>(j, "message", "");
  t.summary_line = Get<std::string>(j, "summary_line", "");
  t.trials_run = j.at("trials_run").get<int>();
  t.trials_reused = j.at("trials_reused").get<int>();
  for (const auto& x : j.at("trials")) {
    t.trials.push_back(TierTrial{x.at("phase").get<std::string>(), x.at("concurrency").get<int>(),
                                 x.at("trial").get<int>(), x.at("outcome").get<std::string>(),
                                 x.at("reused").get<bool>()});
  }
  return t;
}

void AddTiersJson(const RowQualification& q, json* j) {
  json tiers = json::array();
  for (const auto& t : q.tiers) tiers.push_back(TierToJson(t));
  json trials = json::array();
  for (const auto& t : q.tier_trials) trials.push_back(TrialSummaryToJson(t));
  (*j)["tiers"] = tiers;
  (*j)["tier_trials"] = trials;
}

// Throws json exceptions on a wrong type (the caller catches them); a bad name is a Status.
Status TiersFromJson(const json& rj, RowQualification* q) {
  for (const auto& tj : rj.at("tiers")) {
    Result<TierQualification> t = TierFromJson(tj);
    if (!t.ok()) return t.status();
    q->tiers.push_back(std::move(*t));
  }
  for (const auto& tj : rj.value("tier_trials", json::array())) {
    q->tier_trials.push_back(TrialFromJson(tj));
  }
  return Status::Ok();
}

}  // namespace

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

bool IsStabilityFailure(const std::string& reason) {
  // The served reuse of a reuse row fails the latency side the same way (validator.h, capacity).
  for (const char* gate : {"queue_bounded: ", "stationary: ", "schedule_held: ", "cache_reuse: "}) {
    if (reason.rfind(gate, 0) == 0) return true;
  }
  return false;
}

std::vector<std::string> StabilityFailuresOf(const std::vector<std::string>& reasons) {
  std::vector<std::string> out;
  for (const auto& r : reasons) {
    if (IsStabilityFailure(r)) out.push_back(r);
  }
  return out;
}

double TrialSummary::GateRatio() const {
  double worst = NAN;
  for (const auto& s : slo) {
    if (!std::isfinite(s.measured_ms) || s.below_ms <= 0) continue;
    double r = s.measured_ms / s.below_ms;
    if (!std::isfinite(worst) || r > worst) worst = r;
  }
  return worst;
}

double TrialSummary::GatingMs() const { return slo.empty() ? NAN : slo.front().measured_ms; }

RowInfo RowInfoFromRow(const Row& row) {
  RowInfo r;
  r.id = row.id;
  r.title = row.title;
  r.family = row.family;
  r.source_path = row.source_path;
  r.engine = EngineName(row.identity.engine);
  r.image = row.identity.image;
  r.model = row.identity.model;
  r.model_revision = row.identity.model_revision;
  r.served_model_name = row.identity.served_model_name;
  r.hardware = row.identity.hardware;
  r.driver = row.identity.driver;
  r.sim_profile = row.identity.sim_profile;
  r.time_scale = row.identity.time_scale;
  r.input_tokens = row.workload.input_tokens;
  r.output_tokens = row.workload.output_tokens;
  r.slo = row.slo;
  r.percentile_method = PercentileMethodName(row.percentile_method);
  r.warmup_requests = row.warmup.requests;
  r.warmup_concurrency = row.warmup.concurrency;
  r.min_requests = row.measured.min_requests;
  r.per_concurrency = row.measured.per_concurrency;
  r.trials_count = row.trials.count;
  r.quiet_period_s = row.trials.quiet_period_s;
  r.expected_cmax = row.expect.cmax;
  r.arrival = ArrivalKindName(row.workload.arrival_kind);
  if (row.open_loop()) {
    const OpenLoop& o = row.workload.open_loop;
    r.rate_step_rps = o.rate_step_rps;
    r.measured_duration_s = o.duration_s;
    r.measured_requests = o.requests;
    r.ramp_s = o.ramp_s;
    r.expected_rmax_rps = row.expect.rmax_rps;
  }
  if (row.mix) r.mix = row.mix->classes;
  for (MixClass& c : r.mix) c.samples.clear();
  r.reuse = ReuseInWords(row);
  return r;
}

const char* QualifyStatusName(QualifyStatus s) {
  switch (s) {
    case QualifyStatus::kProven:
      return "proven";
    case QualifyStatus::kLowered:
      return "lowered";
    case QualifyStatus::kNoFailUpToCap:
      return "no_fail_up_to_cap";
    case QualifyStatus::kFailsAtOne:
      return "fails_at_one";
    case QualifyStatus::kCorrectnessFail:
      return "correctness_fail";
    case QualifyStatus::kCouldNotRun:
      return "could_not_run";
    case QualifyStatus::kBaselineMismatch:
      return "baseline_mismatch";
    case QualifyStatus::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

Result<QualifyStatus> ParseQualifyStatus(const std::string& name) {
  for (QualifyStatus s :
       {QualifyStatus::kProven, QualifyStatus::kLowered, QualifyStatus::kNoFailUpToCap,
        QualifyStatus::kFailsAtOne, QualifyStatus::kCorrectnessFail, QualifyStatus::kCouldNotRun,
        QualifyStatus::kBaselineMismatch, QualifyStatus::kInterrupted}) {
    if (name == QualifyStatusName(s)) return s;
  }
  return Status::InvalidArgument("unknown qualification status '" + name + "'");
}

int QualifyExitCode(QualifyStatus s) {
  switch (s) {
    case QualifyStatus::kProven:
      return 0;
    case QualifyStatus::kLowered:
    case QualifyStatus::kNoFailUpToCap:
    case QualifyStatus::kFailsAtOne:
      return 1;
    case QualifyStatus::kCorrectnessFail:
      return 2;
    case QualifyStatus::kCouldNotRun:
    case QualifyStatus::kBaselineMismatch:
      return 3;
    case QualifyStatus::kInterrupted:
      return 130;
  }
  return 3;
}

std::optional<int> RowQualification::proven_level() const {
  if (cmax) return cmax;
  if (rmax_rps && row.rate_step_rps > 0) {
    return static_cast<int>(std::llround(*rmax_rps / row.rate_step_rps));
  }
  return std::nullopt;
}

std::vector<const TrialSummary*> RowQualification::Trials(const std::string& phase,
                                                          int concurrency) const {
  std::vector<const TrialSummary*> out;
  for (const auto& t : trials) {
    if (t.phase == phase && t.concurrency == concurrency) out.push_back(&t);
  }
  return out;
}

std::optional<int> TierQualification::admitted() const {
  if (status == QualifyStatus::kProven) return cmax;
  if (status == QualifyStatus::kLowered) return operating_point;
  return std::nullopt;
}

std::vector<const TierTrial*> TierQualification::DecidedBy() const {
  std::vector<const TierTrial*> out;
  const std::optional<int> level = admitted();
  for (const auto& t : trials) {
    if (level && t.phase == "confirm" && (t.concurrency == *level || t.concurrency == *level + 1)) {
      out.push_back(&t);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const TierTrial* a, const TierTrial* b) {
    return a->concurrency != b->concurrency ? a->concurrency < b->concurrency : a->trial < b->trial;
  });
  return out;
}

const TrialSummary* RowQualification::FindTrial(const std::string& phase, int concurrency,
                                                int trial) const {
  for (const auto* list : {&trials, &tier_trials}) {
    for (const auto& t : *list) {
      if (t.phase == phase && t.concurrency == concurrency && t.trial == trial) return &t;
    }
  }
  return nullptr;
}

json TrialSummaryToJson(const TrialSummary& t) {
  json slo = ChecksToJson(t.slo);
  json j{{"phase", t.phase},
         {"trial", t.trial},
         {"seed", t.seed},
         {"corpus", t.corpus},
         {"max_cached_tokens", t.max_cached_tokens},
         {"cold_allowed_tokens", t.cold_allowed_tokens},
         {"move", t.move},
         {"outcome", t.outcome},
         {"exit_code", t.exit_code},
         {"latency_pass", t.latency_pass},
         {"correctness_pass", t.correctness_pass},
         {"complete", t.complete},
         {"slo", slo},
         {"reasons", t.reasons},
         {"failed_gates", t.failed_gates},
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
  if (t.rate_rps > 0) {
    j["level"] = t.concurrency;
    j["rate_rps"] = t.rate_rps;
    j["stability_failures"] = t.stability_failures;
    j["queue_series"] = QueueSeriesToJson(t.queue_series);
    j["send_lateness_p99_ms"] = Num(t.send_lateness_p99_ms);
  } else {
    j["concurrency"] = t.concurrency;
  }
  if (t.has_metrics) {
    json arrival = json::array();
    for (double v : t.ttft_ms_by_arrival) arrival.push_back(Num(v));
    j["latency"] = json{{"requests", t.requests},
                        {"ttft_ms", DistToJson(t.ttft_ms)},
                        {"ttft_p95_steady_ms", Num(t.ttft_p95_steady_ms)},
                        {"itl_ms", DistToJson(t.itl_ms)},
                        {"e2e_ms", DistToJson(t.e2e_ms)},
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
  return j;
}

namespace {

json RowQualificationCoreToJson(const RowQualification& q) {
  json phases = json::array();
  for (const auto& p : q.phases) {
    phases.push_back({{"name", p.name},
                      {"trials", p.trials},
                      {"wall_s", p.wall_s},
                      {"start_offset_s", p.start_offset_s}});
  }
  json trials = json::array();
  for (const auto& t : q.trials) trials.push_back(TrialSummaryToJson(t));
  auto opt = [](const std::optional<double>& v) { return v ? Num(*v) : json(nullptr); };
  const BaselineCheck& b = q.baseline;
  auto level = [](const std::optional<int>& v) { return v ? json(*v) : json(nullptr); };
  json result{{"status", QualifyStatusName(q.status)},
              {"cmax", level(q.cmax)},
              {"operating_point", level(q.operating_point)},
              {"message", q.message},
              {"failed_gate", q.failed_gate},
              {"summary_line", q.summary_line}};
  json locate{
      {"probes", q.probes}, {"probe_budget", q.probe_budget}, {"prediction", q.prediction_note}};
  if (!q.prediction_source.empty()) locate["prediction_detail"] = PredictionToJson(q);
  if (q.row.open_loop()) {
    // A rate row's result is a rate; its levels are written beside the rates they stand for.
    const LoadScale scale = q.row.scale();
    auto rate = [&](const std::optional<int>& v) {
      return v ? json(scale.Rate(*v)) : json(nullptr);
    };
    result["rmax_rps"] = q.rmax_rps ? json(*q.rmax_rps) : json(nullptr);
    result["operating_point_rps"] = rate(q.operating_point);
    locate["max_level"] = q.max_concurrency;
    locate["max_rps"] = scale.Rate(q.max_concurrency);
    locate["predicted_level"] = level(q.predicted_cmax);
    locate["predicted_rps"] = rate(q.predicted_cmax);
  } else {
    locate["max_concurrency"] = q.max_concurrency;
    locate["predicted_cmax"] = level(q.predicted_cmax);
  }
  return json{{"row", RowInfoToJson(q.row)},
              {"result", result},
              {"recommendation", RecommendationToJson(q.recommendation, q.row.scale())},
              {"locate", locate},
              {"baseline",
               {{"checked", b.checked},
                {"within", b.within},
                {"ttft_p50_ms", opt(b.ttft_p50_ms)},
                {"expected_ttft_p50_ms", opt(b.expected_ttft_p50_ms)},
                {"itl_p50_ms", opt(b.itl_p50_ms)},
                {"expected_itl_p50_ms", opt(b.expected_itl_p50_ms)},
                {"tolerance_pct", b.tolerance_pct},
                {"message", b.message}}},
              {"phases", phases},
              {"trials", trials},
              {"started_utc", q.started_utc},
              {"finished_utc", q.finished_utc},
              {"wall_s", q.wall_s},
              {"complete", q.complete},
              {"url", q.url}};
}

}  // namespace

json RowQualificationToJson(const RowQualification& q) {
  json j = RowQualificationCoreToJson(q);
  if (!q.tiers.empty()) AddTiersJson(q, &j);
  return j;
}

json CapacityDataToJson(const CapacityData& d) {
  json rows = json::array();
  for (const auto& r : d.rows) rows.push_back(RowQualificationToJson(r));
  return json{{"schema", d.schema},
              {"generated_utc", d.generated_utc},
              {"command", d.command},
              {"rows", rows}};
}

Result<CapacityData> CapacityDataFromJson(const json& j) {
  CapacityData d;
  std::string where = "capacity data";
  try {
    if (!j.is_object()) return Status::InvalidArgument("capacity data: not a JSON object");
    d.schema = j.at("schema").get<std::string>();
    if (d.schema != kCapacitySchema) {
      return Status::InvalidArgument("capacity data: schema '" + d.schema + "', expected '" +
                                     kCapacitySchema + "'");
    }
    d.generated_utc = Get<std::string>(j, "generated_utc", "");
    d.command = Get<std::string>(j, "command", "");
    size_t ri = 0;
    for (const auto& rj : j.at("rows")) {
      where = "rows[" + std::to_string(ri++) + "]";
      RowQualification q;
      auto info = RowInfoFromJson(rj.at("row"));
      if (!info.ok()) return info.status().WithContext("capacity data: " + where + ".row");
      q.row = *info;
      const json& res = rj.at("result");
      auto st = ParseQualifyStatus(res.at("status").get<std::string>());
      if (!st.ok()) return st.status().WithContext("capacity data: " + where + ".result.status");
      q.status = *st;
      if (!res.at("cmax").is_null()) q.cmax = res["cmax"].get<int>();
      if (res.contains("rmax_rps") && !res["rmax_rps"].is_null()) {
        q.rmax_rps = res["rmax_rps"].get<double>();
      }
      if (res.contains("operating_point") && !res["operating_point"].is_null()) {
        q.operating_point = res["operating_point"].get<int>();
      }
      q.message = Get<std::string>(res, "message", "");
      q.failed_gate = Get<std::string>(res, "failed_gate", "");
      q.summary_line = Get<std::string>(res, "summary_line", "");
      if (rj.contains("locate")) {
        const json& loc = rj["locate"];
        q.max_concurrency = loc.contains("max_level") ? Get<int>(loc, "max_level", 0)
                                                      : Get<int>(loc, "max_concurrency", 0);
        q.probes = Get<int>(loc, "probes", 0);
        q.probe_budget = Get<int>(loc, "probe_budget", 0);
        for (const char* key : {"predicted_cmax", "predicted_level"}) {
          if (loc.contains(key) && !loc[key].is_null()) q.predicted_cmax = loc[key].get<int>();
        }
        q.prediction_note = Get<std::string>(rj["locate"], "prediction", "");
        if (const json d = loc.value("prediction_detail", json()); d.is_object()) {
          PredictionFromJson(d, &q);
        }
      }
      if (rj.contains("baseline")) {
        const json& b = rj["baseline"];
        auto opt = [&](const char* k) -> std::optional<double> {
          double v = GetNum(b, k);
          if (std::isnan(v)) return std::nullopt;
          return v;
        };
        q.baseline.checked = Get<bool>(b, "checked", false);
        q.baseline.within = Get<bool>(b, "within", true);
        q.baseline.ttft_p50_ms = opt("ttft_p50_ms");
        q.baseline.expected_ttft_p50_ms = opt("expected_ttft_p50_ms");
        q.baseline.itl_p50_ms = opt("itl_p50_ms");
        q.baseline.expected_itl_p50_ms = opt("expected_itl_p50_ms");
        q.baseline.tolerance_pct = Get<double>(b, "tolerance_pct", 0);
        q.baseline.message = Get<std::string>(b, "message", "");
      }
      for (const auto& p : rj.value("phases", json::array())) {
        q.phases.push_back(PhaseCost{p.at("name").get<std::string>(), Get<int>(p, "trials", 0),
                                     Get<double>(p, "wall_s", 0),
                                     Get<double>(p, "start_offset_s", 0)});
      }
      size_t ti = 0;
      for (const auto& tj : rj.at("trials")) {
        where = "rows[" + std::to_string(ri - 1) + "].trials[" + std::to_string(ti++) + "]";
        q.trials.push_back(TrialFromJson(tj));
      }
      q.started_utc = Get<std::string>(rj, "started_utc", "");
      q.finished_utc = Get<std::string>(rj, "finished_utc", "");
      q.wall_s = Get<double>(rj, "wall_s", 0);
      q.complete = Get<bool>(rj, "complete", false);
      q.url = Get<std::string>(rj, "url", "");
      // Data written before recommendations reads without one (RecommendWhereNotRecorded).
      where = "rows[" + std::to_string(ri - 1) + "].recommendation";
      q.recommendation_recorded = rj.contains("recommendation");
      if (q.recommendation_recorded) {
        q.recommendation = RecommendationFromJson(rj.at("recommendation"));
      }
      if (rj.contains("tiers")) {
        where = "rows[" + std::to_string(ri - 1) + "].tiers";
        if (Status st = TiersFromJson(rj, &q); !st.ok()) {
          return st.WithContext("capacity data: " + where);
        }
      }
      d.rows.push_back(std::move(q));
    }
  } catch (const json::exception& e) {
    return Status::InvalidArgument("capacity data: " + where + ": " + e.what());
  }
  return d;
}

namespace capdata {

Result<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::IoError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IoError(path + ": read failed");
  return ss.str();
}

}  // namespace capdata

Result<CapacityData> ReadCapacityData(const std::string& path) {
  auto text = capdata::ReadFileToString(path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(path + ": not valid JSON");
  auto d = CapacityDataFromJson(j);
  if (!d.ok()) return d.status().WithContext(path);
  return d;
}

Status WriteCapacityData(const std::string& path, const CapacityData& d) {
  return WriteFileAtomic(path, CapacityDataToJson(d).dump(2) + "\n", ParentDirs::kCreate);
}

Result<TrialSummary> ReadTrialDir(const std::string& dir) {
  TrialSummary t;
  t.dir = dir;
  auto vtext = capdata::ReadFileToString((fs::path(dir) / "verdict.json").string());
  if (!vtext.ok()) return vtext.status();
  json v = json::parse(*vtext, nullptr, false);
  if (v.is_discarded() || !v.is_object()) {
    return Status::InvalidArgument(dir + "/verdict.json: not a JSON object");
  }
  try {
    t.concurrency = Get<int>(v, "concurrency", 0);
    t.trial = Get<int>(v, "trial", 1);
    t.seed = Get<uint64_t>(v, "seed", 0);
    t.phase = Get<std::string>(v, "phase", "");
    t.outcome = v.at("outcome").get<std::string>();
    t.exit_code = Get<int>(v, "exit_code", 3);
    t.latency_pass = Get<bool>(v, "latency_pass", false);
    t.correctness_pass = Get<bool>(v, "correctness_pass", false);
    t.complete = Get<bool>(v, "complete", false);
    t.time_scale = Get<double>(v, "time_scale", 1.0);
    t.started_utc = Get<std::string>(v, "started_utc", "");
    for (const auto& s : v.value("slo", json::array())) {
      t.slo.push_back(SloCheck{Get<std::string>(s, "metric", ""), Get<double>(s, "percentile", 0),
                               Get<double>(s, "below_ms", 0), GetNum(s, "measured_ms"),
                               Get<bool>(s, "passed", false)});
    }
    for (const auto& r : v.value("reasons", json::array())) {
      if (r.is_string()) t.reasons.push_back(r.get<std::string>());
    }
    t.tier_slo = ChecksFromJson(v.value("tier_slo", json::array()));
    t.stability_failures = StabilityFailuresOf(t.reasons);
    if (const json st = v.value("stability", json()); st.is_object()) {
      t.queue_series = QueueSeriesFromJson(st.value("series", json()));
      t.send_lateness_p99_ms = GetNum(st.value("send_lateness_ms", json::object()), "p99");
    }
    const json corr = v.value("correctness", json::object());
    for (const auto& g : corr.value("gates", json::array())) {
      if (Get<bool>(g, "enabled", true) && !Get<bool>(g, "passed", false) &&
          !Get<bool>(g, "capacity", false)) {
        t.failed_gates.push_back(Get<std::string>(g, "name", "?") + ": " +
                                 Get<std::string>(g, "evidence", ""));
      }
    }
    if (const json ff = v.value("fail_fast", json()); ff.is_object()) {
      // The gate fail fast stopped at comes first: it is what ended the trial.
      t.failed_gates.insert(t.failed_gates.begin(),
                            Get<std::string>(ff, "gate", "?") + ": stopped at the first broken " +
                                "stream " + Get<std::string>(ff, "request", "?") + ": " +
                                Get<std::string>(ff, "evidence", ""));
    }
    t.totals = TotalsFromJson(corr.value("totals", json()));
  } catch (const json::exception& e) {
    return Status::InvalidArgument(dir + "/verdict.json: " + e.what());
  }

  auto mtext = capdata::ReadFileToString((fs::path(dir) / "metrics.json").string());
  if (mtext.ok()) {
    json m = json::parse(*mtext, nullptr, false);
    if (m.is_discarded() || !m.is_object()) {
      return Status::InvalidArgument(dir + "/metrics.json: not a JSON object");
    }
    try {
      t.has_metrics = true;
      t.percentile_method = Get<std::string>(m, "percentile_method", "");
      t.requests = Get<size_t>(m, "requests", 0);
      t.ttft_ms = DistFromJson(m.value("ttft_ms", json()));
      t.itl_ms = DistFromJson(m.value("itl_ms", json()));
      t.e2e_ms = DistFromJson(m.value("e2e_ms", json()));
      t.ttft_p95_steady_ms = GetNum(m, "ttft_p95_steady_ms");
      for (const auto& x : m.value("ttft_ms_by_arrival", json::array())) {
        t.ttft_ms_by_arrival.push_back(x.is_number() ? x.get<double>() : NAN);
      }
      t.output_tok_s = GetNum(m, "output_tok_s");
      t.request_per_s = GetNum(m, "request_per_s");
      t.duration_s = GetNum(m, "duration_s");
      t.prompt_tokens_min = Get<int64_t>(m, "prompt_tokens_min", 0);
      t.prompt_tokens_max = Get<int64_t>(m, "prompt_tokens_max", 0);
      t.tokens_per_chunk_mean = GetNum(m, "tokens_per_chunk_mean");
      if (!std::isfinite(t.tokens_per_chunk_mean)) t.tokens_per_chunk_mean = 0;
      if (m.contains("reuse") && m["reuse"].is_object()) t.reuse = ReuseFiguresFromJson(m["reuse"]);
    } catch (const json::exception& e) {
      return Status::InvalidArgument(dir + "/metrics.json: " + e.what());
    }
  }
  if (auto p = capdata::ReadFileToString((fs::path(dir) / "plan.json").string()); p.ok()) {
    json plan = json::parse(*p, nullptr, false);
    if (plan.is_object() && plan.contains("corpus") && plan["corpus"].is_object()) {
      t.corpus = Get<std::string>(plan["corpus"], "id", "");
    }
  }
  if (auto i = capdata::ReadFileToString((fs::path(dir) / "identity.json").string()); i.ok()) {
    json id = json::parse(*i, nullptr, false);
    if (id.is_object() && id.contains("cold_prefix") && id["cold_prefix"].is_object()) {
      const json& c = id["cold_prefix"];
      t.cold_allowed_tokens = Get<int64_t>(c, "allowed_tokens", -1);
      if (c.contains("max_cached_tokens") && c["max_cached_tokens"].is_number_integer()) {
        t.max_cached_tokens = c["max_cached_tokens"].get<int64_t>();
      }
    }
  }
  if (auto i = capdata::ReadFileToString((fs::path(dir) / "server_info.json").string()); i.ok()) {
    json info = json::parse(*i, nullptr, false);
    if (info.is_object() && info.contains("limits") && info["limits"].is_object()) {
      for (const auto& [k, v] : info["limits"].items()) {
        if (v.is_string()) t.server_limits[k] = v.get<std::string>();
      }
    }
  }
  if (auto c = capdata::ReadFileToString((fs::path(dir) / "command.txt").string()); c.ok()) {
    std::string s = *c;
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    t.command = s;
  }
  if (auto c = capdata::ReadFileToString((fs::path(dir) / "SHA256SUMS").string()); c.ok()) {
    t.sha256sums = *c;
  }
  t.classes = ClassVerdictsFromJson(v.value("classes", json::array()));
  t.class_slo = ClassChecksOf(t);
  return t;
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

}  // namespace capq

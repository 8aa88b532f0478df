#include "capq/record/verdict.h"

#include <cmath>

#include "capacity_data_internal.h"
#include "capq/record/artifacts.h"
#include "capq/text.h"

namespace capq {
namespace {

nlohmann::json Number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nullptr; }

double NumberOr(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : std::nan("");
}

}  // namespace

const char* TrialOutcomeName(TrialOutcome o) {
  switch (o) {
    case TrialOutcome::kPass:
      return "pass";
    case TrialOutcome::kSloFail:
      return "slo_fail";
    case TrialOutcome::kCorrectnessFail:
      return "correctness_fail";
    case TrialOutcome::kCouldNotRun:
      return "could_not_run";
    case TrialOutcome::kInterrupted:
      return "interrupted";
  }
  return "could_not_run";
}

Result<TrialOutcome> ParseTrialOutcome(const std::string& name) {
  for (TrialOutcome o :
       {TrialOutcome::kPass, TrialOutcome::kSloFail, TrialOutcome::kCorrectnessFail,
        TrialOutcome::kCouldNotRun, TrialOutcome::kInterrupted}) {
    if (name == TrialOutcomeName(o)) return o;
  }
  return Status::InvalidArgument("unknown trial outcome '" + name + "'");
}

int TrialVerdict::ExitCode() const {
  switch (outcome) {
    case TrialOutcome::kPass:
      return 0;
    case TrialOutcome::kSloFail:
      return 1;
    case TrialOutcome::kCorrectnessFail:
      return 2;
    case TrialOutcome::kCouldNotRun:
      return 3;
    case TrialOutcome::kInterrupted:
      return 130;
  }
  return 3;
}

std::string ClassMissText(const ClassVerdict& c, size_t i, const SloGate& gate) {
  const std::string what = "class " + c.name + ": p" + FormatShortest(gate.percentile) + " " +
                           SloMetricName(gate.metric);
  const std::string bound = Fmt("%.1f", gate.below_ms) + " ms";
  if (!std::isfinite(c.gate_ms[i])) return what + ": nothing measured, so it is not below " + bound;
  return what + " " + Fmt("%.1f", c.gate_ms[i]) + " ms is not below " + bound;
}

bool ClassVerdict::passed() const {
  for (bool p : gate_passed) {
    if (!p) return false;
  }
  return !gate_passed.empty();
}

nlohmann::json ClassVerdictsToJson(const std::vector<ClassVerdict>& classes) {
  nlohmann::json out = nlohmann::json::array();
  for (const ClassVerdict& c : classes) {
    nlohmann::json gates = nlohmann::json::array();
    for (size_t i = 0; i < c.gate_ms.size(); ++i) {
      gates.push_back({{"measured_ms", Number(c.gate_ms[i])}, {"passed", c.gate_passed[i]}});
    }
    out.push_back({{"class", c.name},
                   {"requests", c.requests},
                   {"ttft_p50_ms", Number(c.ttft_p50_ms)},
                   {"ttft_p95_ms", Number(c.ttft_p95_ms)},
                   {"ttft_p99_ms", Number(c.ttft_p99_ms)},
                   {"passed", c.passed()},
                   {"slo", gates}});
  }
  return out;
}

std::vector<ClassVerdict> ClassVerdictsFromJson(const nlohmann::json& j) {
  std::vector<ClassVerdict> out;
  if (!j.is_array()) return out;
  for (const nlohmann::json& e : j) {
    ClassVerdict c;
    c.name = e.value("class", "");
    c.requests = e.value("requests", 0);
    c.ttft_p50_ms = NumberOr(e, "ttft_p50_ms");
    c.ttft_p95_ms = NumberOr(e, "ttft_p95_ms");
    c.ttft_p99_ms = NumberOr(e, "ttft_p99_ms");
    for (const nlohmann::json& g : e.value("slo", nlohmann::json::array())) {
      c.gate_ms.push_back(NumberOr(g, "measured_ms"));
      c.gate_passed.push_back(g.value("passed", false));
    }
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

nlohmann::json GateResultsToJson(const std::vector<SloGateResult>& gates) {
  nlohmann::json slo = nlohmann::json::array();
  for (const auto& g : gates) {
    nlohmann::json e = {{"metric", SloMetricName(g.gate.metric)},
                        {"percentile", g.gate.percentile},
                        {"below_ms", g.gate.below_ms},
                        {"passed", g.passed}};
    e["measured_ms"] = std::isfinite(g.measured_ms) ? nlohmann::json(g.measured_ms) : nullptr;
    e["confidence"] = ConfidenceToJson(g.confidence);
    if (g.at_least) e["at_least"] = true;
    slo.push_back(e);
  }
  return slo;
}

// Throws nlohmann::json exceptions on a missing or mistyped field (the caller turns them into a
// Status).
std::vector<SloGateResult> GateResultsFromJson(const nlohmann::json& a) {
  std::vector<SloGateResult> out;
  for (const auto& e : a) {
    SloGateResult g;
    std::string metric = e.at("metric").get<std::string>();
    g.gate.metric = metric == "itl"   ? SloMetric::kItl
                    : metric == "e2e" ? SloMetric::kE2e
                                      : SloMetric::kTtft;
    g.gate.percentile = e.at("percentile").get<double>();
    g.gate.below_ms = e.at("below_ms").get<double>();
    g.measured_ms =
        e.at("measured_ms").is_null() ? std::nan("") : e.at("measured_ms").get<double>();
    g.passed = e.at("passed").get<bool>();
    g.confidence = ConfidenceFromJson(e.value("confidence", nlohmann::json()));
    g.at_least = e.value("at_least", false);
    out.push_back(g);
  }
  return out;
}

}  // namespace

nlohmann::json VerdictToJson(const TrialVerdict& v, const VerdictContext& ctx) {
  nlohmann::json slo = GateResultsToJson(v.slo);
  nlohmann::json j = {{"schema", kVerdictSchema},
                      {"row_id", ctx.row_id},
                      {"concurrency", ctx.level},
                      {"trial", ctx.trial_index},
                      {"seed", ctx.seed},
                      {"phase", PhaseName(ctx.phase)},
                      {"outcome", TrialOutcomeName(v.outcome)},
                      {"exit_code", v.ExitCode()},
                      {"latency_pass", v.latency_pass},
                      {"correctness_pass", v.correctness_pass},
                      {"slo", slo},
                      {"correctness", CorrectnessToJson(v.correctness)},
                      {"reasons", v.reasons},
                      {"time_scale", ctx.time_scale},
                      {"started_utc", ctx.started_utc},
                      {"complete", ctx.complete}};
  if (ctx.insecure_tls) j["insecure_tls"] = true;
  if (!v.tier_slo.empty()) j["tier_slo"] = GateResultsToJson(v.tier_slo);
  if (v.stability) j["stability"] = StabilityToJson(*v.stability);
  if (!v.misses.empty()) j["misses"] = GateMissesToJson(v.misses);
  if (!v.classes.empty()) j["classes"] = ClassVerdictsToJson(v.classes);
  if (v.decided) j["early_decision"] = EarlyDecisionToJson(*v.decided);
  if (const auto& b = v.stopped_at) {
    j["fail_fast"] = {{"gate", b->gate},
                      {"request", b->request_id},
                      {"warmup", b->warmup},
                      {"evidence", b->evidence}};
  }
  return j;
}

Result<StoredVerdict> VerdictFromJson(const nlohmann::json& j) {
  try {
    if (j.value("schema", "") != kVerdictSchema) {
      return Status::InvalidArgument("verdict.json: schema is not " + std::string(kVerdictSchema));
    }
    StoredVerdict s;
    Result<TrialOutcome> o = ParseTrialOutcome(j.at("outcome").get<std::string>());
    if (!o.ok()) return o.status();
    s.verdict.outcome = *o;
    s.verdict.latency_pass = j.at("latency_pass").get<bool>();
    s.verdict.correctness_pass = j.at("correctness_pass").get<bool>();
    s.verdict.reasons = j.at("reasons").get<std::vector<std::string>>();
    s.verdict.slo = GateResultsFromJson(j.at("slo"));
    if (j.contains("tier_slo")) s.verdict.tier_slo = GateResultsFromJson(j.at("tier_slo"));
    s.verdict.classes = ClassVerdictsFromJson(j.value("classes", nlohmann::json::array()));
    s.verdict.misses = GateMissesFromJson(j.value("misses", nlohmann::json::array()));
    if (j.contains("stability")) s.verdict.stability = StabilityFromJson(j.at("stability"));
    s.correctness_json = j.at("correctness");
    s.context.row_id = j.at("row_id").get<std::string>();
    s.context.level = j.at("concurrency").get<int>();
    s.context.trial_index = j.at("trial").get<int>();
    s.context.seed = j.at("seed").get<uint64_t>();
    s.context.phase = capjson::PhaseAt(j, "phase");
    s.context.time_scale = j.at("time_scale").get<double>();
    s.context.started_utc = j.at("started_utc").get<std::string>();
    s.context.complete = j.at("complete").get<bool>();
    s.context.insecure_tls = j.value("insecure_tls", false);
    if (j.contains("early_decision")) {
      s.verdict.decided = EarlyDecisionFromJson(j.at("early_decision"));
    }
    if (j.contains("fail_fast")) {
      const nlohmann::json& f = j.at("fail_fast");
      s.verdict.stopped_at =
          StreamBreak{f.at("gate").get<std::string>(), f.at("request").get<std::string>(),
                      f.at("warmup").get<bool>(), f.at("evidence").get<std::string>()};
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("verdict.json: ") + e.what());
  }
}

}  // namespace capq

// A trial decided: its correctness gates validated, its metrics computed, its verdict reached,
// and the interruption or lost server that keeps a verdict from being green.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/fail_fast.h"
#include "capq/targets/target.h"
#include "capq/trial/class_gates.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

// Server-side cache-hit counter over the measured phase (used only where requests report none):
// the last sample before the measured burst to the snapshot after it.
// Cache-hit prompt tokens from the last /metrics sample before the measured phase to the end;
// `window_requests` says how many requests that window holds: the measured ones and every warm-up
// request still running when the base was read (its prefill may come after).
std::optional<int64_t> ServerCachedTokens(const Trial& t, int64_t* window_requests) {
  auto after = t.target->ParseCachedTokens(t.after_text);
  if (!after) return std::nullopt;
  std::optional<double> base = t.target->ParseCachedTokens(t.before_text);
  MonoNs base_ns = 0;  // the snapshot before the load
  for (const auto& l : t.s.server_metrics) {
    if (l.value("kind", "") == "sample" && l.contains("cached_tokens_total") &&
        l["t_ns"].get<MonoNs>() <= t.s.load->measured_start_ns) {
      base = l["cached_tokens_total"].get<double>();
      base_ns = l["t_ns"].get<MonoNs>();
    }
  }
  *window_requests = static_cast<int64_t>(t.s.meas.size());
  for (const RequestResult& r : t.s.warm) *window_requests += r.end_ns > base_ns ? 1 : 0;
  if (!base) return std::nullopt;
  return static_cast<int64_t>(std::llround(*after - *base));
}

// The fail-fast stop, from the record that caused it (as `capq validate` derives it).
std::optional<StreamBreak> StopOf(const TrialState& s) {
  if (s.load->stopped_by.empty()) return std::nullopt;
  const auto decoded = [&s](const std::string& id) -> const RequestResult* {
    for (const auto* phase : {&s.warm, &s.meas}) {
      for (const RequestResult& r : *phase) {
        if (r.id == id) return &r;
      }
    }
    return nullptr;
  };
  for (const RawRecord& r : s.load->records) {
    if (r.id != s.load->stopped_by) continue;
    if (const RequestResult* d = decoded(r.id)) {
      if (auto b = FindStreamBreak(r, *d, s.fail_fast)) return b;
    }
  }
  return StreamBreak{"fail_fast", s.load->stopped_by, false, s.load->stop_reason};
}

}  // namespace

void UnprovenDecision(const std::string& why, TrialVerdict* v) {
  v->outcome = TrialOutcome::kCouldNotRun;
  v->latency_pass = false;
  v->reasons.insert(v->reasons.begin(), why + ": the trial was cut short without a verdict");
}

// Validate, measure, decide.
void Judge(Trial& t) {
  TrialState& s = t.s;
  const Row& row = *s.row;
  t.ev.counted_as_zero = internal::ApplyCacheCounterRule(t.ev.cache_counter, &t.s.warm, &t.s.meas);
  internal::ColdPrefix cold =
      internal::EstimateColdPrefix(*s.plan, t.s.warm, t.s.meas, t.ev.template_prefix_tokens);
  t.ev.server_cached_tokens_total = ServerCachedTokens(t, &t.ev.server_cached_window_requests);
  s.identity["cold_prefix"] = internal::ColdPrefixToJson(cold);
  s.identity["cold_prefix"]["server_cached_tokens_total"] =
      t.ev.server_cached_tokens_total ? nlohmann::json(*t.ev.server_cached_tokens_total) : nullptr;
  s.identity["cold_prefix"]["server_cached_window_requests"] = t.ev.server_cached_window_requests;
  ValidationInput vin = internal::MakeValidationInput(row, *s.plan, t.s.warm, t.s.meas, cold, t.ev);
  CorrectnessReport correctness = Validate(vin);
  if (row.reuse()) {
    s.metrics_extra["reuse"] = ReuseFiguresToJson(internal::MeasureReuse(*s.plan, vin, t.scale));
  }
  if (SendsTraceSamples(row)) {
    s.metrics_extra["sent"] = SentRequestsToJson(internal::MeasureSent(*s.plan, t.s.meas, t.scale));
  }
  std::string undecided;
  std::optional<EarlyDecision> decided =
      s.load->decided ? RederiveDecision(row, s.plan->level, t.s.meas, s.load->decided->at_ns,
                                         s.load->measured_start_ns, &undecided)
                      : std::nullopt;
  internal::LatencyJudgement lat = internal::JudgeLatency(
      row, *s.plan, &t.s.meas, internal::ServerLoadSamples(s.server_metrics), t.scale);
  s.metrics = std::move(lat.metrics);
  if (lat.actual_send) {
    s.metrics_extra["latency_origin"] =
        "intended send: every latency counts from when the schedule meant the request to leave";
    s.metrics_extra["counted_from_actual_send"] = MetricsToJson(*lat.actual_send);
  }
  s.metrics_extra["time_conversion"] = t.scale == 1.0 ? "none: durations are wall time"
                                                      : "every duration is wall time x " +
                                                            std::to_string(t.scale) +
                                                            " (the simulator's virtual time)";
  s.metrics_extra["calibration"] = s.plan->calibration;
  s.metrics_extra["input_tokens_configured"] = row.workload.input_tokens;
  s.metrics_extra["cold_prefix_tokens_allowed"] = cold.allowed_tokens;
  // Wall seconds the load generator waited for its recorder (loadgen.h): reads that much late.
  s.metrics_extra["recorder_wait_s"] = NsToS(s.load->recorder_wait_ns);
  if (s.load->loops.size() > 1) s.metrics_extra["load_loops"] = LoopFiguresToJson(s.load->loops);
  s.verdict = Decide(row, *s.metrics, correctness, StopOf(s), lat.stability, decided);
  ApplyClassGates(row, JudgeClasses(row, *s.plan, t.s.meas, t.scale), &s.verdict);
  if (!undecided.empty()) UnprovenDecision(undecided, &s.verdict);
  // The chunk gaps have been measured; nothing after reads them (results.jsonl leaves them out).
  for (auto* phase : {&s.warm, &s.meas}) {
    for (RequestResult& r : *phase) std::vector<float>().swap(r.text_gaps_ms);
  }
}

// An interrupted load or a server that went away: no verdict can be green, the records stay.
PhaseEnd CheckCompleted(Trial& t) {
  TrialState& s = t.s;
  int completed = 0;
  for (const auto& r : t.s.meas) completed += (r.http_status == 200 && !r.cancelled) ? 1 : 0;
  const std::string done = std::to_string(completed) + " of " + std::to_string(t.s.meas.size()) +
                           " measured requests completed";
  if (s.load->interrupted) {
    // The gates over a cut-short record set fail for the interruption's sake; their evidence
    // stays in verdict.json, the reason says what happened.
    s.verdict.outcome = TrialOutcome::kInterrupted;
    s.verdict.reasons = {"interrupted: " + done +
                         " before the signal; the directory is incomplete and can never pass"};
    // Nothing green: a latency figure over the requests that happened to finish is no SLO pass.
    s.verdict.latency_pass = false;
    s.ctx.complete = false;
    return Finish(s);
  }
  // A server that died mid-trial leaves transport errors; confirm with one more probe.
  bool transport_failures =
      std::any_of(t.s.meas.begin(), t.s.meas.end(), [](const RequestResult& r) {
        return r.cancelled_by_harness.empty() && (r.http_status == 0 || !r.transport_error.empty());
      });
  if (transport_failures) {
    Result<std::string> alive = t.target->Probe(NowNs() + 2'000'000'000LL, s.opt->cancel);
    if (!alive.ok()) {
      s.verdict.outcome = TrialOutcome::kCouldNotRun;
      s.verdict.reasons = {"server lost: " + alive.status().message() + "; " + done +
                           " before it went away (their records are kept)"};
      s.verdict.latency_pass = false;  // as above: nothing green in a trial that could not run
      s.ctx.complete = false;
      return Finish(s);
    }
  }
  return std::nullopt;
}

}  // namespace capq::internal

#include "capq/measurement/early_decision.h"

#include <algorithm>

#include "capq/measurement/certainty.h"
#include "capq/measurement/json_figure.h"
#include "capq/text.h"

namespace capq {
namespace {

// A request still waiting at the decision is counted at its wait so far less this much: bytes
// that reached its socket just before the moment but were read after it carry a kernel stamp up
// to the loop's read lag earlier (loadgen.h), so the wait alone could overstate its value.
constexpr MonoNs kReadLagAllowanceNs = 50'000'000;

double Ms(MonoNs ns, double scale) { return NsToMs(ns) * scale; }

// The gate's figure at `now`: each request's value where known, its wait so far where sent, and
// one place at 0 for each request not sent yet. A request that ended without a value (a failed
// one) holds no place: it fails a correctness gate instead, so the trial cannot pass either way.
PartialFigure PartialAt(SloMetric metric, const std::vector<LiveLatency>& measured, MonoNs now,
                        double scale) {
  PartialFigure f;
  f.total = static_cast<int64_t>(measured.size());
  for (const LiveLatency& seen : measured) {
    const LiveLatency r = seen.SeenBy(now);
    const MonoNs value_end = metric == SloMetric::kTtft ? r.first_token_ns : r.done_ns;
    if (value_end != 0) {
      f.known.push_back(Ms(value_end - r.send_ns, scale));
    } else if (r.ended) {
      --f.total;
    } else if (r.send_ns != 0) {
      f.waiting_at_least.push_back(
          Ms(std::max<MonoNs>(0, now - r.send_ns - kReadLagAllowanceNs), scale));
    }
  }
  return f;
}

int64_t CountOver(const PartialFigure& f, double below_ms) {
  int64_t over = 0;
  for (const auto* v : {&f.known, &f.waiting_at_least}) {
    over += std::count_if(v->begin(), v->end(), [&](double x) { return x >= below_ms; });
  }
  return over;
}

}  // namespace

EarlyDecisionRules EarlyDecisionRulesFor(const Row& row, int level, bool full_trials) {
  EarlyDecisionRules r;
  r.min_completed = std::max(1, level);
  r.method = row.percentile_method;
  r.time_scale = row.identity.time_scale > 0 ? row.identity.time_scale : 1.0;
  for (const SloGate& g : row.slo) {
    if (g.metric != SloMetric::kItl) r.gates.push_back(g);
  }
  if (full_trials) {
    r.off_reason = "--full-trials: every trial runs to its last request";
  } else if (row.open_loop()) {
    r.off_reason = "an open-loop row: its stability gates judge the whole measured interval";
  } else if (!row.slo_tiers.empty()) {
    r.off_reason = "the row has SLO tiers: a looser tier may pass where the primary gate failed";
  } else if (r.gates.empty()) {
    r.off_reason = "the row has no TTFT or E2E gate: a waiting request bounds no other figure";
  }
  r.enabled = r.off_reason.empty();
  return r;
}

std::optional<EarlyDecision> DecideEarly(const EarlyDecisionRules& rules,
                                         const std::vector<LiveLatency>& measured, MonoNs now_ns,
                                         MonoNs measured_start_ns) {
  if (!rules.enabled) return std::nullopt;
  const int64_t completed =
      std::count_if(measured.begin(), measured.end(),
                    [&](const LiveLatency& r) { return r.SeenBy(now_ns).done_ns != 0; });
  if (completed < std::min<int64_t>(rules.min_completed, static_cast<int64_t>(measured.size()))) {
    return std::nullopt;
  }
  for (const SloGate& g : rules.gates) {
    const PartialFigure f = PartialAt(g.metric, measured, now_ns, rules.time_scale);
    if (!MissIsCertain(f, g.percentile, rules.method, g.below_ms)) continue;
    EarlyDecision d;
    d.gate = g;
    d.lowest_reachable_ms = LowestReachablePercentile(f, g.percentile, rules.method);
    d.measured = static_cast<int64_t>(measured.size());
    d.finished = std::count_if(measured.begin(), measured.end(),
                               [&](const LiveLatency& r) { return r.SeenBy(now_ns).ended; });
    d.waiting = static_cast<int64_t>(f.waiting_at_least.size());
    d.over = CountOver(f, g.below_ms);
    d.at_ns = now_ns;
    d.after_s = NsToS(now_ns - measured_start_ns) * rules.time_scale;
    return d;
  }
  return std::nullopt;
}

std::vector<LiveLatency> LiveLatencyAt(const std::vector<RequestResult>& measured, MonoNs at_ns) {
  std::vector<LiveLatency> out(measured.size());
  for (size_t i = 0; i < measured.size(); ++i) {
    const RequestResult& r = measured[i];
    LiveLatency& l = out[i];
    if (r.start_ns == 0 || r.start_ns > at_ns) continue;
    l.send_ns = r.start_ns;
    if (r.ttft_ns && r.first_token_arrival_ns != 0 && r.first_token_arrival_ns <= at_ns) {
      l.first_token_ns = r.start_ns + *r.ttft_ns;
      l.first_token_read_ns = r.first_token_arrival_ns;
    }
    if (r.end_ns == 0 || r.end_ns > at_ns) continue;
    l.ended = true;
    l.end_ns = r.end_ns;
    if (r.http_status == 200 && !r.cancelled) l.done_ns = r.end_ns;
  }
  return out;
}

LiveLatency LiveLatency::SeenBy(MonoNs now) const {
  if (send_ns == 0 || send_ns > now) return {};
  LiveLatency l = *this;
  if (first_token_read_ns > now) l.first_token_ns = l.first_token_read_ns = 0;
  if (end_ns > now) {
    l.ended = false;
    l.done_ns = l.end_ns = 0;
  }
  return l;
}

std::string EarlyDecision::Reason() const {
  const std::string what = "p" + FormatShortest(gate.percentile) + " " + SloMetricName(gate.metric);
  return "decided early: " + what + " cannot end below " + FormatFixed(gate.below_ms, 1) +
         " ms (at least " + FormatFixed(lowest_reachable_ms, 1) + " ms): " + std::to_string(over) +
         " of " + std::to_string(measured) + " at or over the bound, " + std::to_string(finished) +
         " finished and " + std::to_string(waiting) + " waiting, " + FormatFixed(after_s, 1) +
         " s into the measured phase";
}

nlohmann::json EarlyDecisionToJson(const EarlyDecision& d) {
  return {{"metric", SloMetricName(d.gate.metric)},
          {"percentile", d.gate.percentile},
          {"below_ms", d.gate.below_ms},
          {"lowest_reachable_ms", FigureToJson(d.lowest_reachable_ms)},
          {"measured", d.measured},
          {"finished", d.finished},
          {"waiting", d.waiting},
          {"over", d.over},
          {"at_ns", d.at_ns},
          {"after_s", d.after_s},
          {"reason", d.Reason()}};
}

EarlyDecision EarlyDecisionFromJson(const nlohmann::json& j) {
  EarlyDecision d;
  const std::string metric = j.at("metric").get<std::string>();
  d.gate.metric = metric == "e2e" ? SloMetric::kE2e : SloMetric::kTtft;
  d.gate.percentile = j.at("percentile").get<double>();
  d.gate.below_ms = j.at("below_ms").get<double>();
  d.lowest_reachable_ms = FigureAt(j, "lowest_reachable_ms");
  d.measured = j.at("measured").get<int64_t>();
  d.finished = j.at("finished").get<int64_t>();
  d.waiting = j.at("waiting").get<int64_t>();
  d.over = j.at("over").get<int64_t>();
  d.at_ns = j.at("at_ns").get<MonoNs>();
  d.after_s = j.at("after_s").get<double>();
  return d;
}

}  // namespace capq

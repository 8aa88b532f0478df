#include <algorithm>
#include <cmath>
#include <cstdio>

#include "capq/text.h"
#include "capq/trial/trial.h"

namespace capq {

namespace {

std::string Ms(double v) { return Fmt("%.1f", v); }

SloGateResult JudgeGate(const TrialMetrics& m, const SloGate& gate) {
  SloGateResult g;
  g.gate = gate;
  g.measured_ms = SloValueMs(m, gate);
  // Strictly below: a p95 equal to the threshold does not meet "below" (seed, Part II).
  g.passed = std::isfinite(g.measured_ms) && g.measured_ms < gate.below_ms;
  g.confidence =
      ClaimConfidenceOf(SloValues(m, gate.metric), gate.percentile, gate.below_ms, g.passed);
  return g;
}

bool SameGate(const SloGate& a, const SloGate& b) {
  return a.metric == b.metric && a.percentile == b.percentile && a.below_ms == b.below_ms;
}

// The gate an early decision failed: its figure is the least it could still have ended at, and
// its confidence is the fail side's over the requests counted at that moment.
SloGateResult DecidedGate(const EarlyDecision& d) {
  SloGateResult g;
  g.gate = d.gate;
  g.measured_ms = d.lowest_reachable_ms;
  g.passed = false;
  g.at_least = true;
  g.confidence = ClaimConfidence(d.finished + d.waiting, d.over, d.gate.percentile, false);
  return g;
}

// Every gate of the row's tiers that the row's own slo does not hold, once.
std::vector<SloGateResult> JudgeTierGates(const Row& row, const TrialMetrics& m) {
  std::vector<SloGate> seen = row.slo;
  std::vector<SloGateResult> out;
  for (const SloTier& tier : row.slo_tiers) {
    for (const SloGate& gate : tier.slo) {
      auto same = [&](const SloGate& g) { return SameGate(g, gate); };
      if (std::any_of(seen.begin(), seen.end(), same)) continue;
      seen.push_back(gate);
      out.push_back(JudgeGate(m, gate));
    }
  }
  return out;
}

}  // namespace

TrialVerdict Decide(const Row& row, const TrialMetrics& m, const CorrectnessReport& c,
                    const std::optional<StreamBreak>& stopped_at,
                    const std::optional<StabilityVerdict>& stability,
                    const std::optional<EarlyDecision>& decided) {
  TrialVerdict v;
  v.correctness = c;
  v.stopped_at = stopped_at;
  v.decided = decided;
  if (stopped_at) v.reasons.push_back(stopped_at->Reason());
  if (decided) v.reasons.push_back(decided->Reason());
  v.latency_pass = !row.slo.empty();
  if (row.slo.empty()) v.reasons.push_back("the row has no SLO gate: latency cannot pass");
  for (const SloGate& gate : row.slo) {
    SloGateResult g =
        decided && SameGate(gate, decided->gate) ? DecidedGate(*decided) : JudgeGate(m, gate);
    if (!g.passed) {
      v.latency_pass = false;
      std::string what = "p" + FormatShortest(gate.percentile) + " " + SloMetricName(gate.metric);
      if (!std::isfinite(g.measured_ms)) {
        v.reasons.push_back(what + ": nothing measured, so it is not below " + Ms(gate.below_ms) +
                            " ms");
      } else {
        v.reasons.push_back(what + (g.at_least ? " at least " : " ") + Ms(g.measured_ms) +
                            " ms is not below " + Ms(gate.below_ms) + " ms");
      }
    }
    v.slo.push_back(g);
  }
  v.tier_slo = JudgeTierGates(row, m);
  if (stopped_at || decided) v.latency_pass = false;  // a cut-short sample is no SLO pass
  v.stability = stability;
  if (stability) {
    for (GateMiss& m : stability->Misses()) {
      v.reasons.push_back(m.text);
      v.misses.push_back(std::move(m));
    }
    if (!stability->queue_bounded() || !stability->stationary()) v.latency_pass = false;
  }
  v.correctness_pass = c.passed() && !stopped_at;
  if (c.gates.empty()) v.reasons.push_back("no correctness gate was evaluated");
  for (const GateResult& g : c.gates) {
    if (!g.enabled || g.passed) continue;
    v.reasons.push_back(g.name + ": " + g.evidence);
    if (g.capacity) {  // served, but not the row as declared
      v.latency_pass = false;
      v.misses.push_back(CapacityMiss(g, static_cast<int>(c.totals.streams)));
    }
  }
  if (!v.correctness_pass) {
    v.outcome = TrialOutcome::kCorrectnessFail;
  } else if (stability && !stability->schedule_held) {
    // The server was not offered the load the row declares: no verdict on it either way.
    v.latency_pass = false;
    v.outcome = TrialOutcome::kCouldNotRun;
  } else if (!v.latency_pass) {
    v.outcome = TrialOutcome::kSloFail;
  } else {
    v.outcome = TrialOutcome::kPass;
  }
  return v;
}

}  // namespace capq

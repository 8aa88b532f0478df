// Which SLO gate decided a verdict, and how a gate's figures are written, so that every summary
// line, report table and test message names the gate it is about.
//
// A trial meets latency only if every gate's measured percentile is strictly below its bound. So a
// trial that missed was decided by a gate that failed (the worst, by measured / bound, when several
// failed), and a trial that met it by the gate that came closest to its bound. A side of the
// boundary (the trials at one operating point) is decided over its trials: a side where every
// trial met every gate by the gate with the highest measured / bound in any of its trials; a side
// with misses by the gate its missing trials failed on, or, when they failed on different gates,
// by each trial's own gate.
//
// A trial of a rate row also has stability gates (capq/measurement/stability.h: queue_bounded,
// stationary, schedule_held). One that met every SLO gate but failed a stability gate was decided
// by that stability gate (the first its verdict names); one that missed an SLO gate by the SLO
// gate, as above. On a side, a trial decided by a stability gate counts as a miss like any other.
#pragma once

#include <string>
#include <vector>

#include "capq/record/capacity_data.h"
#include "capq/trial/trial.h"

namespace capq {

// "ttft p95", "itl p99.9"
std::string GateName(const SloCheck& g);
// The same gate of a row: metric, percentile and bound.
bool SameGate(const SloCheck& a, const SloCheck& b);
// measured / bound; +infinity when nothing was measured (nothing is not below a bound), NaN when
// the bound is not positive.
double GateRatio(const SloCheck& g);

// The unit a gate's figures read best in, chosen from its bound so that every trial of a row
// prints alike: seconds with two decimals when the bound is a second or more (TTFT, E2E), else
// milliseconds with one decimal (ITL, short TTFT bounds).
struct GateUnit {
  double div = 1000;
  std::string name = "s";
  int decimals = 2;
};
GateUnit GateUnitFor(double below_ms);
// A value of the gate in its unit without the unit ("1.65", "52.3"); "n/a" when not finite.
std::string GateFigure(const SloCheck& g, double ms);
// "itl p95 55.1 ms"; "itl p95 n/a" when nothing was measured.
std::string GateValueText(const SloCheck& g);
// The measured value against the bound: "itl p95 55.1 ms >= 50.0 ms" when the gate failed,
// "ttft p95 1.65 s < 2.50 s" when it passed, "itl p95 not measured" when nothing was. When the two
// figures would print alike, more decimals are shown until they differ.
std::string GateVerdictText(const SloCheck& g);

// Index into `checks` of the gate that decided one trial's latency verdict (see above); -1 when
// there is no gate.
int DecidingGate(const std::vector<SloCheck>& checks);
// The deciding gate against its bound (GateVerdictText); empty when there is no gate.
std::string DecidingGateText(const std::vector<SloCheck>& checks);
// The same for a trial's verdict when latency decided it (pass or slo_fail); empty otherwise.
std::string DecidingGateText(const TrialVerdict& v);

// The gate beside the SLO that decided a trial (its first miss: a stability gate, or the served
// reuse) when every SLO gate was met; nullptr when an SLO gate decided or none missed.
const GateMiss* DecidingStabilityFailure(const TrialSummary& t);
// A miss in brief, with the figures the side text shows: "queue_bounded client in-flight 14.2 >
// 5.9", "stationary ttft p95 3.20 > 2.10 s" (in the gate's unit when `t.slo` has the gate),
// "schedule_held send lateness p99 3.1 ms", "cache_reuse 1/126 off (63.8% of 64.5%)" (with the
// hit ratios of `t.reuse`); the gate and subject alone when it has no figures.
std::string StabilityBrief(const GateMiss& miss, const TrialSummary& t);
// A miss's figure as a share of its bound (14.2 / 5.9 = 2.41); NaN without both.
double StabilityRatio(const GateMiss& miss);
// The gate that decided a trial against its bound: the SLO gate (GateVerdictText) or the stability
// failure that decided it; empty when there is neither.
std::string DecidingGateText(const TrialSummary& t);

// The gate shown for each trial of one side: an index into that trial's `slo`, -1 when it has none
// or a stability gate is shown instead.
struct SideGates {
  std::vector<int> per_trial;
  // Per trial, the miss shown (nullptr: none); set only where per_trial is -1.
  std::vector<const GateMiss*> stability;
  bool uniform = true;  // one gate for every trial (false: the trials failed on different gates)
  // The side's deciding gate when uniform; nullptr otherwise or when no trial has a gate.
  const SloCheck* gate = nullptr;
  // When uniform and a stability gate decided the side: that gate with its subject
  // ("queue_bounded client in-flight"); `gate` is then nullptr.
  std::string stability_gate;
};
SideGates DecideSide(const std::vector<const TrialSummary*>& trials);

// The deciding gate's figures over a side, in trial order:
//   "ttft p95 1.65/1.65/1.65 s"                            one gate decided every trial
//   "itl p95 52.0 ms / ttft p95 2.41 s / itl p95 55.1 ms"  the trials failed on different gates
//   "queue_bounded client in-flight 14.2 > 5.9, held, 15.0 > 6.0"  a stability gate decided (each
//                                                          trial's last third against its bound)
// Empty for no trials.
std::string SideFigures(const std::vector<const TrialSummary*>& trials);

}  // namespace capq

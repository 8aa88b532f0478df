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
#pragma once

#include <string>
#include <vector>

#include "capq/protocol/capacity_data.h"
#include "capq/protocol/trial.h"

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
// The checks of a trial's verdict, as the capacity data keeps them.
std::vector<SloCheck> SloChecksOf(const std::vector<SloGateResult>& results);
// The deciding gate against its bound (GateVerdictText); empty when there is no gate.
std::string DecidingGateText(const std::vector<SloCheck>& checks);
// The same for a trial's verdict when latency decided it (pass or slo_fail); empty otherwise.
std::string DecidingGateText(const TrialVerdict& v);

// The gate shown for each trial of one side: an index into that trial's `slo`, -1 when it has none.
struct SideGates {
  std::vector<int> per_trial;
  bool uniform = true;  // one gate for every trial (false: the trials failed on different gates)
  // The side's deciding gate when uniform; nullptr otherwise or when no trial has a gate.
  const SloCheck* gate = nullptr;
};
SideGates DecideSide(const std::vector<const TrialSummary*>& trials);

// The deciding gate's figures over a side, in trial order:
//   "ttft p95 1.65/1.65/1.65 s"                            one gate decided every trial
//   "itl p95 52.0 ms / ttft p95 2.41 s / itl p95 55.1 ms"  the trials failed on different gates
// Empty for no trials.
std::string SideFigures(const std::vector<const TrialSummary*>& trials);

}  // namespace capq

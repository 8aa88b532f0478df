// SLO tiers: several contracts proven in one qualification (Row::slo_tiers). A trial measures once
// and carries the check of every gate of every tier (TrialSummary::slo and tier_slo); each tier
// reads its own verdict from those checks. A trial's seed derives from the row, its phase, its
// level and its index, so the trial one tier ran at (phase, C, k) is the trial any other tier would
// run there: it is reused, never run again.
//
// Adding a gate can only keep or lower the admitted concurrency: a tier at least as strict as
// another passes a trial only where the other does, so on the same trials its Cmax is at most the
// other's.
#pragma once

#include <string>
#include <vector>

#include "capq/protocol/capacity_data.h"

namespace capq {

// The check of `gate` a trial carries, in slo or tier_slo; nullptr when it did not judge it.
const SloCheck* FindCheck(const TrialSummary& t, const SloGate& gate);

// How a tier judges a trial: a trial that is no SLO verdict (correctness_fail, could_not_run,
// interrupted) keeps its outcome; otherwise "pass" when correctness passed and every gate of `slo`
// was judged strictly below its bound, else "slo_fail". A gate the trial did not judge fails.
std::string TierOutcome(const TrialSummary& t, const std::vector<SloGate>& slo);

// The trial as the tier sees it: `slo` holds the tier's gates in the tier's order (one the trial
// did not judge as unmeasured and failed), latency_pass and outcome follow TierOutcome, and
// tier_slo is empty; everything measured is the trial's.
TrialSummary TierView(const TrialSummary& t, const std::vector<SloGate>& slo);

// `b` is at least as strict as `a`: every gate of `a` has one in `b` on the same metric, at a
// percentile at least as high and with a bound at most as high.
bool AtLeastAsStrict(const std::vector<SloGate>& b, const std::vector<SloGate>& a);

}  // namespace capq

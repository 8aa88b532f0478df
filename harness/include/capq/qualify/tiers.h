// SLO tiers: several contracts proven in one qualification (Row::slo_tiers). A trial measures once
// and carries the check of every gate of every tier (TrialSummary::slo and tier_slo); each tier
// reads its own verdict from those checks. A trial's seed derives from the row, its phase, its
// level and its index, so the trial one tier ran at (phase, C, k) is the trial any other tier would
// run there: it is reused, never run again.
//
// Adding a gate can only keep or lower the admitted concurrency: a tier at least as strict as
// another passes a trial only where the other does, so on the same trials its Cmax is at most the
// other's. TierOrderViolations() names any pair that says otherwise.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/qualify/qualify.h"
#include "capq/record/capacity_data.h"

namespace capq {

// The check of `gate` a trial carries, in slo or tier_slo; nullptr when it did not judge it.
const SloCheck* FindCheck(const TrialSummary& t, const SloGate& gate);

// How a tier judges a trial: a trial that is no SLO verdict (correctness_fail, could_not_run,
// interrupted) keeps its outcome; otherwise pass when correctness passed and every gate of `slo`
// was judged strictly below its bound, else SLO fail. A gate the trial did not judge fails.
TrialOutcome TierOutcome(const TrialSummary& t, const std::vector<SloGate>& slo);

// The trial as the tier sees it: `slo` holds the tier's gates in the tier's order (one the trial
// did not judge as unmeasured and failed), latency_pass and outcome follow TierOutcome, and
// tier_slo is empty; everything measured is the trial's.
TrialSummary TierView(const TrialSummary& t, const std::vector<SloGate>& slo);

// `b` is at least as strict as `a`: every gate of `a` has one in `b` on the same metric, at a
// percentile at least as high and with a bound at most as high.
bool AtLeastAsStrict(const std::vector<SloGate>& b, const std::vector<SloGate>& a);

// Pairs of q.tiers that break the order above, in words: "tier ttft_itl is at least as strict as
// tier primary but admits C=7 > C=6". Each is a bug or noise at a boundary.
std::vector<std::string> TierOrderViolations(const RowQualification& q);

// Run after the primary qualification, whose result `q` holds: fills q->tiers (the primary first,
// then each tier of row.slo_tiers in order) and q->tier_trials. Each further tier is located and
// confirmed as Qualify() does for a row, judged by its own gates: its locator starts from every
// trial already run, judged by the tier (known points), and a trial it asks for at a (phase, level,
// index) that already ran is reused. A tier is not searched once the qualification has stopped
// (correctness failure, setup, baseline, interruption): it records that, with the reason. `t0` is
// when the qualification started; trial start offsets count from it.
void QualifyTiers(const Row& row, const TrialRunner& runner, const QualifyOptions& options,
                  MonoNs t0, RowQualification* q);

// A further tier's summary line with its cost: "row tier ttft_itl: Cmax = 3 — C=3 itl p95
// 7.4/7.4/7.4 ms pass, C=4 itl p95 9.5/9.5/9.5 ms fail (8 trials run, 9 reused)".
std::string TierLine(const TierQualification& t);

}  // namespace capq

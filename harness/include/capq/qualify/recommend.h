// The operating limit on top of the measured boundary (seed, Part VII: "The number I would
// operate"). Cmax (Rmax on a rate row) is the benchmark answer; the recommendation is a policy
// layered on it, labelled so wherever it is shown, and never written to the row as its
// expectation. An operating limit needs room for prompt-shape drift, prefix-hit changes, runtime
// variance and the gap between a laboratory sample and a week of traffic.
//
// The rule, in load levels (C on a closed-loop row, rate steps on a rate row):
//   from   the proven boundary; on a lowered (noisy) result, its operating point.
//   steps  1 by default;
//          +1 when the margin is thin: the worst confirmation trial at `from` has a gate within
//             thin_margin_fraction (10%) of its bound (measured / bound > 0.90), or no gate was
//             measured there (an unknown margin is not a margin);
//          +1 when the boundary was noisy: the result is lowered (its sides overlapped, so the
//             confirmation ran extra trials), or the confirmation trials at `from` and `from + 1`
//             overlap (a trial at `from` failed or one at `from + 1` passed).
//   level  from - steps, never below 1 (a boundary of 1 recommends 1 and says it keeps no step).
// Any other result (no proven boundary) gets no recommendation, with the reason.
//
// The margin kept is the worst gate (highest measured / bound) over every trial that ran at the
// recommended level, probes and baseline included; when none ran there it says so and gives the
// margin at `from` instead.
#pragma once

#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/record/capacity_data.h"

namespace capq {

struct RecommendPolicy {
  int default_steps = 1;
  double thin_margin_fraction = 0.10;
  int thin_steps = 1;
  int noisy_steps = 1;
};

// The fields whose change must trigger requalification, as the row file names them, with their
// values: the identity (engine, image digest, model and revision, hardware, driver, every
// server_expect key, where graph policy and speculative settings are pinned, and a simulator
// row's profile), the workload (shape, sampling, arrival, prompt corpus), the cache policy, the
// SLO and the percentile method. Empty values are left out.
std::vector<PinnedField> RequalifyFields(const Row& row);
// The same from what the capacity data keeps of a row: identity, shape, arrival, SLO and
// percentile method (no server_expect, sampling or cache policy).
std::vector<PinnedField> RequalifyFields(const RowInfo& row);

// Pure: reads the qualification's status and trials only.
Recommendation Recommend(const RowQualification& q, const std::vector<PinnedField>& requalify_on,
                         const RecommendPolicy& policy = {});

// One line for the end of `capq qualify`'s result, under the summary line:
//   "policy (not the benchmark answer): operate at C=6 — one step below the proven Cmax (1
//    default); margin kept: ttft p95 8.00 s vs 10.00 s at C=6: 20% headroom (worst of 1 trial);
//    requalify when any of 21 pinned fields changes (capacity data)"
//   "policy (not the benchmark answer): no recommended operating limit — no proven Cmax: ..."
std::string RecommendationLine(const RowQualification& q);

// Capacity data written before recommendations: each such row gets the recommendation its trials
// give under the default policy, and is then marked recorded.
void RecommendWhereNotRecorded(CapacityData* data);

}  // namespace capq

// Per-class SLO gates of a mixed row: every gate of the row holds over each traffic class's
// measured requests as well as over all of them, so a short majority cannot hide a heavy tail.
// Pure: the classes come from the plan (plan.json), the latencies from the decoded results, so
// `capq validate` re-derives the same verdicts from the evidence alone.
#pragma once

#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/model/plan.h"
#include "capq/model/row.h"
#include "capq/record/verdict.h"

namespace capq {

// One verdict per class of row.mix in its declared order; empty for a row without a mix.
std::vector<ClassVerdict> JudgeClasses(const Row& row, const TrialPlan& plan,
                                       const std::vector<RequestResult>& measured,
                                       double time_scale);

// Adds the classes to `v`: a class that misses a gate fails latency, with a reason that names it
// ("class heavy: p95 ttft 6352.4 ms is not below 3500 ms"). A pass becomes an SLO fail.
void ApplyClassGates(const Row& row, std::vector<ClassVerdict> classes, TrialVerdict* v);

}  // namespace capq

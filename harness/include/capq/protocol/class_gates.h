// Per-class SLO gates of a mixed row: every gate of the row holds over each traffic class's
// measured requests as well as over all of them, so a short majority cannot hide a heavy tail.
// Pure: the classes come from the plan (plan.json), the latencies from the decoded results, so
// `capq validate` re-derives the same verdicts from the evidence alone.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/model/plan.h"
#include "capq/model/row.h"

namespace capq {

struct SloGateResult;
struct TrialVerdict;

struct ClassVerdict {
  std::string name;
  int requests = 0;                                          // measured requests of the class
  double ttft_p50_ms = 0, ttft_p95_ms = 0, ttft_p99_ms = 0;  // NaN when none had a TTFT
  std::vector<double> gate_ms;  // per row.slo gate: the class's value (NaN: nothing measured)
  std::vector<bool> gate_passed;
  bool passed() const;
};

// One verdict per class of row.mix in its declared order; empty for a row without a mix.
std::vector<ClassVerdict> JudgeClasses(const Row& row, const TrialPlan& plan,
                                       const std::vector<RequestResult>& measured,
                                       double time_scale);

// Adds the classes to `v`: a class that misses a gate fails latency, with a reason that names it
// ("class heavy: p95 ttft 6352.4 ms is not below 3500 ms"). A pass becomes an SLO fail.
void ApplyClassGates(const Row& row, std::vector<ClassVerdict> classes, TrialVerdict* v);

nlohmann::json ClassVerdictsToJson(const std::vector<ClassVerdict>& classes);
std::vector<ClassVerdict> ClassVerdictsFromJson(const nlohmann::json& j);

}  // namespace capq

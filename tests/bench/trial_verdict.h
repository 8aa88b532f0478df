// A trial's verdict as the benchmarks that run one state it: a run that passed carries
// "verdict: pass" beside its figures; a run that did not shows no figure, only its verdict and why
// (the verdict's reasons, as verdict.json has them). Benchmarks only.
#pragma once

#include <benchmark/benchmark.h>

#include <string>

#include "capq/record/verdict.h"

namespace capq::bench {

// "correctness_fail (exit 2): reason; reason (+N more)", each reason cut at 240 characters.
inline std::string VerdictWords(const TrialVerdict& v, size_t max_reasons = 2) {
  std::string s =
      std::string(TrialOutcomeName(v.outcome)) + " (exit " + std::to_string(v.ExitCode()) + ")";
  for (size_t i = 0; i < v.reasons.size() && i < max_reasons; ++i) {
    const std::string& r = v.reasons[i];
    s += (i == 0 ? ": " : "; ") + (r.size() > 240 ? r.substr(0, 240) + "..." : r);
  }
  if (v.reasons.size() > max_reasons) {
    s += " (+" + std::to_string(v.reasons.size() - max_reasons) + " more)";
  }
  return s;
}

// True when the trial passed: the run is labelled with its verdict. Otherwise the run is skipped
// with its verdict and why, so that no figure of it is reported.
inline bool ReportVerdict(benchmark::State& state, const TrialVerdict& v) {
  if (v.outcome == TrialOutcome::kPass) {
    state.SetLabel("verdict: pass");
    return true;
  }
  state.SkipWithError(("verdict: " + VerdictWords(v)).c_str());
  return false;
}

}  // namespace capq::bench

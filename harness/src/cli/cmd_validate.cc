// capq validate DIR: the verdict again from a trial's raw records alone, and its checksums.
#include <cmath>
#include <cstdio>

#include "capq/cli/commands.h"
#include "capq/qualify/deciding_gate.h"
#include "capq/trial/trial.h"

namespace capq::cli {

int RunValidate(const Args& args) {
  if (args.size() != 1 || args[0].rfind("--", 0) == 0) {
    std::fprintf(stderr, "usage: capq validate DIR\n");
    return 4;
  }
  Result<ValidateReport> rep = ValidateTrialDir(args[0]);
  if (!rep.ok()) {
    std::fprintf(stderr, "capq validate: %s\n", rep.status().message().c_str());
    return 4;
  }
  const ValidateReport& r = *rep;
  std::printf("%s\n  checksums: %s\n  complete: %s\n", args[0].c_str(),
              r.checksums_ok ? "ok" : "FAILED", r.complete ? "yes" : "no (incomplete)");
  for (const auto& g : r.verdict.slo) {
    std::printf("  SLO  p%g %s %.1f ms < %.1f ms   %s\n", g.gate.percentile,
                SloMetricName(g.gate.metric), g.measured_ms, g.gate.below_ms,
                g.passed ? "pass" : "FAIL");
  }
  for (const auto& pr : r.problems) std::printf("  problem: %s\n", pr.c_str());
  for (const auto& why : r.verdict.reasons) std::printf("  - %s\n", why.c_str());
  std::string by = DecidingGateText(r.verdict);
  if (!by.empty()) by = ", decided by " + by;
  std::printf("  re-derived verdict: %s%s\n", TrialOutcomeName(r.verdict.outcome), by.c_str());
  // 4: the evidence itself does not hold (tampered, missing or disagreeing files).
  if (!r.checksums_ok || !r.problems.empty()) return 4;
  return r.verdict.ExitCode();
}

}  // namespace capq::cli

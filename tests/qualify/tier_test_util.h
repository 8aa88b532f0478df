// A fake server for SLO tier tests: every latency percentile a function of C, and every gate of
// every tier checked on each trial as the trial path does (slo: the row's own gates; tier_slo: the
// tiers' other gates, once each). It counts the trials it is asked to run.
#pragma once

#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "capq/qualify/qualify.h"
#include "capq/record/capacity_data.h"

namespace capq::testing {

// p95 TTFT 200 ms x C (p99 260 ms x C), p95 ITL 5 ms x C (p99 6 ms x C), p95 E2E 1 s x C.
inline double FakeTierValueMs(const SloGate& g, int c) {
  const bool tail = g.percentile >= 99;
  switch (g.metric) {
    case SloMetric::kTtft:
      return (tail ? 260.0 : 200.0) * c;
    case SloMetric::kItl:
      return (tail ? 6.0 : 5.0) * c;
    case SloMetric::kE2e:
      return 1000.0 * c;
  }
  return 0;
}

// Primary p95 TTFT < 1000 ms (Cmax 4); ttft_itl adds p95 ITL < 16 ms (Cmax 3); ttft_p99 is p99
// TTFT < 1000 ms (Cmax 3, where ttft_itl's boundary lies too).
inline Row FakeTieredRow() {
  Row row;
  row.id = "tiered";
  row.title = "fake row with tiers";
  row.family = "sim";
  row.workload.input_tokens = 512;
  row.workload.output_tokens = 64;
  const SloGate ttft{SloMetric::kTtft, 95, 1000};
  row.slo = {ttft};
  row.slo_tiers = {SloTier{"ttft_itl", {ttft, SloGate{SloMetric::kItl, 95, 16}}},
                   SloTier{"ttft_p99", {SloGate{SloMetric::kTtft, 99, 1000}}}};
  row.trials.count = 3;
  row.trials.seeds = {101, 202, 303};
  return row;
}

struct FakeTierServer {
  std::vector<TrialRequest> calls;
  std::set<std::tuple<QualifyPhase, int, int>> broken;  // (phase, C, k) whose streams break

  static SloCheck Check(const SloGate& g, int c) {
    const double v = FakeTierValueMs(g, c);
    return SloCheck{SloMetricName(g.metric), g.percentile, g.below_ms, v, v < g.below_ms, {}};
  }

  TrialSummary operator()(const Row& row, const TrialRequest& r) {
    calls.push_back(r);
    TrialSummary t;
    const int c = r.level;
    t.has_metrics = true;
    t.ttft_ms.p95 = 200.0 * c;
    t.ttft_ms.p99 = 260.0 * c;
    t.itl_ms.p95 = 5.0 * c;
    t.itl_ms.p99 = 6.0 * c;
    t.e2e_ms.p95 = 1000.0 * c;
    t.latency_pass = true;
    for (const SloGate& g : row.slo) {
      t.slo.push_back(Check(g, c));
      t.latency_pass = t.latency_pass && t.slo.back().passed;
    }
    for (const SloTier& tier : row.slo_tiers) AddTierChecks(tier, c, &t);
    t.correctness_pass = !broken.count({r.phase, c, r.trial});
    t.outcome = !t.correctness_pass ? TrialOutcome::kCorrectnessFail
                : t.latency_pass    ? TrialOutcome::kPass
                                    : TrialOutcome::kSloFail;
    if (!t.correctness_pass)
      t.failed_gates = {{"nonempty_deltas", "3 of 64 streams carried no text"}};
    t.dir = "tiered/" + std::string(PhaseName(r.phase)) + "/c" + std::to_string(c) + "-t" +
            std::to_string(r.trial);
    return t;
  }

  // The gates of `tier` that the trial has not checked yet, as the trial path adds them.
  static void AddTierChecks(const SloTier& tier, int c, TrialSummary* t) {
    for (const SloGate& g : tier.slo) {
      bool seen = false;
      for (const auto* list : {&t->slo, &t->tier_slo}) {
        for (const SloCheck& s : *list) {
          seen = seen || (s.metric == SloMetricName(g.metric) && s.percentile == g.percentile &&
                          s.below_ms == g.below_ms);
        }
      }
      if (!seen) t->tier_slo.push_back(Check(g, c));
    }
  }

  // How many times each (phase, C, k) was asked for.
  std::map<std::tuple<QualifyPhase, int, int>, int> Counts() const {
    std::map<std::tuple<QualifyPhase, int, int>, int> n;
    for (const auto& r : calls) n[{r.phase, r.level, r.trial}] += 1;
    return n;
  }
};

inline TrialRunner TierRunner(FakeTierServer& s) {
  return [&s](const Row& row, const TrialRequest& r) { return s(row, r); };
}

// The fake row qualified on the fake server, every tier included.
inline RowQualification FakeTieredQualification() {
  FakeTierServer server;
  QualifyOptions opt;
  opt.max_level = 64;
  return Qualify(FakeTieredRow(), TierRunner(server), opt);
}

}  // namespace capq::testing

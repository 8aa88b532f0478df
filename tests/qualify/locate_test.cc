#include "capq/qualify/locate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <set>

#include "capq/record/capacity_data.h"

namespace capq {
namespace {

// A server model for the locator: gate ratio (measured p95 / SLO) as a function of C.
using RatioCurve = std::function<double(int)>;

struct LocateRun {
  Locator::State state;
  int last_pass = 0;
  int first_fail = 0;
  int probes = 0;
  std::set<int> probed;
};

// Runs the locator against a curve; `with_values` = false hides the ratio (a pure threshold
// oracle).
LocateRun RunAgainst(const RatioCurve& curve, bool with_values, int cap, bool baseline = true) {
  Locator loc(Locator::Options{cap, true});
  auto point = [&](int c) {
    double r = curve(c);
    ProbePoint p;
    p.level = c;
    p.verdict = r < 1.0 ? ProbeVerdict::kPass : ProbeVerdict::kSloFail;
    p.gate_ratio = with_values ? r : NAN;
    return p;
  };
  if (baseline) loc.AddKnown(point(1));
  LocateRun run;
  for (int guard = 0; guard < 200; ++guard) {
    auto next = loc.Next();
    if (!next) break;
    EXPECT_FALSE(run.probed.count(*next)) << "probed C=" << *next << " twice";
    EXPECT_GE(*next, 1);
    EXPECT_LE(*next, cap);
    run.probed.insert(*next);
    loc.Record(point(*next));
  }
  run.state = loc.state();
  run.last_pass = loc.last_pass();
  run.first_fail = loc.first_fail();
  run.probes = loc.probes_used();
  return run;
}

// The true Cmax of a monotone curve: the largest C with ratio < 1.
int TrueCmax(const RatioCurve& curve, int cap) {
  int c = 0;
  while (c + 1 <= cap && curve(c + 1) < 1.0) ++c;
  return c;
}

int ExponentialBisectionBound(int cmax) {
  // Doubling reaches the first failure at 2^(k) with k = floor(log2 cmax) + 1 probes after C=1,
  // then bisection of the 2^(k-1) gap costs k - 1: 2k - 1 in all, plus one when C=1 is not known.
  int k = static_cast<int>(std::floor(std::log2(cmax))) + 1;
  return 2 * k;
}

TEST(LocateTest, ThresholdOracleFindsEveryBoundaryWithExponentialPlusBisection) {
  for (int cmax = 1; cmax <= 300; ++cmax) {
    RatioCurve step = [cmax](int c) { return c <= cmax ? 0.5 : 2.0; };
    LocateRun run = RunAgainst(step, /*with_values=*/false, /*cap=*/1024);
    ASSERT_EQ(run.state, Locator::State::kBoundary) << "cmax=" << cmax;
    EXPECT_EQ(run.last_pass, cmax);
    EXPECT_EQ(run.first_fail, cmax + 1);
    EXPECT_LE(run.probes, ExponentialBisectionBound(cmax)) << "cmax=" << cmax;
  }
}

TEST(LocateTest, ThresholdOracleWithoutBaselineStartsAtOne) {
  RatioCurve step = [](int c) { return c <= 6 ? 0.5 : 2.0; };
  LocateRun run = RunAgainst(step, false, 64, /*baseline=*/false);
  EXPECT_EQ(run.state, Locator::State::kBoundary);
  EXPECT_EQ(run.last_pass, 6);
  EXPECT_TRUE(run.probed.count(1));
  EXPECT_TRUE(run.probed.count(2));
  EXPECT_TRUE(run.probed.count(4));
  EXPECT_TRUE(run.probed.count(8));
}

// p95 TTFT rising steadily with C (the seed's locator probes: 4.1, 6.7, 8.7, 10.7 s at C = 4, 6, 7,
// 8): with values the locator meets the ceil(log2 Cmax) + 2 budget.
TEST(LocateTest, LinearCurvesMeetTheProbeBudgetForManyThresholds) {
  int checked = 0;
  for (double slope = 0.02; slope <= 0.9; slope *= 1.17) {
    for (double base : {0.05, 0.2, 0.4}) {
      RatioCurve curve = [=](int c) { return base + slope * (c - 1); };
      int cmax = TrueCmax(curve, 4096);
      if (cmax < 1) continue;
      LocateRun run = RunAgainst(curve, true, 4096);
      ASSERT_EQ(run.state, Locator::State::kBoundary) << "slope=" << slope << " base=" << base;
      EXPECT_EQ(run.last_pass, cmax);
      EXPECT_LE(run.probes, LocateProbeBudget(cmax))
          << "slope=" << slope << " base=" << base << " cmax=" << cmax;
      ++checked;
    }
  }
  EXPECT_GT(checked, 50);
}

// Flat until a knee, then rising: extrapolation from the flat part says nothing, so the budget is
// not always met; the locator must still never do worse than plain exponential search + bisection.
TEST(LocateTest, HockeyStickCurvesNeverCostMoreThanPlainSearch) {
  int checked = 0;
  for (int knee = 1; knee <= 24; ++knee) {
    for (double rise : {0.08, 0.15, 0.3, 0.6}) {
      RatioCurve curve = [=](int c) { return 0.22 + (c > knee ? rise * (c - knee) : 0.01 * c); };
      int cmax = TrueCmax(curve, 4096);
      LocateRun run = RunAgainst(curve, true, 4096);
      ASSERT_EQ(run.state, Locator::State::kBoundary) << "knee=" << knee << " rise=" << rise;
      EXPECT_EQ(run.last_pass, cmax);
      EXPECT_LE(run.probes, ExponentialBisectionBound(cmax))
          << "knee=" << knee << " rise=" << rise << " cmax=" << cmax;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 96);
}

// Convex curves read badly by linear interpolation still converge within a constant factor of
// bisection thanks to the safeguard.
TEST(LocateTest, ConvexCurvesStillConverge) {
  for (int cmax_target = 2; cmax_target <= 200; cmax_target += 3) {
    double a = 0.9 / (cmax_target * cmax_target);
    RatioCurve curve = [=](int c) { return 0.1 + a * c * c; };
    int cmax = TrueCmax(curve, 4096);
    LocateRun run = RunAgainst(curve, true, 4096);
    ASSERT_EQ(run.state, Locator::State::kBoundary);
    EXPECT_EQ(run.last_pass, cmax);
    EXPECT_LE(run.probes, 3 * LocateProbeBudget(cmax)) << "cmax=" << cmax;
  }
}

TEST(LocateTest, NoFailureUpToTheCapIsNotAClaim) {
  RatioCurve flat = [](int) { return 0.3; };
  LocateRun run = RunAgainst(flat, true, 20);
  EXPECT_EQ(run.state, Locator::State::kNoFailUpToCap);
  EXPECT_EQ(run.last_pass, 20);
  EXPECT_EQ(run.first_fail, 0);
  EXPECT_TRUE(run.probed.count(20));
}

TEST(LocateTest, FailureAtOneEndsTheSearch) {
  RatioCurve over = [](int) { return 1.5; };
  LocateRun run = RunAgainst(over, true, 64);
  EXPECT_EQ(run.state, Locator::State::kFailsAtOne);
  EXPECT_EQ(run.probes, 0);
}

TEST(LocateTest, EqualToThresholdIsAFailure) {
  RatioCurve curve = [](int c) { return c * 0.25; };  // C=4 sits exactly on the line
  LocateRun run = RunAgainst(curve, true, 64);
  EXPECT_EQ(run.state, Locator::State::kBoundary);
  EXPECT_EQ(run.last_pass, 3);
  EXPECT_EQ(run.first_fail, 4);
}

TEST(LocateTest, CorrectnessFailureStopsWithTheGateNamed) {
  Locator loc(Locator::Options{64, true});
  loc.AddKnown(ProbePoint{1, ProbeVerdict::kPass, 0.2, ""});
  auto next = loc.Next();
  ASSERT_TRUE(next.has_value());
  loc.Record(ProbePoint{*next, ProbeVerdict::kCorrectnessFail, 0.3, "gate nonempty_deltas failed"});
  EXPECT_EQ(loc.state(), Locator::State::kStopped);
  EXPECT_FALSE(loc.Next().has_value());
  EXPECT_EQ(loc.stop_reason(), "gate nonempty_deltas failed");
  // The broken probe is not navigation: no failure bracket was formed from it.
  EXPECT_EQ(loc.first_fail(), 0);
}

TEST(LocateTest, MovesExplainEachProbe) {
  RatioCurve step = [](int c) { return c <= 5 ? 0.5 : 2.0; };
  Locator loc(Locator::Options{64, false});
  for (int guard = 0; guard < 20; ++guard) {
    auto next = loc.Next();
    if (!next) break;
    loc.Record(
        ProbePoint{*next, step(*next) < 1 ? ProbeVerdict::kPass : ProbeVerdict::kSloFail, NAN, ""});
  }
  ASSERT_EQ(loc.state(), Locator::State::kBoundary);
  ASSERT_EQ(loc.moves().size(), loc.probes().size());
  EXPECT_EQ(loc.moves().front(), "start at C=1");
  EXPECT_EQ(loc.moves()[1], "double");
  EXPECT_EQ(loc.moves().back(), "bisect");
}

TEST(LocateTest, ARightPredictionCostsTwoProbes) {
  for (int cmax = 1; cmax <= 60; ++cmax) {
    Locator loc(Locator::Options{256, true});
    loc.AddKnown(ProbePoint{1, cmax >= 1 ? ProbeVerdict::kPass : ProbeVerdict::kSloFail, 0.1, ""});
    loc.SetPrediction(cmax);
    int probes = 0;
    while (auto next = loc.Next()) {
      ++probes;
      loc.Record(
          ProbePoint{*next, *next <= cmax ? ProbeVerdict::kPass : ProbeVerdict::kSloFail, NAN, ""});
    }
    ASSERT_EQ(loc.state(), Locator::State::kBoundary);
    EXPECT_EQ(loc.last_pass(), cmax);
    EXPECT_LE(probes, cmax == 1 ? 1 : 2) << "cmax=" << cmax;
  }
}

TEST(LocateTest, AWrongPredictionStillFindsTheBoundary) {
  for (int predicted : {1, 3, 9, 20, 200}) {
    for (int cmax = 1; cmax <= 40; ++cmax) {
      Locator loc(Locator::Options{256, true});
      loc.AddKnown(ProbePoint{1, ProbeVerdict::kPass, NAN, ""});
      loc.SetPrediction(predicted);
      int probes = 0;
      while (auto next = loc.Next()) {
        ASSERT_LT(++probes, 40);
        loc.Record(ProbePoint{*next, *next <= cmax ? ProbeVerdict::kPass : ProbeVerdict::kSloFail,
                              NAN, ""});
      }
      ASSERT_EQ(loc.state(), Locator::State::kBoundary) << predicted << " " << cmax;
      EXPECT_EQ(loc.last_pass(), cmax);
      // The two prediction probes, then either plain search upward from a low prediction or a
      // bisection below a high one.
      int below = static_cast<int>(std::ceil(std::log2(predicted + 1)));
      EXPECT_LE(probes, 2 + std::max(ExponentialBisectionBound(cmax), below))
          << predicted << " " << cmax;
    }
  }
}

TEST(LocateTest, ProbeBudget) {
  EXPECT_EQ(LocateProbeBudget(1), 2);
  EXPECT_EQ(LocateProbeBudget(2), 3);
  EXPECT_EQ(LocateProbeBudget(7), 5);
  EXPECT_EQ(LocateProbeBudget(8), 5);
  EXPECT_EQ(LocateProbeBudget(11), 6);
}

}  // namespace
}  // namespace capq

namespace capq {
namespace {

// sim_small_azure's locate, blind: C=4 passed at 0.46 of its bound; C=8 was decided early with
// p95 TTFT at least 1.32 s against 1.2 s, the figure its whole trial also ended near. The bound
// aims the next probe as the whole figure did (C=7), not a bisection (C=6, then C=7).
TEST(LocateTest, ADecidedFailureAimsByItsBound) {
  TrialSummary decided;
  decided.outcome = TrialOutcome::kSloFail;
  EarlyDecision d;
  d.gate = SloGate{SloMetric::kTtft, 95, 1200};
  d.lowest_reachable_ms = 1320;
  decided.decided = d;
  EXPECT_DOUBLE_EQ(decided.GateRatio(), 1.1);

  auto next_after = [](double ratio_at_8) {
    Locator loc(Locator::Options{64, true});
    loc.AddKnown(ProbePoint{1, ProbeVerdict::kPass, 0.45, ""});
    loc.AddKnown(ProbePoint{2, ProbeVerdict::kPass, 0.45, ""});
    loc.AddKnown(ProbePoint{4, ProbeVerdict::kPass, 0.46, ""});
    loc.AddKnown(ProbePoint{8, ProbeVerdict::kSloFail, ratio_at_8, ""});
    return loc.Next();
  };
  EXPECT_EQ(next_after(decided.GateRatio()), 7);
  EXPECT_EQ(next_after(1320.0 / 1200), 7);  // the whole trial's figure
  EXPECT_EQ(next_after(NAN), 6);            // no figure: bisect

  d.gate.below_ms = 0;
  decided.decided = d;
  EXPECT_TRUE(std::isnan(decided.GateRatio()));
}

}  // namespace
}  // namespace capq

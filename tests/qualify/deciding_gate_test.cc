#include "capq/qualify/deciding_gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "qualify_test_util.h"

namespace capq {
namespace {

using testing::QueueGrew;

SloCheck Ttft(double measured_ms, double below_ms = 2500) {
  return SloCheck{"ttft", 95, below_ms, measured_ms, measured_ms < below_ms, {}};
}
SloCheck Itl(double measured_ms, double below_ms = 50) {
  return SloCheck{"itl", 95, below_ms, measured_ms, measured_ms < below_ms, {}};
}

TrialSummary Trial(std::vector<SloCheck> slo) {
  TrialSummary t;
  t.slo = std::move(slo);
  bool pass = true;
  for (const auto& g : t.slo) pass = pass && g.passed;
  t.latency_pass = pass;
  t.correctness_pass = true;
  t.outcome = pass ? TrialOutcome::kPass : TrialOutcome::kSloFail;
  return t;
}

std::vector<const TrialSummary*> Side(const std::vector<TrialSummary>& ts) {
  std::vector<const TrialSummary*> out;
  for (const auto& t : ts) out.push_back(&t);
  return out;
}

TEST(DecidingGateTest, AFailedGateDecidesEvenWhenAPassingOneIsCloserInAbsoluteTerms) {
  // TTFT 2.4 s of 2.5 s (0.96) passes; ITL 52 ms of 50 ms fails: ITL decided the miss.
  std::vector<SloCheck> c = {Ttft(2400), Itl(52)};
  EXPECT_EQ(DecidingGate(c), 1);
  EXPECT_EQ(DecidingGateText(c), "itl p95 52.0 ms >= 50.0 ms");
}

TEST(DecidingGateTest, TheWorstOfSeveralFailedGatesDecides) {
  std::vector<SloCheck> c = {Ttft(3000), Itl(51)};  // 1.20 against 1.02
  EXPECT_EQ(DecidingGate(c), 0);
  // Nothing measured is not below any bound: it is the worst miss.
  c.push_back(SloCheck{"e2e", 99, 60000, NAN, false, {}});
  EXPECT_EQ(DecidingGate(c), 2);
  EXPECT_EQ(GateVerdictText(c[2]), "e2e p99 not measured");
}

TEST(DecidingGateTest, APassIsDecidedByTheGateNearestItsBound) {
  EXPECT_EQ(DecidingGate({Ttft(1650), Itl(30)}), 0);  // 0.66 against 0.60
  EXPECT_EQ(DecidingGate({Ttft(1650), Itl(48)}), 1);  // 0.66 against 0.96
  EXPECT_EQ(DecidingGate({}), -1);
  EXPECT_EQ(DecidingGateText(std::vector<SloCheck>{}), "");
}

TEST(DecidingGateTest, UnitsFollowTheBound) {
  EXPECT_EQ(GateValueText(Ttft(1654.7)), "ttft p95 1.65 s");
  EXPECT_EQ(GateValueText(Itl(52.34)), "itl p95 52.3 ms");
  EXPECT_EQ(GateValueText(Ttft(412.34, 500)), "ttft p95 412.3 ms");
  EXPECT_EQ(GateValueText(Itl(NAN)), "itl p95 n/a");
  EXPECT_EQ(GateVerdictText(Ttft(1650)), "ttft p95 1.65 s < 2.50 s");
  EXPECT_EQ(GateVerdictText(Itl(55)), "itl p95 55.0 ms >= 50.0 ms");
  // Equal is a miss, and it reads as one.
  EXPECT_EQ(GateVerdictText(Itl(50)), "itl p95 50.0 ms >= 50.0 ms");
  // Figures that would print alike get the decimals that tell them apart.
  EXPECT_EQ(GateVerdictText(Itl(49.97)), "itl p95 49.97 ms < 50.00 ms");
  EXPECT_EQ(GateVerdictText(Ttft(2500.4)), "ttft p95 2.5004 s >= 2.5000 s");
  EXPECT_EQ(GateName(SloCheck{"itl", 99.9, 80, 1, true, {}}), "itl p99.9");
}

TEST(DecidingGateTest, AnAllPassSideIsDecidedByTheGateNearestItsBoundInAnyTrial) {
  // Trial 2's ITL (0.90) is nearer its bound than any TTFT (at most 0.70).
  std::vector<TrialSummary> ts = {Trial({Ttft(1700), Itl(30)}), Trial({Ttft(1750), Itl(45)}),
                                  Trial({Ttft(1650), Itl(31)})};
  SideGates s = DecideSide(Side(ts));
  ASSERT_NE(s.gate, nullptr);
  EXPECT_EQ(s.gate->metric, "itl");
  EXPECT_TRUE(s.uniform);
  EXPECT_EQ(s.per_trial, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(SideFigures(Side(ts)), "itl p95 30.0/45.0/31.0 ms");
}

TEST(DecidingGateTest, AFailingSideIsDecidedByTheGateItsTrialsFailedOn) {
  // Every TTFT passes (1.93 s of 2.5 s) and every ITL fails: the side is ITL's, not TTFT's.
  std::vector<TrialSummary> ts = {Trial({Ttft(1925), Itl(52)}), Trial({Ttft(1925), Itl(55)}),
                                  Trial({Ttft(1925), Itl(51)})};
  EXPECT_EQ(SideFigures(Side(ts)), "itl p95 52.0/55.0/51.0 ms");
  // A trial of a noisy side that passed is shown at the gate the others failed on.
  ts[1] = Trial({Ttft(1925), Itl(45)});
  EXPECT_EQ(SideFigures(Side(ts)), "itl p95 52.0/45.0/51.0 ms");
}

TEST(DecidingGateTest, TrialsThatFailedOnDifferentGatesAreShownEachWithItsGate) {
  std::vector<TrialSummary> ts = {Trial({Ttft(1925), Itl(52)}), Trial({Ttft(2610), Itl(30)}),
                                  Trial({Ttft(1925), Itl(55)})};
  SideGates s = DecideSide(Side(ts));
  EXPECT_FALSE(s.uniform);
  EXPECT_EQ(s.gate, nullptr);
  EXPECT_EQ(s.per_trial, (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(SideFigures(Side(ts)), "itl p95 52.0 ms / ttft p95 2.61 s / itl p95 55.0 ms");
  EXPECT_EQ(SideFigures({}), "");
}

TEST(DecidingGateTest, AVerdictNamesItsGateOnlyWhenLatencyDecidedIt) {
  TrialVerdict v;
  SloGateResult ttft{SloGate{SloMetric::kTtft, 95, 2500}, 1925, true, {}};
  SloGateResult itl{SloGate{SloMetric::kItl, 95, 50}, 55, false, {}};
  v.slo = {ttft, itl};
  v.outcome = TrialOutcome::kSloFail;
  EXPECT_EQ(DecidingGateText(v), "itl p95 55.0 ms >= 50.0 ms");
  v.outcome = TrialOutcome::kCorrectnessFail;  // the correctness gate decided, not the SLO
  EXPECT_EQ(DecidingGateText(v), "");
  std::vector<SloCheck> c = SloChecksOf(v.slo);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1].metric, "itl");
  EXPECT_EQ(c[1].below_ms, 50);
  EXPECT_FALSE(c[1].passed);
}

// ---- Rate rows: a trial that met every SLO gate but not a stability gate was decided by it.

// A TTFT p95 that drifted, in milliseconds.
GateMiss Drift(double last_ms, double bound_ms) {
  GateMiss m;
  m.gate = "stationary";
  m.subject = "ttft p95";
  m.value = last_ms;
  m.bound = bound_ms;
  m.in_ms = true;
  m.text = "stationary: ttft p95 last third drifted";
  return m;
}

TrialSummary Unstable(std::vector<SloCheck> slo, std::vector<GateMiss> misses) {
  TrialSummary t = Trial(std::move(slo));
  for (const GateMiss& m : misses) t.reasons.push_back(m.text);
  t.misses = std::move(misses);
  if (!t.misses.empty()) t.outcome = TrialOutcome::kSloFail;
  return t;
}

TEST(DecidingGateTest, AStabilityGateDecidesATrialThatMetEverySloGate) {
  const GateMiss queue = QueueGrew(14.2, 5.9);
  TrialSummary t = Unstable({Ttft(2100)}, {queue});
  ASSERT_NE(DecidingStabilityFailure(t), nullptr);
  EXPECT_EQ(DecidingGateText(t), queue.text);
  EXPECT_EQ(DecidingStabilityFailure(t)->gate, "queue_bounded");
  EXPECT_EQ(StabilityBrief(queue, t), "queue_bounded client in-flight 14.2 > 5.9");
  EXPECT_NEAR(StabilityRatio(queue), 14.2 / 5.9, 1e-9);
  // A missed SLO gate still decides when the queue grew too.
  TrialSummary both = Unstable({Ttft(2600)}, {queue});
  EXPECT_EQ(DecidingStabilityFailure(both), nullptr);
  EXPECT_EQ(DecidingGateText(both), "ttft p95 2.60 s >= 2.50 s");
  // The verdict of `capq trial` names it the same way.
  TrialVerdict v;
  v.outcome = TrialOutcome::kSloFail;
  v.slo = {SloGateResult{SloGate{SloMetric::kTtft, 95, 2500}, 2100, true, {}}};
  v.reasons = {queue.text};
  v.misses = {queue};
  EXPECT_EQ(DecidingGateText(v), queue.text);
}

TEST(DecidingGateTest, AMissWithoutFiguresIsNamedByItsGateAndSubject) {
  GateMiss none;
  none.gate = "stationary";
  none.subject = "ttft p95";
  none.in_ms = true;
  TrialSummary t = Unstable({Ttft(2100)}, {none});
  EXPECT_EQ(StabilityBrief(none, t), "stationary ttft p95");
  EXPECT_TRUE(std::isnan(StabilityRatio(none)));
  GateMiss late;
  late.gate = "schedule_held";
  late.subject = "send lateness p99";
  late.value = 3.1;
  late.in_ms = true;
  EXPECT_EQ(StabilityBrief(late, t), "schedule_held send lateness p99 3.1 ms");
}

TEST(DecidingGateTest, ASideThatFailedAStabilityGateIsNamedByIt) {
  std::vector<TrialSummary> ts = {Unstable({Ttft(2100)}, {QueueGrew(14.2, 5.9)}),
                                  Unstable({Ttft(2200)}, {QueueGrew(13.1, 5.1), Drift(3200, 2100)}),
                                  Unstable({Ttft(2050)}, {QueueGrew(15, 6)})};
  SideGates s = DecideSide(Side(ts));
  EXPECT_TRUE(s.uniform);
  EXPECT_EQ(s.gate, nullptr);
  EXPECT_EQ(s.stability_gate, "queue_bounded client in-flight");
  EXPECT_EQ(SideFigures(Side(ts)), "queue_bounded client in-flight 14.2 > 5.9, 13.1 > 5.1, 15 > 6");
  // A trial of that side that held is shown as held.
  ts[1] = Trial({Ttft(2200)});
  EXPECT_EQ(SideFigures(Side(ts)), "queue_bounded client in-flight 14.2 > 5.9, held, 15 > 6");
  // Different gates: each trial with its own, a latency drift in its gate's unit.
  ts[1] = Unstable({Ttft(2200)}, {Drift(3200, 2100)});
  ts[2] = Trial({Ttft(2610)});
  EXPECT_EQ(SideFigures(Side(ts)),
            "queue_bounded client in-flight 14.2 > 5.9 / stationary ttft p95 3.20 > 2.10 s / ttft "
            "p95 2.61 s");
  s = DecideSide(Side(ts));
  EXPECT_FALSE(s.uniform);
  EXPECT_EQ(s.per_trial, (std::vector<int>{-1, -1, 0}));
}

TEST(DecidingGateTest, APassingRateSideIsStillDecidedByItsSloGate) {
  std::vector<TrialSummary> ts = {Unstable({Ttft(2100)}, {}), Unstable({Ttft(2200)}, {})};
  EXPECT_EQ(SideFigures(Side(ts)), "ttft p95 2.10/2.20 s");
}

// A session row's trial whose requests met the gate overall while its first turns missed it.
TEST(DecidingGateTest, AClassThatMissedDecidesWhereAllRequestsMet) {
  std::vector<TrialSummary> side;
  for (double turn1 : {867.9, 866.1, 870.4}) {
    TrialSummary t = Trial({Ttft(794.6, 800)});
    t.outcome = TrialOutcome::kSloFail;
    ClassVerdict a, b;
    a.name = "turn1";
    a.gate_ms = {turn1};
    a.gate_passed = {false};
    b.name = "turn2";
    b.gate_ms = {281.2};
    b.gate_passed = {true};
    t.classes = {a, b};
    t.class_slo = ClassChecksOf(t);
    side.push_back(t);
  }
  EXPECT_EQ(DecidingGateText(side[0]), "turn1 ttft p95 867.9 ms >= 800.0 ms");
  EXPECT_EQ(SideFigures(Side(side)), "turn1 ttft p95 867.9/866.1/870.4 ms");
  // On a side that met every gate, the class nearest its bound is shown where it is nearer than
  // all requests together; without classes, the global gate as before.
  TrialSummary met = side[0];
  met.outcome = TrialOutcome::kPass;
  met.slo = {Ttft(667.6, 800)};
  met.classes[0].gate_ms = {725.6};
  met.classes[0].gate_passed = {true};
  met.class_slo = ClassChecksOf(met);
  EXPECT_EQ(DecidingGateText(met), "turn1 ttft p95 725.6 ms < 800.0 ms");
  met.classes.clear();
  met.class_slo = ClassChecksOf(met);
  EXPECT_EQ(DecidingGateText(met), "ttft p95 667.6 ms < 800.0 ms");
}

TEST(DecidingGateTest, AVerdictWhoseClassMissedIsDecidedByThatClassFromItsFigures) {
  TrialVerdict v;
  v.outcome = TrialOutcome::kSloFail;
  v.slo = {SloGateResult{SloGate{SloMetric::kTtft, 95, 1200}, 1100, true, {}}};
  ClassVerdict light, heavy;
  light.name = "light";
  light.gate_ms = {400};
  light.gate_passed = {true};
  heavy.name = "heavy";
  heavy.gate_ms = {1500};
  heavy.gate_passed = {false};
  v.classes = {light, heavy};
  EXPECT_EQ(DecidingGateText(v), "class heavy: p95 ttft 1500.0 ms is not below 1200.0 ms");
  v.classes[1].gate_ms = {NAN};
  EXPECT_EQ(DecidingGateText(v),
            "class heavy: p95 ttft: nothing measured, so it is not below "
            "1200.0 ms");
}

TEST(DecidingGateTest, ASideThatRanOutOfCacheShowsTheReuseItWasServed) {
  std::vector<TrialSummary> side;
  for (int off : {1, 2}) {
    TrialSummary t = Trial({Ttft(500, 800)});
    t.outcome = TrialOutcome::kSloFail;
    GateResult g;
    g.name = "cache_reuse";
    g.capacity = true;
    g.evidence = "hit ratio served 63.8%, declared 64.5%";
    g.offending_ids.assign(off, "m40");
    t.misses = {CapacityMiss(g, 126)};
    t.reuse = ReuseFigures{126, 0.645, 0.638};
    side.push_back(t);
  }
  EXPECT_EQ(side[0].misses[0].text, "cache_reuse: hit ratio served 63.8%, declared 64.5%");
  EXPECT_EQ(SideFigures(Side(side)),
            "cache_reuse 1/126 off (63.8% of 64.5%), 2/126 off (63.8% of 64.5%)");
}

}  // namespace
}  // namespace capq

// A qualification against fake servers: the adjacent pair and its independent trials, seeds,
// overlapping sides, predictions, the baseline's tolerance, caps and cancellation, the row's
// update, and rows with two SLO gates, where every line names the gate that decided.
#include "capq/qualify/qualify.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "qualify_test_util.h"

namespace capq {
namespace {

using testing::FakeRow;

// A fake server: p95 TTFT as a function of (C, trial), with optional broken streams.
struct FakeServer {
  explicit FakeServer(std::function<double(int c, int k)> f) : p95_ms(std::move(f)) {}
  std::function<double(int c, int k)> p95_ms;
  std::set<std::pair<int, int>> broken;  // (C, k) of confirm trials whose streams break
  std::set<int> broken_probe;            // C of probes whose streams break
  std::vector<TrialRequest> calls;

  TrialSummary operator()(const Row& row, const TrialRequest& r) {
    calls.push_back(r);
    TrialSummary t;
    double p95 = p95_ms(r.level, r.trial);
    t.has_metrics = true;
    t.ttft_ms.p50 = p95 * 0.5;
    t.ttft_ms.p95 = p95;
    t.ttft_ms.p99 = p95 * 1.2;
    t.itl_ms.p50 = 10;
    t.output_tok_s = 100.0 * r.level;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, p95, p95 < row.slo[0].below_ms, {}}};
    t.latency_pass = p95 < row.slo[0].below_ms;
    bool broken_stream = (r.phase == QualifyPhase::kConfirm && broken.count({r.level, r.trial})) ||
                         (r.phase == QualifyPhase::kProbe && broken_probe.count(r.level));
    t.correctness_pass = !broken_stream;
    if (broken_stream) {
      t.outcome = TrialOutcome::kCorrectnessFail;
      t.failed_gates = {{"nonempty_deltas", "3 of 64 streams carried no text: m4, m9, m12"}};
      t.reasons = {"gate nonempty_deltas failed"};
    } else {
      t.outcome = t.latency_pass ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    }
    return t;
  }
};

TrialRunner Runner(FakeServer& s) {
  return [&s](const Row& row, const TrialRequest& r) { return s(row, r); };
}

TEST(QualifyTest, ProvesTheAdjacentPairWithIndependentTrialsOnBothSides) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  std::vector<std::string> progress;
  QualifyOptions opt;
  opt.max_level = 64;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, Runner(server), opt);

  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  ASSERT_TRUE(q.cmax.has_value());
  EXPECT_EQ(*q.cmax, 4);  // 1000 ms at C=5 equals the threshold: strictly-below fails it
  EXPECT_EQ(QualifyExitCode(q.status), 0);
  EXPECT_EQ(
      q.summary_line,
      "fake: Cmax = 4 — C=4 ttft p95 0.80/0.80/0.80 s pass, C=5 ttft p95 1.00/1.00/1.00 s fail");
  EXPECT_EQ(q.Trials(QualifyPhase::kConfirm, 4).size(), 3u);
  EXPECT_EQ(q.Trials(QualifyPhase::kConfirm, 5).size(), 3u);
  EXPECT_EQ(q.Trials(QualifyPhase::kBaseline, 1).size(), 1u);
  EXPECT_LE(q.probes, 5);
  EXPECT_EQ(q.probe_budget, 4);
  EXPECT_LE(q.probes, q.probe_budget);
  // Baseline first, then probes, then confirmations alternating sides.
  ASSERT_GE(server.calls.size(), 7u);
  EXPECT_EQ(server.calls.front().phase, QualifyPhase::kBaseline);
  size_t n = server.calls.size();
  EXPECT_EQ(server.calls[n - 6].level, 4);
  EXPECT_EQ(server.calls[n - 5].level, 5);
  EXPECT_EQ(server.calls[n - 1].level, 5);
  // Phase costs are recorded with their trial counts.
  ASSERT_EQ(q.phases.size(), 3u);
  EXPECT_EQ(q.phases[0].name, "baseline");
  EXPECT_EQ(q.phases[0].trials, 1);
  EXPECT_EQ(q.phases[1].name, "locate");
  EXPECT_EQ(q.phases[1].trials, q.probes);
  EXPECT_EQ(q.phases[2].name, "confirm");
  EXPECT_EQ(q.phases[2].trials, 6);
  EXPECT_FALSE(progress.empty());
  EXPECT_NE(CostLine(q).find("confirm 6 trials"), std::string::npos) << CostLine(q);
}

// Each side of the boundary states its confidence from all its trials' requests together: the
// pass side below the bound, the fail side at or above it.
TEST(QualifyTest, EachSideOfTheBoundaryStatesTheConfidenceOfAllItsTrials) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  QualifyOptions opt;
  opt.max_level = 64;
  RowQualification q = Qualify(row, Runner(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  // The fake's trials carry no request counts: give each confirmation 64 requests, 1 over the
  // bound at C=4 and 20 over at C=5, and read the sides again.
  for (auto& t : q.trials) {
    if (t.phase != QualifyPhase::kConfirm) continue;
    t.slo[0].confidence = ClaimConfidence(64, t.level == 4 ? 1 : 20, 95, t.level == 4);
  }
  std::vector<BoundarySide> sides = BoundaryConfidence(q);
  ASSERT_EQ(sides.size(), 2u);
  EXPECT_EQ(sides[0].level, 4);
  EXPECT_TRUE(sides[0].pass_side);
  ASSERT_EQ(sides[0].gates.size(), 1u);
  EXPECT_EQ(sides[0].gates[0].requests, 192);
  EXPECT_EQ(sides[0].gates[0].over, 3);
  EXPECT_DOUBLE_EQ(sides[0].gates[0].confidence, PassConfidence(192, 3, 95));
  EXPECT_EQ(sides[1].level, 5);
  EXPECT_FALSE(sides[1].pass_side);
  EXPECT_EQ(sides[1].gates[0].over, 60);
  EXPECT_DOUBLE_EQ(sides[1].gates[0].confidence, FailConfidence(192, 60, 95));
  const std::string line = BoundaryConfidenceLine(q, sides);
  EXPECT_NE(line.find("C=4 ttft p95 vs 1000 ms: confidence"), std::string::npos) << line;
  EXPECT_NE(line.find("below (192 requests, 3 at or over"), std::string::npos) << line;
  EXPECT_NE(line.find("C=5 ttft p95 vs 1000 ms: confidence 1.00 at or above"), std::string::npos)
      << line;
  // Kept in the capacity data.
  q.boundary_confidence = sides;
  CapacityData d;
  d.rows.push_back(q);
  auto back = CapacityDataFromJson(CapacityDataToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->rows[0].boundary_confidence.size(), 2u);
  EXPECT_EQ(back->rows[0].boundary_confidence[1].gates[0].over, 60);
  EXPECT_FALSE(back->rows[0].boundary_confidence[1].pass_side);
  EXPECT_EQ(back->rows[0].trials.back().slo[0].confidence.requests, 64);
}

TEST(QualifyTest, ConfirmTrialsUseTheRowSeedsAndNoOtherTrialsShareASeed) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  std::set<uint64_t> others;
  for (const auto& r : server.calls) {
    if (r.phase == QualifyPhase::kConfirm) {
      EXPECT_EQ(r.seed, row.trials.seeds[r.trial - 1]);
    } else {
      EXPECT_TRUE(others.insert(r.seed).second) << "seed reused: " << r.seed;
      EXPECT_FALSE(r.seed == 101 || r.seed == 202 || r.seed == 303);
    }
  }
}

// A qualification run again with a corpus salt shares no seed, hence no prompt, with the run
// without one: not even the row's confirm seeds. The same salt gives the same seeds again.
TEST(QualifyTest, ACorpusSaltMovesEverySeedTheConfirmSeedsToo) {
  Row row = FakeRow();
  FakeServer plain{[](int c, int) { return 200.0 * c; }};
  ASSERT_EQ(Qualify(row, Runner(plain), QualifyOptions{}).status, QualifyStatus::kProven);
  std::set<uint64_t> unsalted;
  for (const auto& r : plain.calls) unsalted.insert(r.seed);
  QualifyOptions opt;
  opt.corpus_salt = 42;
  FakeServer salted{[](int c, int) { return 200.0 * c; }};
  RowQualification q = Qualify(row, Runner(salted), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  ASSERT_EQ(salted.calls.size(), plain.calls.size());
  for (const auto& r : salted.calls) {
    EXPECT_EQ(unsalted.count(r.seed), 0u) << "seed of a run without the salt: " << r.seed;
    EXPECT_EQ(r.seed, TrialSeed(row, r.phase, r.level, r.trial, 42));
    EXPECT_NE(r.seed, TrialSeed(row, r.phase, r.level, r.trial, 43));
  }
}

TEST(QualifyTest, PassAtCmaxPlusOneExtendsTrialsThenReportsTheLowerPoint) {
  Row row = FakeRow();
  // C=5 passes on its second trial: the boundary is noisy.
  FakeServer server{[](int c, int k) { return c == 5 && k == 2 ? 990.0 : 200.0 * c; }};
  QualifyOptions opt;
  RowQualification q = Qualify(row, Runner(server), opt);
  EXPECT_EQ(q.status, QualifyStatus::kLowered);
  EXPECT_FALSE(q.cmax.has_value());
  ASSERT_TRUE(q.operating_point.has_value());
  EXPECT_EQ(*q.operating_point, 4);
  EXPECT_EQ(q.Trials(QualifyPhase::kConfirm, 4).size(), 6u);  // extended to 2 x trials per side
  EXPECT_EQ(q.Trials(QualifyPhase::kConfirm, 5).size(), 6u);
  EXPECT_NE(q.message.find("C=5 passed 1 of 6"), std::string::npos) << q.message;
  EXPECT_EQ(QualifyExitCode(q.status), 1);
  EXPECT_NE(q.summary_line.find("not a proven Cmax"), std::string::npos) << q.summary_line;
}

TEST(QualifyTest, FailAtCmaxMovesDownNeverUp) {
  Row row = FakeRow();
  // C=4 fails on its third trial; C=3 is solid.
  FakeServer server{[](int c, int k) { return c == 4 && k == 3 ? 1010.0 : 200.0 * c; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kLowered);
  ASSERT_TRUE(q.operating_point.has_value());
  EXPECT_EQ(*q.operating_point, 3);
  EXPECT_EQ(q.Trials(QualifyPhase::kConfirm, 3).size(), 3u);
  for (const auto& r : server.calls) {
    if (r.phase == QualifyPhase::kConfirm) {
      EXPECT_LE(r.level, 5);
    }
  }
}

TEST(QualifyTest, BrokenStreamDuringConfirmationFailsWithTheGateNamed) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  server.broken = {{5, 2}};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kCorrectnessFail);
  EXPECT_EQ(q.failed_gate, "nonempty_deltas");
  EXPECT_FALSE(q.cmax.has_value());
  EXPECT_EQ(QualifyExitCode(q.status), 2);
  EXPECT_NE(q.summary_line.find("nonempty_deltas"), std::string::npos) << q.summary_line;
  EXPECT_NE(q.message.find("C=5"), std::string::npos);
  // Nothing ran after the broken trial.
  EXPECT_EQ(server.calls.back().level, 5);
  EXPECT_EQ(server.calls.back().trial, 2);
}

TEST(QualifyTest, BrokenStreamDuringLocateIsNotTreatedAsAnSloFailure) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 100.0 * c; }};
  server.broken_probe = {2, 3, 4, 5, 6, 7, 8};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kCorrectnessFail);
  EXPECT_EQ(q.failed_gate, "nonempty_deltas");
  EXPECT_EQ(q.probes, 1);
  EXPECT_TRUE(q.Trials(QualifyPhase::kConfirm, 1).empty());
}

BoundaryPrediction Predicted(int cmax, const std::string& source) {
  BoundaryPrediction p;
  p.cmax = cmax;
  p.source = source;
  p.note = "engine model: C=" + std::to_string(cmax);
  for (int c = 1; c <= cmax + 1; ++c) p.curve.push_back({c, 100.0 * c, c <= cmax});
  return p;
}

std::vector<int> ProbedLevels(const FakeServer& server) {
  std::vector<int> out;
  for (const auto& c : server.calls) {
    if (c.phase == QualifyPhase::kProbe) out.push_back(c.level);
  }
  return out;
}

// A prediction from the baseline that misses is refitted on every probe, all the probes so far
// together, and the locator aims at the refitted boundary: three probes where a blind search needs
// more.
TEST(QualifyTest, ABaselinePredictionThatMissesIsRefittedOnEveryProbe) {
  Row row = FakeRow();  // p95 = 200 ms x C against 1000 ms: Cmax 4
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  QualifyOptions opt;
  opt.max_level = 64;
  std::vector<std::vector<int>> refits;
  opt.predict_from_baseline = [](const TrialSummary& base) -> Result<BoundaryPrediction> {
    EXPECT_EQ(base.phase, QualifyPhase::kBaseline);
    return Predicted(14, "baseline calibration");
  };
  opt.refine_prediction =
      [&](const TrialSummary& base,
          const std::vector<const TrialSummary*>& probes) -> Result<BoundaryPrediction> {
    EXPECT_EQ(base.phase, QualifyPhase::kBaseline);
    refits.emplace_back();
    for (const TrialSummary* t : probes) refits.back().push_back(t->level);
    return Predicted(4, "baseline calibration and the probes");
  };
  RowQualification q = Qualify(row, Runner(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.cmax, 4);
  EXPECT_EQ(refits, (std::vector<std::vector<int>>{{14}, {14, 4}, {14, 4, 5}}));
  EXPECT_EQ(ProbedLevels(server), (std::vector<int>{14, 4, 5}));
  EXPECT_EQ(q.predicted_cmax, 14) << "the baseline's own prediction is kept beside the outcome";
  EXPECT_EQ(q.refined_cmax, 4);
  EXPECT_EQ(q.predicted_curve.size(), 5u);
  EXPECT_NE(q.prediction_note.find("refitted on the probes at C=14: Cmax 4"), std::string::npos)
      << q.prediction_note;
}

// A refit that the probes contradict (a boundary below a pass) cannot lead the locator back below
// what passed: it aims at the highest pass's neighbour.
TEST(QualifyTest, ARefitBelowAPassStillProbesThePassNeighbour) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  QualifyOptions opt;
  opt.predict_from_baseline = [](const TrialSummary&) -> Result<BoundaryPrediction> {
    return Predicted(4, "baseline calibration");
  };
  int refinements = 0;
  opt.refine_prediction =
      [&](const TrialSummary&,
          const std::vector<const TrialSummary*>&) -> Result<BoundaryPrediction> {
    ++refinements;
    return Predicted(2, "a refinement that would mislead");
  };
  RowQualification q = Qualify(row, Runner(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  EXPECT_EQ(refinements, 2);
  EXPECT_EQ(ProbedLevels(server), (std::vector<int>{4, 5}));
}

TEST(QualifyTest, ABaselineThatCannotBeCalibratedIsRecordedAndTheSearchStartsBlind) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  QualifyOptions opt;
  opt.predict_from_baseline = [](const TrialSummary&) -> Result<BoundaryPrediction> {
    return Status::InvalidArgument("no server limits");
  };
  RowQualification q = Qualify(row, Runner(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  EXPECT_FALSE(q.predicted_cmax);
  EXPECT_NE(q.prediction_note.find("no prediction from the baseline: no server limits"),
            std::string::npos);
  EXPECT_EQ(ProbedLevels(server).front(), 2) << "exponential search from the baseline";
}

TEST(QualifyTest, BaselineOutsideToleranceStopsBeforeTheSearch) {
  Row row = FakeRow();
  row.expect.baseline =
      Baseline{300.0, 10.0, 15, std::nullopt};  // the fake measures p50 = 100 ms at C=1
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kBaselineMismatch);
  EXPECT_EQ(server.calls.size(), 1u);
  EXPECT_TRUE(q.baseline.checked);
  EXPECT_FALSE(q.baseline.within);
  EXPECT_NE(q.message.find("TTFT p50 100.000 ms vs expected 300.000 ms"), std::string::npos)
      << q.message;
  EXPECT_EQ(QualifyExitCode(q.status), 3);
}

TEST(QualifyTest, BaselineWithinToleranceProceeds) {
  Row row = FakeRow();
  row.expect.baseline = Baseline{105.0, 10.5, 15, std::nullopt};
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kProven);
  EXPECT_TRUE(q.baseline.within);
}

TEST(QualifyTest, NoFailureUpToTheCapIsNotAClaim) {
  Row row = FakeRow();
  FakeServer server{[](int, int) { return 100.0; }};
  QualifyOptions opt;
  opt.max_level = 8;
  RowQualification q = Qualify(row, Runner(server), opt);
  EXPECT_EQ(q.status, QualifyStatus::kNoFailUpToCap);
  EXPECT_FALSE(q.cmax.has_value());
  EXPECT_EQ(q.summary_line, "fake: no failure up to C = 8 — Cmax >= 8, not a claim");
  EXPECT_EQ(QualifyExitCode(q.status), 1);
}

TEST(QualifyTest, FailureAtOneMeansNoCapacity) {
  Row row = FakeRow();
  FakeServer server{[](int, int) { return 1500.0; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kFailsAtOne);
  EXPECT_EQ(server.calls.size(), 1u);
}

TEST(QualifyTest, CancellationStopsAsInterrupted) {
  Row row = FakeRow();
  std::atomic<bool> cancel{false};
  FakeServer server{[&](int c, int) {
    if (c >= 4) cancel = true;
    return 200.0 * c;
  }};
  QualifyOptions opt;
  opt.cancel = &cancel;
  RowQualification q = Qualify(row, Runner(server), opt);
  EXPECT_EQ(q.status, QualifyStatus::kInterrupted);
  EXPECT_EQ(QualifyExitCode(q.status), 130);
}

TEST(QualifyTest, RowUpdateCarriesCmaxAndMargins) {
  Row row = FakeRow();
  FakeServer server{[](int c, int k) { return 200.0 * c + k; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  Row updated = RowWithQualification(row, q, "2026-11-29", "out/capacity-data.json");
  ASSERT_TRUE(updated.expect.cmax.has_value());
  EXPECT_EQ(*updated.expect.cmax, 4);
  EXPECT_EQ(updated.provenance.qualified_on, "2026-11-29");
  EXPECT_NE(updated.provenance.notes.find("C=4 ttft p95 0.80-0.80 s over 3 trials"),
            std::string::npos)
      << updated.provenance.notes;
  EXPECT_NE(updated.provenance.notes.find("C=5 ttft p95 1.00-1.00 s"), std::string::npos);
  EXPECT_NE(updated.provenance.notes.find("out/capacity-data.json"), std::string::npos);
}

// ---- Rows with two SLO gates: every line names the gate that decided.

Row TwoGateRow() {
  Row row = FakeRow();
  row.id = "two_gates";
  row.slo = {SloGate{SloMetric::kTtft, 95, 2500}, SloGate{SloMetric::kItl, 95, 50}};
  return row;
}

// A fake server measuring p95 TTFT and p95 ITL as functions of (C, trial); a gate passes when its
// value is strictly below its bound, the trial when every gate does.
struct TwoGateServer {
  std::function<double(int c, int k)> ttft_ms, itl_ms;
  TrialSummary operator()(const Row& row, const TrialRequest& r) const {
    TrialSummary t;
    double ttft = ttft_ms(r.level, r.trial), itl = itl_ms(r.level, r.trial);
    t.has_metrics = true;
    t.ttft_ms.p50 = ttft * 0.5;
    t.ttft_ms.p95 = ttft;
    t.ttft_ms.p99 = ttft * 1.2;
    t.itl_ms.p50 = itl * 0.5;
    t.itl_ms.p95 = itl;
    t.output_tok_s = 100.0 * r.level;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, ttft, ttft < row.slo[0].below_ms, {}},
             SloCheck{"itl", 95, row.slo[1].below_ms, itl, itl < row.slo[1].below_ms, {}}};
    t.latency_pass = t.slo[0].passed && t.slo[1].passed;
    t.correctness_pass = true;
    t.outcome = t.latency_pass ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    return t;
  }
};

// TTFT stays far below its 2.5 s bound up to C=7 (275 ms per stream); ITL is flat at 30 ms up to
// C=6 and misses its 50 ms bound from C=7 on. So C=6 passes with TTFT nearest its bound (0.66
// against ITL's 0.60) and C=7 fails on ITL while its TTFT, 1.93 s, passes.
TwoGateServer ItlFailsAboveSix() {
  return TwoGateServer{[](int c, int) { return 275.0 * c; },
                       [](int c, int k) {
                         if (c <= 6) return 30.0;
                         const double at7[] = {52, 55, 51};
                         return c == 7 ? at7[(k - 1) % 3] : 60.0;
                       }};
}

TEST(QualifyTwoGateTest, SummaryLineNamesTheGateThatDecidedEachSide) {
  Row row = TwoGateRow();
  TwoGateServer server = ItlFailsAboveSix();
  std::vector<std::string> progress;
  QualifyOptions opt;
  opt.max_level = 64;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, server, opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(*q.cmax, 6);
  EXPECT_EQ(q.summary_line,
            "two_gates: Cmax = 6 — C=6 ttft p95 1.65/1.65/1.65 s pass, C=7 itl p95 52.0/55.0/51.0 "
            "ms fail");
  // The per-trial progress line says which gate decided, against its bound.
  auto said = [&](const std::string& needle) {
    for (const auto& l : progress) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(said("confirm: C=7 trial 2 slo_fail itl p95 55.0 ms >= 50.0 ms"));
  EXPECT_TRUE(said("confirm: C=6 trial 1 pass ttft p95 1.65 s < 2.50 s"));
  // The row's margins are those of the deciding gates, in their units.
  Row updated = RowWithQualification(row, q, "2026-11-29", "out/capacity-data.json");
  EXPECT_NE(updated.provenance.notes.find("C=6 ttft p95 1.65-1.65 s over 3 trials (-34.0% to "
                                          "-34.0% of the 2.50 s SLO)"),
            std::string::npos)
      << updated.provenance.notes;
  EXPECT_NE(updated.provenance.notes.find("C=7 itl p95 51.0-55.0 ms over 3 trials (+2.0% to "
                                          "+10.0% of the 50.0 ms SLO)"),
            std::string::npos)
      << updated.provenance.notes;
}

TEST(QualifyTwoGateTest, APassingSideIsDecidedByTheGateNearestItsBound) {
  Row row = TwoGateRow();
  // ITL at 48 ms is nearer its bound (0.96) than TTFT at C=6 (0.66): the passing side is ITL's.
  TwoGateServer server{[](int c, int) { return 275.0 * c; },
                       [](int c, int) { return c <= 6 ? 48.0 : 56.0; }};
  RowQualification q = Qualify(row, server, QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.summary_line,
            "two_gates: Cmax = 6 — C=6 itl p95 48.0/48.0/48.0 ms pass, C=7 itl p95 56.0/56.0/56.0 "
            "ms fail");
}

TEST(QualifyTwoGateTest, TrialsThatFailedOnDifferentGatesAreEachNamed) {
  Row row = TwoGateRow();
  // C=7: trials 1 and 3 miss ITL; trial 2 meets ITL and misses TTFT at 2.61 s.
  TwoGateServer server{[](int c, int k) { return c == 7 && k == 2 ? 2610.0 : 275.0 * c; },
                       [](int c, int k) { return c <= 6 || (c == 7 && k == 2) ? 30.0 : 53.0; }};
  RowQualification q = Qualify(row, server, QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.summary_line,
            "two_gates: Cmax = 6 — C=6 ttft p95 1.65/1.65/1.65 s pass, C=7 itl p95 53.0 ms / ttft "
            "p95 2.61 s / itl p95 53.0 ms fail");
  Row updated = RowWithQualification(row, q, "2026-11-29", "out/capacity-data.json");
  EXPECT_NE(updated.provenance.notes.find("C=7 itl p95 53.0-53.0 ms over 2 trials (+6.0% to "
                                          "+6.0% of the 50.0 ms SLO), ttft p95 2.61-2.61 s over 1 "
                                          "trial (+4.4% to +4.4% of the 2.50 s SLO)"),
            std::string::npos)
      << updated.provenance.notes;
}

TEST(QualifyTwoGateTest, AFailureAtOneNamesTheGateThatMissed) {
  Row row = TwoGateRow();
  TwoGateServer server{[](int, int) { return 400.0; }, [](int, int) { return 70.0; }};
  RowQualification q = Qualify(row, server, QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kFailsAtOne);
  EXPECT_NE(q.summary_line.find("itl p95 70.0 ms >= 50.0 ms"), std::string::npos) << q.summary_line;
}

TEST(QualifyTwoGateTest, SideTextTakesTheSidesLabel) {
  Row row = TwoGateRow();
  TwoGateServer server = ItlFailsAboveSix();
  std::vector<TrialSummary> ts;
  for (int k = 1; k <= 3; ++k)
    ts.push_back(server(row, TrialRequest{QualifyPhase::kConfirm, 7, k, 0}));
  std::vector<const TrialSummary*> side;
  for (const auto& t : ts) side.push_back(&t);
  EXPECT_EQ(SideText("R=3 rps", side), "R=3 rps itl p95 52.0/55.0/51.0 ms fail");
  ts[1].slo[1].measured_ms = 45;
  ts[1].slo[1].passed = true;
  ts[1].outcome = TrialOutcome::kPass;
  EXPECT_EQ(SideText("C=7", side), "C=7 itl p95 52.0/45.0/51.0 ms 1/3 pass");
}

}  // namespace
}  // namespace capq

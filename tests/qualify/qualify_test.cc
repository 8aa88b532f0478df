#include "capq/qualify/qualify.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "../capq_process.h"
#include "capq/model/row_loader.h"
#include "capq/record/capacity_data.h"
#include "capq/sim/server.h"

extern char** environ;

namespace capq {
namespace {

Row FakeRow() {
  Row row;
  row.id = "fake";
  row.title = "fake row";
  row.family = "sim";
  row.workload.input_tokens = 512;
  row.workload.output_tokens = 64;
  row.slo = {SloGate{SloMetric::kTtft, 95, 1000}};
  row.trials.count = 3;
  row.trials.seeds = {101, 202, 303};
  return row;
}

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
    double p95 = p95_ms(r.concurrency, r.trial);
    t.has_metrics = true;
    t.ttft_ms.p50 = p95 * 0.5;
    t.ttft_ms.p95 = p95;
    t.ttft_ms.p99 = p95 * 1.2;
    t.itl_ms.p50 = 10;
    t.output_tok_s = 100.0 * r.concurrency;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, p95, p95 < row.slo[0].below_ms}};
    t.latency_pass = p95 < row.slo[0].below_ms;
    bool broken_stream = (r.phase == "confirm" && broken.count({r.concurrency, r.trial})) ||
                         (r.phase == "probe" && broken_probe.count(r.concurrency));
    t.correctness_pass = !broken_stream;
    if (broken_stream) {
      t.outcome = "correctness_fail";
      t.failed_gates = {"nonempty_deltas: 3 of 64 streams carried no text: m4, m9, m12"};
      t.reasons = {"gate nonempty_deltas failed"};
    } else {
      t.outcome = t.latency_pass ? "pass" : "slo_fail";
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
  opt.max_concurrency = 64;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, Runner(server), opt);

  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  ASSERT_TRUE(q.cmax.has_value());
  EXPECT_EQ(*q.cmax, 4);  // 1000 ms at C=5 equals the threshold: strictly-below fails it
  EXPECT_EQ(QualifyExitCode(q.status), 0);
  EXPECT_EQ(
      q.summary_line,
      "fake: Cmax = 4 — C=4 ttft p95 0.80/0.80/0.80 s pass, C=5 ttft p95 1.00/1.00/1.00 s fail");
  EXPECT_EQ(q.Trials("confirm", 4).size(), 3u);
  EXPECT_EQ(q.Trials("confirm", 5).size(), 3u);
  EXPECT_EQ(q.Trials("baseline", 1).size(), 1u);
  EXPECT_LE(q.probes, 5);
  EXPECT_EQ(q.probe_budget, 4);
  EXPECT_LE(q.probes, q.probe_budget);
  // Baseline first, then probes, then confirmations alternating sides.
  ASSERT_GE(server.calls.size(), 7u);
  EXPECT_EQ(server.calls.front().phase, "baseline");
  size_t n = server.calls.size();
  EXPECT_EQ(server.calls[n - 6].concurrency, 4);
  EXPECT_EQ(server.calls[n - 5].concurrency, 5);
  EXPECT_EQ(server.calls[n - 1].concurrency, 5);
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

TEST(QualifyTest, ConfirmTrialsUseTheRowSeedsAndNoOtherTrialsShareASeed) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  RowQualification q = Qualify(row, Runner(server), QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  std::set<uint64_t> others;
  for (const auto& r : server.calls) {
    if (r.phase == "confirm") {
      EXPECT_EQ(r.seed, row.trials.seeds[r.trial - 1]);
    } else {
      EXPECT_TRUE(others.insert(r.seed).second) << "seed reused: " << r.seed;
      EXPECT_FALSE(r.seed == 101 || r.seed == 202 || r.seed == 303);
    }
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
  EXPECT_EQ(q.Trials("confirm", 4).size(), 6u);  // extended to 2 x trials per side
  EXPECT_EQ(q.Trials("confirm", 5).size(), 6u);
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
  EXPECT_EQ(q.Trials("confirm", 3).size(), 3u);
  for (const auto& r : server.calls) {
    if (r.phase == "confirm") {
      EXPECT_LE(r.concurrency, 5);
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
  EXPECT_EQ(server.calls.back().concurrency, 5);
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
  EXPECT_TRUE(q.Trials("confirm", 1).empty());
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
    if (c.phase == "probe") out.push_back(c.concurrency);
  }
  return out;
}

// A prediction from the baseline that misses is refined once, on the first probe's ITL, and the
// locator aims at the refined boundary: three probes where a blind search needs more.
TEST(QualifyTest, ABaselinePredictionThatMissesIsRefinedOnTheFirstProbe) {
  Row row = FakeRow();  // p95 = 200 ms x C against 1000 ms: Cmax 4
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  QualifyOptions opt;
  opt.max_concurrency = 64;
  int refined_on = 0;
  opt.predict_from_baseline = [](const TrialSummary& base) -> Result<BoundaryPrediction> {
    EXPECT_EQ(base.phase, "baseline");
    return Predicted(14, "baseline calibration");
  };
  opt.refine_prediction = [&](const TrialSummary& base,
                              const TrialSummary& probe) -> Result<BoundaryPrediction> {
    EXPECT_EQ(base.phase, "baseline");
    refined_on = probe.concurrency;
    return Predicted(4, "baseline calibration and the ITL of the probe");
  };
  RowQualification q = Qualify(row, Runner(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.cmax, 4);
  EXPECT_EQ(refined_on, 14);
  EXPECT_EQ(ProbedLevels(server), (std::vector<int>{14, 4, 5}));
  EXPECT_EQ(q.predicted_cmax, 14) << "the baseline's own prediction is kept beside the outcome";
  EXPECT_EQ(q.refined_cmax, 4);
  EXPECT_EQ(q.predicted_curve.size(), 5u);
  EXPECT_NE(q.prediction_note.find("refined on the probe at C=14"), std::string::npos)
      << q.prediction_note;
}

TEST(QualifyTest, APredictionTheProbesBearOutIsNotRefined) {
  Row row = FakeRow();
  FakeServer server{[](int c, int) { return 200.0 * c; }};
  QualifyOptions opt;
  opt.predict_from_baseline = [](const TrialSummary&) -> Result<BoundaryPrediction> {
    return Predicted(4, "baseline calibration");
  };
  int refinements = 0;
  opt.refine_prediction = [&](const TrialSummary&,
                              const TrialSummary&) -> Result<BoundaryPrediction> {
    ++refinements;
    return Predicted(2, "a refinement that would mislead");
  };
  RowQualification q = Qualify(row, Runner(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven);
  EXPECT_EQ(refinements, 0);
  EXPECT_EQ(ProbedLevels(server), (std::vector<int>{4, 5}));
  EXPECT_FALSE(q.refined_cmax);
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
  opt.max_concurrency = 8;
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
    double ttft = ttft_ms(r.concurrency, r.trial), itl = itl_ms(r.concurrency, r.trial);
    t.has_metrics = true;
    t.ttft_ms.p50 = ttft * 0.5;
    t.ttft_ms.p95 = ttft;
    t.ttft_ms.p99 = ttft * 1.2;
    t.itl_ms.p50 = itl * 0.5;
    t.itl_ms.p95 = itl;
    t.output_tok_s = 100.0 * r.concurrency;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, ttft, ttft < row.slo[0].below_ms},
             SloCheck{"itl", 95, row.slo[1].below_ms, itl, itl < row.slo[1].below_ms}};
    t.latency_pass = t.slo[0].passed && t.slo[1].passed;
    t.correctness_pass = true;
    t.outcome = t.latency_pass ? "pass" : "slo_fail";
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
  opt.max_concurrency = 64;
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
  for (int k = 1; k <= 3; ++k) ts.push_back(server(row, TrialRequest{"confirm", 7, k, 0}));
  std::vector<const TrialSummary*> side;
  for (const auto& t : ts) side.push_back(&t);
  EXPECT_EQ(SideText("R=3 rps", side), "R=3 rps itl p95 52.0/55.0/51.0 ms fail");
  ts[1].slo[1].measured_ms = 45;
  ts[1].slo[1].passed = true;
  ts[1].outcome = "pass";
  EXPECT_EQ(SideText("C=7", side), "C=7 itl p95 52.0/45.0/51.0 ms 1/3 pass");
}

// ---- Rate rows: the same protocol over rate levels (level L sends L * rate_step_rps).

Row RateRow() {
  Row row = FakeRow();
  row.id = "fake_rate";
  row.workload.arrival_kind = ArrivalKind::kPoisson;
  row.workload.arrival = "poisson";
  row.workload.open_loop.rate_step_rps = 0.25;
  row.workload.open_loop.requests = 120;
  row.workload.open_loop.ramp_s = 10;
  row.slo = {SloGate{SloMetric::kTtft, 95, 2500}};
  row.warmup.requests = 4;
  return row;
}

std::string QueueGrew(double last, double bound) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "queue_bounded: client in-flight last third %.3g > %.3g (first third 3.1 x 1.25 + "
                "2)",
                last, bound);
  return buf;
}

// A rate server: TTFT grows with the rate and stays below its 2.5 s bound up to 1.75 rps, but from
// 1.50 rps (level 6) on the queue grows without bound, so only the queue gate can fail there.
struct RateServer {
  std::vector<TrialRequest> calls;
  TrialSummary operator()(const Row& row, const TrialRequest& r) {
    calls.push_back(r);
    TrialSummary t;
    const double at5[] = {2100, 2200, 2050};
    double p95 = r.concurrency == 5 ? at5[(r.trial - 1) % 3] : 350.0 * r.concurrency;
    if (r.concurrency > 6) p95 = 2300;
    t.has_metrics = true;
    t.ttft_ms.p50 = p95 / 2;
    t.ttft_ms.p95 = p95;
    t.e2e_ms.mean = 4000;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, p95, p95 < row.slo[0].below_ms}};
    t.latency_pass = t.slo[0].passed;
    t.correctness_pass = true;
    t.outcome = t.latency_pass ? "pass" : "slo_fail";
    if (r.concurrency >= 6) {
      const double grew[] = {14.2, 13.1, 15.0};
      t.reasons = {QueueGrew(grew[(r.trial - 1) % 3], 5.9)};
      t.outcome = "slo_fail";
    }
    return t;
  }
};

TEST(QualifyRateTest, ARateRowProvesRmaxAndEveryLineReadsAsARate) {
  Row row = RateRow();
  RateServer server;
  std::vector<std::string> progress;
  QualifyOptions opt;
  opt.max_concurrency = 64;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, std::ref(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_FALSE(q.cmax.has_value());
  ASSERT_TRUE(q.rmax_rps.has_value());
  EXPECT_DOUBLE_EQ(*q.rmax_rps, 1.25);
  EXPECT_EQ(q.proven_level(), 5);
  // The side above Rmax met its SLO: the queue gate decided it, with its figures.
  EXPECT_EQ(q.summary_line,
            "fake_rate: Rmax = 1.25 rps — R=1.25 rps ttft p95 2.10/2.20/2.05 s pass, R=1.50 rps "
            "queue_bounded client in-flight 14.2 > 5.9, 13.1 > 5.9, 15 > 5.9 fail");
  EXPECT_EQ(q.message, "every R=1.25 rps trial passed and every R=1.50 rps trial failed");
  auto said = [&](const std::string& needle) {
    for (const auto& l : progress) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  };
  EXPECT_TRUE(
      said("baseline: R=0.25 rps with 4 warm-ups, 120 measured requests after a 10 s ramp"));
  EXPECT_TRUE(
      said("confirm: R=1.50 rps trial 2 slo_fail queue_bounded: client in-flight last "
           "third 13.1 > 5.9"));
  EXPECT_TRUE(said("confirm: R=1.25 rps trial 1 pass ttft p95 2.10 s < 2.50 s"));
  EXPECT_TRUE(said("locate: adjacent pair R=1.25 rps pass, R=1.50 rps fail"));
  for (const auto& l : progress) EXPECT_EQ(l.find("C="), std::string::npos) << l;
  EXPECT_NE(CostLine(q).find("locate budget ceil(log2 Rmax/step)+2"), std::string::npos)
      << CostLine(q);
  // Every trial keeps its level and its rate, and the stability failure that decided it.
  for (const auto& t : q.trials) {
    EXPECT_DOUBLE_EQ(t.rate_rps, t.concurrency * 0.25);
    EXPECT_EQ(t.stability_failures.empty(), t.concurrency < 6);
  }

  // The capacity data records the arrival, the rate result and each trial's rate beside its level.
  nlohmann::json j = RowQualificationToJson(q);
  EXPECT_EQ(j["row"]["arrival"]["kind"], "poisson");
  EXPECT_EQ(j["row"]["arrival"]["rate_step_rps"], 0.25);
  EXPECT_TRUE(j["result"]["cmax"].is_null());
  EXPECT_EQ(j["result"]["rmax_rps"], 1.25);
  EXPECT_EQ(j["result"]["operating_point"], 5);
  EXPECT_EQ(j["locate"]["max_rps"], 16);
  const nlohmann::json& last = j["trials"].back();
  EXPECT_EQ(last["level"], 6);
  EXPECT_EQ(last["rate_rps"], 1.5);
  EXPECT_FALSE(last.contains("concurrency"));
  ASSERT_EQ(last["stability_failures"].size(), 1u);
  CapacityData d;
  d.rows.push_back(q);
  Result<CapacityData> back = CapacityDataFromJson(CapacityDataToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const RowQualification& b = back->rows.at(0);
  EXPECT_EQ(b.rmax_rps, q.rmax_rps);
  EXPECT_EQ(b.proven_level(), 5);
  EXPECT_EQ(b.Trials("confirm", 6).size(), 3u);
  EXPECT_EQ(SummaryLine(b), q.summary_line);
  EXPECT_EQ(CapacityDataToJson(*back), CapacityDataToJson(d));

  // The row written back claims the rate, with the deciding gates' margins.
  Row updated = RowWithQualification(row, q, "2026-12-02", "out/capacity-data.json");
  EXPECT_FALSE(updated.expect.cmax.has_value());
  ASSERT_TRUE(updated.expect.rmax_rps.has_value());
  EXPECT_EQ(*updated.expect.rmax_rps, 1.25);
  EXPECT_NE(updated.provenance.notes.find("Margins: R=1.25 rps ttft p95 2.05-2.20 s over 3 trials"),
            std::string::npos)
      << updated.provenance.notes;
  EXPECT_NE(updated.provenance.notes.find("R=1.50 rps queue_bounded client in-flight 14.2 > 5.9, "
                                          "13.1 > 5.9, 15 > 5.9 (last third against its bound)"),
            std::string::npos)
      << updated.provenance.notes;
}

TEST(QualifyRateTest, ASideThatHeldItsQueueOnSomeTrialsIsNotProven) {
  Row row = RateRow();
  RateServer inner;
  // Level 6, trial 2: the queue held, so the sides overlap and the result is the lower point.
  TrialRunner runner = [&](const Row& r, const TrialRequest& req) {
    TrialSummary t = inner(r, req);
    if (req.concurrency == 6 && req.trial == 2) {
      t.reasons.clear();
      t.outcome = "pass";
    }
    return t;
  };
  RowQualification q = Qualify(row, runner, QualifyOptions{});
  EXPECT_EQ(q.status, QualifyStatus::kLowered);
  EXPECT_FALSE(q.rmax_rps.has_value());
  EXPECT_EQ(q.operating_point, 5);
  EXPECT_NE(q.message.find("R=1.50 rps passed 1 of 6"), std::string::npos) << q.message;
  EXPECT_NE(q.summary_line.find("operating point R = 1.25 rps (not a proven Rmax)"),
            std::string::npos)
      << q.summary_line;
  EXPECT_NE(q.summary_line.find("R=1.50 rps queue_bounded client in-flight 14.2 > 5.9, held, "),
            std::string::npos)
      << q.summary_line;
}

// A closed-loop qualification of `row`'s identity and shape: Cmax 6, mean E2E 3.84 s at C=6.
CapacityData ClosedLoopData(const Row& rate_row) {
  Row closed = rate_row;
  closed.id = "fake_closed";
  closed.workload.arrival_kind = ArrivalKind::kClosedLoop;
  closed.workload.arrival = "closed_loop";
  closed.workload.open_loop = OpenLoop{};
  RowQualification q;
  q.row = RowInfoFromRow(closed);
  q.status = QualifyStatus::kProven;
  q.cmax = 6;
  q.operating_point = 6;
  for (int c : {6, 7}) {
    for (int k = 1; k <= 3; ++k) {
      TrialSummary t;
      t.phase = "confirm";
      t.concurrency = c;
      t.trial = k;
      t.has_metrics = true;
      t.e2e_ms.mean = c == 6 ? 3800 + 20.0 * k : 5000;  // 3.84 s on average at C=6
      q.trials.push_back(t);
    }
  }
  CapacityData d;
  d.rows.push_back(q);
  return d;
}

TEST(QualifyRateTest, LittlesLawOnTheClosedLoopResultStartsTheSearchAndIsRecorded) {
  Row row = RateRow();
  CapacityData closed = ClosedLoopData(row);
  std::string note;
  Result<int> level = PredictLevelFromClosedLoop(row, closed, "ref/capacity-data.json", &note);
  ASSERT_TRUE(level.ok()) << level.status().ToString();
  EXPECT_EQ(*level, 6);  // floor(6 / 3.84 s / 0.25 rps) = floor(6.25)
  EXPECT_EQ(note,
            "Little's law on fake_closed (ref/capacity-data.json): Cmax 6 / mean E2E 3.84 s at "
            "C=6 = 1.56 rps, floored to a multiple of 0.25 rps: R=1.50 rps (level 6)");

  RateServer server;
  QualifyOptions opt;
  opt.predicted_cmax = *level;
  opt.prediction_note = note;
  std::vector<std::string> progress;
  opt.progress = [&](const std::string& line) { progress.push_back(line); };
  RowQualification q = Qualify(row, std::ref(server), opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_DOUBLE_EQ(*q.rmax_rps, 1.25);
  // The first probe is the prediction, then its neighbour: two probes find the pair.
  ASSERT_GE(server.calls.size(), 3u);
  EXPECT_EQ(server.calls[0].phase, "baseline");
  EXPECT_EQ(server.calls[1].phase, "probe");
  EXPECT_EQ(server.calls[1].concurrency, 6);
  EXPECT_EQ(server.calls[2].concurrency, 5);
  EXPECT_EQ(q.probes, 2);
  EXPECT_EQ(q.trials[1].move, "predicted Rmax");
  EXPECT_EQ(q.trials[2].move, "predicted Rmax - 1");
  EXPECT_EQ(q.predicted_cmax, 6);
  EXPECT_EQ(q.prediction_note, note);
  EXPECT_NE(progress.at(2).find("locate: predicted Rmax = 1.50 rps (Little's law on fake_closed"),
            std::string::npos)
      << progress.at(2);
  nlohmann::json j = RowQualificationToJson(q);
  EXPECT_EQ(j["locate"]["predicted_level"], 6);
  EXPECT_EQ(j["locate"]["predicted_rps"], 1.5);
  EXPECT_EQ(j["locate"]["prediction"], note);
  EXPECT_FALSE(j["locate"].contains("predicted_cmax"));
}

TEST(QualifyRateTest, AClosedLoopResultOfAnotherIdentityOrShapeIsRefused) {
  Row row = RateRow();
  CapacityData closed = ClosedLoopData(row);
  Row other = row;
  other.workload.input_tokens = 2048;
  Result<int> level = PredictLevelFromClosedLoop(other, closed, "ref/capacity-data.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("ref/capacity-data.json cannot start fake_rate: "
                                          "fake_closed is another identity or shape: "
                                          "input_tokens 512, not 2048"),
            std::string::npos)
      << level.status().message();
  other = row;
  other.identity.model = "another/model";
  level = PredictLevelFromClosedLoop(other, closed, "x.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("model '', not 'another/model'"), std::string::npos)
      << level.status().message();
  // A rate qualification is no closed loop, and an unproven one has no Cmax.
  closed.rows[0].row.arrival = "poisson";
  closed.rows[0].row.rate_step_rps = 0.25;
  level = PredictLevelFromClosedLoop(row, closed, "x.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("a rate qualification"), std::string::npos);
  closed = ClosedLoopData(row);
  closed.rows[0].status = QualifyStatus::kLowered;
  closed.rows[0].cmax.reset();
  level = PredictLevelFromClosedLoop(row, closed, "x.json", nullptr);
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("no proven Cmax (lowered)"), std::string::npos);
  // And a closed-loop row cannot be started from one.
  EXPECT_FALSE(PredictLevelFromClosedLoop(FakeRow(), ClosedLoopData(row), "x.json", nullptr).ok());
}

TEST(QualifyRateTest, TheEngineModelDoesNotGuessARateRow) {
  Result<Row> row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_rate.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  EXPECT_FALSE(PredictFromProfile(*row, 64).ok());
}

// The row file gets expect.rmax_rps (the rate as the labels write it) and loads back with it.
TEST(QualifyRateTest, SpliceWritesRmaxAndTheRowLoadsBack) {
  const std::string path =
      std::string(CAPQ_SOURCE_DIR) + "/tests/data/rows_good/ratefam/rate_constant.yaml";
  Result<Row> row = LoadRow(path);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_EQ(row->workload.open_loop.rate_step_rps, 0.1);
  // Level 3 passes, level 4 fails: Rmax = 3 x 0.1 rps, which binary writes 0.30000000000000004.
  TrialRunner runner = [](const Row& r, const TrialRequest& req) {
    TrialSummary t;
    double itl = 10.0 * req.concurrency;
    t.slo = {SloCheck{"itl", 95, r.slo[0].below_ms, itl, itl < r.slo[0].below_ms}};
    t.outcome = t.slo[0].passed ? "pass" : "slo_fail";
    t.correctness_pass = true;
    return t;
  };
  RowQualification q = Qualify(*row, runner, QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.summary_line.rfind("rate_constant: Rmax = 0.3 rps — R=0.3 rps itl p95 30.0 ms pass, "
                                 "R=0.4 rps itl p95 40.0 ms fail",
                                 0),
            0u)
      << q.summary_line;
  Row updated = RowWithQualification(*row, q, "2026-12-02", "out/capacity-data.json");
  ASSERT_TRUE(updated.expect.rmax_rps.has_value());
  EXPECT_EQ(*updated.expect.rmax_rps, 0.3);
  Result<std::string> text = capdata::ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const std::string original = *text;
  Result<std::string> spliced = SpliceRowExpectation(original, updated, path);
  ASSERT_TRUE(spliced.ok()) << spliced.status().ToString();
  EXPECT_NE(spliced->find("expect:\n  rmax_rps: 0.3\n"), std::string::npos) << *spliced;
  EXPECT_EQ(spliced->find("cmax"), std::string::npos);
  // Everything before the expectation is kept as written, comments included.
  EXPECT_EQ(spliced->substr(0, spliced->find("expect:")),
            original.substr(0, original.find("expect:")));
  Result<Row> back = LoadRowFromString(*spliced, path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->expect.rmax_rps, 0.3);
  EXPECT_EQ(LevelAtRate(*back, *back->expect.rmax_rps), 3);
  EXPECT_EQ(back->provenance.qualified_on, "2026-12-02");
  // A concurrency claim on a rate row does not load, so it is never written.
  Row wrong = updated;
  wrong.expect.rmax_rps.reset();
  wrong.expect.cmax = 3;
  Result<std::string> refused = SpliceRowExpectation(original, wrong, path);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("expect.rmax_rps"), std::string::npos)
      << refused.status().message();
}

// ---- End to end: the real trial path, one `capq trial` process per trial, against the embedded
// simulator, on tiny rows that qualify in seconds (tests/data/capacity/rows).

namespace fs = std::filesystem;

const std::string kCapq = std::string(CAPQ_BINARY_DIR) + "/harness/capq";
const std::string kRows = std::string(CAPQ_SOURCE_DIR) + "/tests/data/capacity/rows";

fs::path E2eDir(const std::string& name) {
  fs::path p =
      fs::temp_directory_path() / ("capq_qualify_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the capq command with argv (no shell); stdout to `out`, stderr to `err`. Returns the exit
// code.
int RunCapq(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  std::vector<std::string> argv = {kCapq};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::RunProcess(argv, out.string(), err.string());
}

class QualifyEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kCapq)) << kCapq << " is missing: build the capq target first";
  }
  // Qualifies `row` with one capq process per trial against a simulator started from the row's
  // own profile and time scale; trial directories go under `out`.
  static RowQualification QualifyOnItsSimulator(const Row& row, const fs::path& out,
                                                QualifyOptions qo = QualifyOptions{}) {
    sim::ServerOptions so = sim::ServerOptionsForRow(row);
    auto srv = sim::SimServer::Start(so);
    if (!srv.ok()) {
      ADD_FAILURE() << srv.status().ToString();
      return {};
    }
    ProcessTrialRunnerOptions ro;
    ro.exe = kCapq;
    ro.row_path = row.source_path;
    ro.url = (*srv)->url();
    ro.out_dir = out.string();
    qo.max_concurrency = 32;
    RowQualification q = Qualify(row, MakeProcessTrialRunner(ro), qo);
    (*srv)->Stop();
    return q;
  }
};

TEST_F(QualifyEndToEndTest, ProcessPerTrialFindsTheRowsCmaxOnTheSimulator) {
  Result<Row> row = LoadRow(kRows + "/qualify_tiny.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->expect.cmax.has_value());
  fs::path out = E2eDir("lib");
  RowQualification q = QualifyOnItsSimulator(*row, out);

  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.cmax, row->expect.cmax);
  EXPECT_LE(q.probes, q.probe_budget) << CostLine(q);
  int c = *q.cmax;
  for (int side : {c, c + 1}) {
    auto ts = q.Trials("confirm", side);
    ASSERT_EQ(ts.size(), static_cast<size_t>(row->trials.count));
    for (const auto* t : ts) {
      EXPECT_EQ(t->seed, row->trials.seeds[t->trial - 1]);
      EXPECT_TRUE(fs::exists(out / t->dir / "verdict.json")) << t->dir;
      EXPECT_TRUE(fs::exists(out / (t->dir + ".log")));
      EXPECT_NE(t->command.find("--concurrency " + std::to_string(side)), std::string::npos)
          << t->command;
      EXPECT_NE(t->command.find("--phase confirm"), std::string::npos) << t->command;
      EXPECT_FALSE(t->sha256sums.empty());
      EXPECT_TRUE(t->correctness_pass);
      EXPECT_EQ(t->totals.streams, row->measured.RequestsAt(side));
      EXPECT_EQ(t->ttft_ms_by_arrival.size(), static_cast<size_t>(row->measured.RequestsAt(side)));
      EXPECT_EQ(t->passed(), side == c);
    }
  }
  for (const auto& t : q.trials) {
    if (t.phase == "probe") {
      EXPECT_NE(t.command.find("--phase probe"), std::string::npos);
    }
  }
  // No prompt is sent twice in one qualification (baseline, probes, both sides of the boundary):
  // a flush that leaves prompts cached must show as cached tokens, never as a faster trial.
  std::map<std::string, std::string> sent_by;  // prompt sha256 -> "<trial dir> <request id>"
  std::set<std::string> corpora;
  size_t sent = 0;
  for (const auto& t : q.trials) {
    nlohmann::json plan = nlohmann::json::parse(Slurp(out / t.dir / "plan.json"));
    EXPECT_TRUE(corpora.insert(plan["corpus"]["id"].get<std::string>()).second)
        << t.dir << " reuses corpus " << plan["corpus"]["id"];
    EXPECT_EQ(t.corpus, plan["corpus"]["id"]) << "the capacity data names each trial's corpus";
    EXPECT_GE(t.max_cached_tokens, 0) << t.dir;
    EXPECT_LE(t.max_cached_tokens, t.cold_allowed_tokens) << t.dir;
    for (const char* list : {"warmup", "measured"}) {
      for (const auto& r : plan[list]) {
        const std::string where = t.dir + " " + r["id"].get<std::string>();
        ++sent;
        auto [it, fresh] = sent_by.emplace(r["prompt"]["sha256"].get<std::string>(), where);
        EXPECT_TRUE(fresh) << "prompt of " << where << " was already sent by " << it->second;
      }
    }
  }
  EXPECT_GT(q.trials.size(), 2u * row->trials.count);
  EXPECT_EQ(sent_by.size(), sent);
  fs::remove_all(out);
}

// A real server has no profile: the engine model calibrated on its C = 1 baseline trial (the
// server's reported limits, TTFT and ITL) chooses the first probes. On the simulator, treated as a
// black box, that proves the same Cmax with fewer trials than a blind search.
TEST_F(QualifyEndToEndTest, ABaselineCalibratedPredictionProvesTheSameCmaxWithFewerTrials) {
  Result<Row> row = LoadRow(kRows + "/qualify_tiny.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  fs::path out = E2eDir("predict");
  RowQualification blind = QualifyOnItsSimulator(*row, out / "blind");
  QualifyOptions qo;
  TrialPredictors predictors = PredictFromBaselineTrial(*row, 32);
  qo.predict_from_baseline = predictors.predict;
  qo.refine_prediction = predictors.refine;
  RowQualification predicted = QualifyOnItsSimulator(*row, out / "predicted", qo);
  ASSERT_EQ(blind.status, QualifyStatus::kProven) << blind.message;
  ASSERT_EQ(predicted.status, QualifyStatus::kProven) << predicted.message;
  EXPECT_EQ(predicted.cmax, blind.cmax);
  EXPECT_FALSE(blind.predicted_cmax);
  ASSERT_TRUE(predicted.predicted_cmax) << predicted.prediction_note;
  EXPECT_LE(std::abs(*predicted.predicted_cmax - *predicted.cmax), 1) << predicted.prediction_note;
  EXPECT_LT(predicted.trials.size(), blind.trials.size())
      << CostLine(predicted) << " vs " << CostLine(blind);
  EXPECT_NE(predicted.prediction_source.find("baseline trial"), std::string::npos);
  EXPECT_EQ(predicted.predicted_curve.size(), static_cast<size_t>(*predicted.predicted_cmax + 1));
  bool measured_b1 = false;
  for (const auto& p : predicted.prediction_parameters) {
    measured_b1 |= p.name == "b1_s_per_prefill_token" && p.basis == engine::Basis::kMeasured;
  }
  EXPECT_TRUE(measured_b1);
  fs::remove_all(out);
}

TEST_F(QualifyEndToEndTest, BrokenStreamDuringConfirmationFailsWithTheGateNamed) {
  Result<Row> row = LoadRow(kRows + "/qualify_tiny.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  fs::path out = E2eDir("broken");
  {
    std::ofstream f(out / "faults.yaml");
    f << "faults:\n  - kind: empty_deltas\n";
  }
  sim::ServerOptions so = sim::ServerOptionsForRow(*row);
  auto clean = sim::SimServer::Start(so);
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  so.faults_path = (out / "faults.yaml").string();
  auto broken = sim::SimServer::Start(so);
  ASSERT_TRUE(broken.ok()) << broken.status().ToString();
  ProcessTrialRunnerOptions ro;
  ro.exe = kCapq;
  ro.row_path = row->source_path;
  ro.out_dir = (out / "trials").string();
  ro.url = (*clean)->url();
  TrialRunner navigate = MakeProcessTrialRunner(ro);
  ro.url = (*broken)->url();
  TrialRunner confirm = MakeProcessTrialRunner(ro);
  // Same profile, same identity: only the confirmation trials meet the broken server.
  TrialRunner runner = [&](const Row& r, const TrialRequest& req) {
    return req.phase == "confirm" ? confirm(r, req) : navigate(r, req);
  };
  QualifyOptions qo;
  qo.max_concurrency = 32;
  RowQualification q = Qualify(*row, runner, qo);
  (*clean)->Stop();
  (*broken)->Stop();
  EXPECT_EQ(q.status, QualifyStatus::kCorrectnessFail) << q.message;
  EXPECT_NE(q.failed_gate.find("nonempty_deltas"), std::string::npos) << q.failed_gate;
  EXPECT_NE(q.summary_line.find("nonempty_deltas"), std::string::npos) << q.summary_line;
  EXPECT_FALSE(q.cmax.has_value());
  // It stopped at the first broken confirmation trial.
  size_t confirms = 0;
  for (const auto& t : q.trials) confirms += t.phase == "confirm";
  EXPECT_EQ(confirms, 1u);
  EXPECT_EQ(q.trials.back().outcome, "correctness_fail");
  EXPECT_EQ(QualifyExitCode(q.status), 2);
  fs::remove_all(out);
}

TEST_F(QualifyEndToEndTest, CommandWritesDataReportAndUpdatesTheRow) {
  fs::path root = E2eDir("cli");
  // The row's profile path is relative (../../../../rows/sim/profiles/small.yaml): rebuild that
  // layout around a copy so --update can rewrite the copy in place.
  fs::create_directories(root / "rows/sim/profiles");
  fs::copy_file(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/small.yaml",
                root / "rows/sim/profiles/small.yaml");
  fs::path row_dir = root / "a/b/c/d";
  fs::create_directories(row_dir);
  fs::path row_path = row_dir / "qualify_tiny.yaml";
  fs::copy_file(kRows + "/qualify_tiny.yaml", row_path);
  std::string before = Slurp(row_path);
  fs::path out = root / "out";
  int rc = RunCapq(
      {"qualify", row_path.string(), "--out", out.string(), "--update", "--max-concurrency", "32"},
      root / "stdout.txt", root / "stderr.txt");
  std::string stdout_text = Slurp(root / "stdout.txt");
  std::string stderr_text = Slurp(root / "stderr.txt");
  ASSERT_EQ(rc, 0) << stdout_text << stderr_text;

  std::istringstream lines(stdout_text);
  std::string summary, cost;
  std::getline(lines, summary);
  std::getline(lines, cost);
  EXPECT_TRUE(std::regex_match(
      summary, std::regex("qualify_tiny: Cmax = 6 — C=6 ttft p95 [0-9]+\\.[0-9]{2}/"
                          "[0-9]+\\.[0-9]{2} s pass, C=7 ttft p95 [0-9]+\\.[0-9]{2}/"
                          "[0-9]+\\.[0-9]{2} s fail")))
      << summary;
  EXPECT_NE(cost.find("cost: baseline 1 trial"), std::string::npos) << cost;
  EXPECT_NE(cost.find("confirm 4 trials"), std::string::npos) << cost;
  // Progress with counts and an ETA went to stderr.
  EXPECT_NE(stderr_text.find("confirm 1/4: C=6 trial 1"), std::string::npos) << stderr_text;
  EXPECT_NE(stderr_text.find("ETA"), std::string::npos);

  auto data = ReadCapacityData((out / "capacity-data.json").string());
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  ASSERT_EQ(data->rows.size(), 1u);
  EXPECT_EQ(data->rows[0].summary_line, summary);
  std::string html = Slurp(out / "report.html");
  EXPECT_NE(html.find("id=\"fig-ttft-qualify_tiny\""), std::string::npos);
  EXPECT_NE(html.find("id=\"fig-arrival-qualify_tiny\""), std::string::npos);
  // The operating limit follows the result as a policy line, and is kept and shown.
  const Recommendation& rec = data->rows[0].recommendation;
  ASSERT_TRUE(rec.level.has_value());
  EXPECT_LT(*rec.level, 6);
  EXPECT_NE(stdout_text.find("\n  policy (not the benchmark answer): operate at C=" +
                             std::to_string(*rec.level) + " — "),
            std::string::npos)
      << stdout_text;
  EXPECT_NE(html.find("id=\"rec-qualify_tiny\""), std::string::npos);

  // The row beside the data and the row updated in place both carry the proven Cmax.
  auto beside = LoadRow((out / "qualify_tiny.yaml").string());
  ASSERT_TRUE(beside.ok()) << beside.status().ToString();
  EXPECT_EQ(beside->expect.cmax, 6);
  auto updated = LoadRow(row_path.string());
  ASSERT_TRUE(updated.ok()) << updated.status().ToString();
  EXPECT_EQ(updated->expect.cmax, 6);
  char today[16];
  std::time_t now = std::time(nullptr);
  std::strftime(today, sizeof today, "%Y-%m-%d", std::gmtime(&now));
  EXPECT_EQ(updated->provenance.qualified_on, today);
  EXPECT_NE(updated->provenance.notes.find("Margins: C=6 ttft p95"), std::string::npos);
  std::string after = Slurp(row_path);
  // Everything but expect/provenance is kept as written, comments included.
  EXPECT_EQ(after.substr(0, after.find("expect:")), before.substr(0, before.find("expect:")));

  // capq report rebuilds the page from the capacity data alone.
  fs::remove(out / "report.html");
  rc = RunCapq({"report", out.string()}, root / "stdout2.txt", root / "stderr2.txt");
  EXPECT_EQ(rc, 0) << Slurp(root / "stderr2.txt");
  EXPECT_EQ(Slurp(out / "report.html"), html);
  fs::remove_all(root);
}

// A row with SLO tiers: one command proves every tier, each child trial judges every tier's gates,
// and a trial two tiers need at the same (phase, C, k) is run once.
TEST_F(QualifyEndToEndTest, CommandProvesEveryTierAndRunsEachTrialOnce) {
  fs::path root = E2eDir("tiers");
  fs::path out = root / "out";
  int rc = RunCapq({"qualify", kRows + "/qualify_tiny_tiers.yaml", "--out", out.string(),
                    "--max-concurrency", "32"},
                   root / "stdout.txt", root / "stderr.txt");
  std::string stdout_text = Slurp(root / "stdout.txt");
  ASSERT_EQ(rc, 0) << stdout_text << Slurp(root / "stderr.txt");
  EXPECT_NE(stdout_text.find("\n  qualify_tiny_tiers tier ttft_itl: Cmax = 3 — C=3 itl p95 "),
            std::string::npos)
      << stdout_text;
  EXPECT_NE(stdout_text.find("\n  qualify_tiny_tiers tier e2e: Cmax = 4 — C=4 e2e p95 "),
            std::string::npos)
      << stdout_text;
  EXPECT_EQ(stdout_text.find("tier order violated"), std::string::npos) << stdout_text;

  auto data = ReadCapacityData((out / "capacity-data.json").string());
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  const RowQualification& q = data->rows.at(0);
  ASSERT_EQ(q.tiers.size(), 3u);
  EXPECT_EQ(q.tiers[0].cmax, 6);
  EXPECT_EQ(q.tiers[1].cmax, 3);
  EXPECT_EQ(q.tiers[2].cmax, 4);
  // e2e's Cmax side, C=4, is ttft_itl's Cmax + 1: run for ttft_itl, reused by e2e.
  int reused = 0;
  for (const TierTrial* x : q.tiers[2].DecidedBy()) reused += x->concurrency == 4 && x->reused;
  EXPECT_EQ(reused, 2) << "trials.count confirmations at C=4 come from ttft_itl";
  std::set<std::string> dirs;
  for (const auto* list : {&q.trials, &q.tier_trials}) {
    for (const auto& t : *list) {
      EXPECT_TRUE(dirs.insert(t.dir).second) << t.dir << " ran twice";
      EXPECT_TRUE(fs::exists(out / t.dir / "verdict.json")) << t.dir;
      EXPECT_EQ(t.tier_slo.size(), 2u) << t.dir << ": the child judged every tier's gates";
    }
  }
  EXPECT_FALSE(q.tier_trials.empty());
  std::string html = Slurp(out / "report.html");
  EXPECT_NE(html.find("id=\"tbl-tiers-qualify_tiny_tiers\""), std::string::npos);
  fs::remove_all(root);
}

// --from-closed-loop is checked before any trial: another identity, or a closed-loop row, is
// refused with the reason and exit 3, and nothing is written.
TEST_F(QualifyEndToEndTest, FromClosedLoopRefusesAnotherIdentityBeforeAnyTrial) {
  fs::path root = E2eDir("from_closed");
  const std::string rate = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_rate.yaml";
  const std::string b70 =
      std::string(CAPQ_SOURCE_DIR) + "/tests/data/capacity/seed_like/capacity-data.json";
  int rc = RunCapq({"qualify", rate, "--out", (root / "out").string(), "--from-closed-loop", b70},
                   root / "stdout.txt", root / "stderr.txt");
  std::string err = Slurp(root / "stderr.txt");
  EXPECT_EQ(rc, 3) << err;
  EXPECT_NE(err.find("cannot start sim_small_rate: b70_qwen38_27b_2k512 is another identity or "
                     "shape: engine 'sglang', not 'sim'"),
            std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(root / "out"));
  rc = RunCapq({"qualify", kRows + "/qualify_tiny.yaml", "--out", (root / "out").string(),
                "--from-closed-loop", b70},
               root / "stdout.txt", root / "stderr.txt");
  err = Slurp(root / "stderr.txt");
  EXPECT_EQ(rc, 3) << err;
  EXPECT_NE(err.find("--from-closed-loop starts rate rows; qualify_tiny is closed loop"),
            std::string::npos)
      << err;
  fs::remove_all(root);
}

TEST(ProcessTrialRunnerTest, ATrialProcessThatNeverEndsIsStoppedAtItsDeadline) {
  fs::path dir = E2eDir("deadline");
  fs::path fake = dir / "never_ends.sh";
  {
    std::ofstream f(fake);
    f << "#!/bin/sh\nexec sleep 600\n";
  }
  fs::permissions(fake, fs::perms::owner_all);
  ProcessTrialRunnerOptions ro;
  ro.exe = fake.string();
  ro.row_path = "unused.yaml";
  ro.url = "http://127.0.0.1:1";
  ro.out_dir = (dir / "out").string();
  ro.trial_deadline_s = 0.3;
  TrialSummary t = MakeProcessTrialRunner(ro)(FakeRow(), TrialRequest{"probe", 3, 1, 42});
  EXPECT_EQ(t.outcome, "could_not_run");
  ASSERT_FALSE(t.reasons.empty());
  EXPECT_NE(t.reasons.back().find("wall deadline"), std::string::npos) << t.reasons.back();
  EXPECT_EQ(t.dir, "fake/probe/c3-t1");
  fs::remove_all(dir);
}

// small_jitter puts run-to-run noise at the boundary: whatever the draw, the result must obey the
// overlap rule — proven only when the sides separate, otherwise the lower point, never higher.
TEST_F(QualifyEndToEndTest, JitteryBoundaryObeysTheOverlapRule) {
  Result<Row> row = LoadRow(kRows + "/qualify_jitter.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  fs::path out = E2eDir("jitter");
  RowQualification q = QualifyOnItsSimulator(*row, out);
  ASSERT_TRUE(q.status == QualifyStatus::kProven || q.status == QualifyStatus::kLowered)
      << q.summary_line;
  if (q.status == QualifyStatus::kProven) {
    for (const auto* t : q.Trials("confirm", *q.cmax)) EXPECT_TRUE(t->passed());
    for (const auto* t : q.Trials("confirm", *q.cmax + 1)) EXPECT_FALSE(t->passed());
  } else {
    EXPECT_FALSE(q.cmax.has_value());
    ASSERT_TRUE(q.operating_point.has_value()) << q.message;
    for (const auto* t : q.Trials("confirm", *q.operating_point)) EXPECT_TRUE(t->passed());
    // The sides were extended before settling, and the point is not above any failing trial.
    for (const auto& t : q.trials) {
      if (t.phase == "confirm" && !t.passed()) {
        EXPECT_GT(t.concurrency, *q.operating_point);
      }
    }
    EXPECT_NE(q.message.find("noisy boundary"), std::string::npos);
  }
  fs::remove_all(out);
}

}  // namespace
}  // namespace capq

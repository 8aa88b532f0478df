#include "capq/protocol/qualify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <utility>

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
  EXPECT_EQ(q.summary_line,
            "fake: Cmax = 4 — C=4 p95 0.80/0.80/0.80 s pass, C=5 1.00/1.00/1.00 s fail");
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
    if (r.phase == "confirm") EXPECT_LE(r.concurrency, 5);
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

TEST(QualifyTest, BaselineOutsideToleranceStopsBeforeTheSearch) {
  Row row = FakeRow();
  row.expect.baseline = Baseline{300.0, 10.0, 15};  // the fake measures p50 = 100 ms at C=1
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
  row.expect.baseline = Baseline{105.0, 10.5, 15};
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
  EXPECT_NE(updated.provenance.notes.find("C=4 p95 0.80-0.80 s over 3 trials"), std::string::npos)
      << updated.provenance.notes;
  EXPECT_NE(updated.provenance.notes.find("C=5 p95 1.00-1.00 s"), std::string::npos);
  EXPECT_NE(updated.provenance.notes.find("out/capacity-data.json"), std::string::npos);
}

}  // namespace
}  // namespace capq

// A row that requires a confidence (Row::confidence): the qualification adds trials at its proven
// boundary until the pass side reaches it, a trial fails there, or the side is full, and says
// which.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

#include "capq/measurement/certainty.h"
#include "capq/qualify/qualify.h"
#include "qualify_test_util.h"

namespace capq {
namespace {

// p95 TTFT 200 ms x C against the fake row's 1000 ms bound, 20 requests a trial: none over the
// bound where the trial passes, 10 where it fails; `failing` confirm trials (C, k) fail at C.
struct CountingServer {
  std::set<std::pair<int, int>> failing;
  int confirms_at_4 = 0;

  TrialSummary operator()(const Row& row, const TrialRequest& r) {
    if (r.phase == QualifyPhase::kConfirm && r.level == 4) ++confirms_at_4;
    const bool fails = failing.count({r.level, r.trial}) > 0;
    const double p95 = fails ? 1200 : 200.0 * r.level;
    const bool pass = p95 < row.slo[0].below_ms;
    TrialSummary t;
    t.has_metrics = true;
    t.ttft_ms.p95 = p95;
    t.slo = {SloCheck{"ttft", 95, row.slo[0].below_ms, p95, pass,
                      ClaimConfidence(20, pass ? 0 : 10, 95, pass)}};
    t.latency_pass = pass;
    t.outcome = pass ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    return t;
  }
};

RowQualification QualifyWith(double confidence, CountingServer& server, int max_trials = 0) {
  Row row = testing::FakeRow();
  row.trials.count = 2;
  row.trials.seeds = {101, 202};
  row.confidence = confidence;
  QualifyOptions opt;
  opt.max_level = 64;
  opt.max_trials_per_side = max_trials;
  return Qualify(
      row, [&server](const Row& r, const TrialRequest& req) { return server(r, req); }, opt);
}

TEST(ConfidenceClaim, TrialsAreAddedAtTheBoundaryUntilThePassSideReachesIt) {
  CountingServer server;
  // Two trials of 20 with none over: 1 - 0.95^40 = 0.871 < 0.9; a third makes 0.954.
  RowQualification q = QualifyWith(0.9, server);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.cmax, 4);
  ASSERT_TRUE(q.confidence_claim.has_value());
  EXPECT_TRUE(q.confidence_claim->met);
  EXPECT_EQ(q.confidence_claim->added_trials, 1);
  EXPECT_EQ(server.confirms_at_4, 3);
  EXPECT_DOUBLE_EQ(q.confidence_claim->reached, PassConfidence(60, 0, 95));
  EXPECT_EQ(q.Trials(QualifyPhase::kConfirm, 5).size(), 2u) << "the fail side is left as it was";
  const std::string line = BoundaryConfidenceLine(q, q.boundary_confidence);
  EXPECT_NE(line.find("required on the pass side 0.9: met: 0.954 over 3 trials at C=4"),
            std::string::npos)
      << line;
  // Kept in the capacity data, with the row's requirement.
  CapacityData d;
  d.rows.push_back(q);
  auto back = CapacityDataFromJson(CapacityDataToJson(d));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->rows[0].confidence_claim.has_value());
  EXPECT_TRUE(back->rows[0].confidence_claim->met);
  EXPECT_EQ(back->rows[0].confidence_claim->added_trials, 1);
  EXPECT_EQ(back->rows[0].row.confidence, 0.9);
}

TEST(ConfidenceClaim, AFullSideThatFallsShortSaysSoAndKeepsItsProof) {
  CountingServer server;
  // 0.999 needs 135 requests with none over; four trials (the most a side may have) hold 80.
  RowQualification q = QualifyWith(0.999, server, 4);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  ASSERT_TRUE(q.confidence_claim.has_value());
  EXPECT_FALSE(q.confidence_claim->met);
  EXPECT_EQ(q.confidence_claim->added_trials, 2);
  EXPECT_NE(q.confidence_claim->note.find("not met: 0.983 over 4 trials at C=4, the most"),
            std::string::npos)
      << q.confidence_claim->note;
}

TEST(ConfidenceClaim, ATrialThatFailsAtTheBoundaryUndoesTheProof) {
  CountingServer server;
  server.failing = {{4, 3}};
  RowQualification q = QualifyWith(0.9, server);
  EXPECT_EQ(q.status, QualifyStatus::kLowered) << q.message;
  EXPECT_FALSE(q.cmax.has_value());
  ASSERT_TRUE(q.confidence_claim.has_value());
  EXPECT_FALSE(q.confidence_claim->met);
  EXPECT_NE(q.confidence_claim->note.find("C=4 trial 3 failed"), std::string::npos)
      << q.confidence_claim->note;
  ASSERT_TRUE(q.operating_point.has_value());
  EXPECT_LT(*q.operating_point, 4);
}

TEST(ConfidenceClaim, ARowThatRequiresNoneRunsNoMoreTrials) {
  CountingServer server;
  Row row = testing::FakeRow();
  row.trials.count = 2;
  row.trials.seeds = {101, 202};
  QualifyOptions opt;
  opt.max_level = 64;
  RowQualification q = Qualify(
      row, [&server](const Row& r, const TrialRequest& req) { return server(r, req); }, opt);
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_FALSE(q.confidence_claim.has_value());
  EXPECT_EQ(server.confirms_at_4, 2);
}

}  // namespace
}  // namespace capq

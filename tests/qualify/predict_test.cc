// Boundary predictions through the engine model: from a sim row's profile and from a real
// server's published baseline.
#include "capq/qualify/predict.h"

#include <gtest/gtest.h>

#include <cmath>

#include "capq/model/row_loader.h"
#include "capq/qualify/qualify.h"

namespace capq {
namespace {

const std::string kB70 = std::string(CAPQ_SOURCE_DIR) + "/rows/b70/";

Row Load(const std::string& path) {
  Result<Row> r = LoadRow(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : Row{};
}

// The seed's held-out check: the reference row's published C = 1 figures (TTFT p50 and ITL p50)
// and the server's reported limits alone predict each shape's boundary. The rows' TTFT under load
// and their Cmax are never inputs: only expect.cmax is compared, after the prediction.
TEST(PredictTest, TheB70BaselineAlonePredictsEveryB70RowWithinOne) {
  Result<MeasuredBaseline> base = BaselineFromRow(Load(kB70 + "b70_qwen38_27b_8k1k.yaml"));
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_TRUE(base->assumed.empty()) << "the row gives the server's prompt tokens";
  for (const char* file :
       {"b70_qwen38_27b_2k512.yaml", "b70_qwen38_27b_8k1k.yaml", "b70_qwen38_27b_16k2k.yaml"}) {
    Row row = Load(kB70 + file);
    ASSERT_TRUE(row.expect.cmax) << file;
    Result<BoundaryPrediction> p = PredictFromBaselines(row, {*base}, 64);
    ASSERT_TRUE(p.ok()) << file << ": " << p.status().ToString();
    ASSERT_TRUE(p->cmax) << file << ": " << p->note;
    EXPECT_LE(std::abs(*p->cmax - *row.expect.cmax), 1) << file << ": " << p->note;
    // The server prompt carries the baseline's template overhead (8,243 - 8,192 tokens).
    EXPECT_EQ(p->prompt_tokens, row.workload.input_tokens + 51) << file;
    ASSERT_EQ(p->curve.size(), static_cast<size_t>(*p->cmax + 1)) << file;
    EXPECT_TRUE(p->curve[*p->cmax - 1].passes);
    EXPECT_FALSE(p->curve.back().passes);
  }
}

TEST(PredictTest, ARowWithoutAPublishedBaselineCannotCalibrate) {
  Result<MeasuredBaseline> b = BaselineFromRow(Load(kB70 + "b70_qwen38_27b_2k512.yaml"));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("b70_qwen38_27b_2k512"), std::string::npos);
}

TEST(PredictTest, ATrialWithoutServerLimitsCannotCalibrate) {
  TrialSummary t;
  t.dir = "baseline/c1-t1";
  Result<MeasuredBaseline> b = BaselineFromTrial(t, Load(kB70 + "b70_qwen38_27b_8k1k.yaml"));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("baseline/c1-t1"), std::string::npos);
}

TEST(PredictTest, ASimRowsProfilePredictionNamesBothSidesOfItsBoundary) {
  Row row = Load(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_reference.yaml");
  Result<BoundaryPrediction> p = PredictFromProfile(row, 64);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const std::optional<int> c = p->cmax;
  const std::string& note = p->note;
  ASSERT_TRUE(c);
  EXPECT_EQ(c, row.expect.cmax);
  EXPECT_NE(note.find("at C=" + std::to_string(*c) + ","), std::string::npos) << note;
  EXPECT_NE(note.find("at C=" + std::to_string(*c + 1)), std::string::npos) << note;
}

TEST(PredictTest, AMixedRowIsNotPredictedAsOneShape) {
  Row row = Load(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_mixed.yaml");
  ASSERT_TRUE(row.mix);
  Result<BoundaryPrediction> p = PredictFromProfile(row, 64);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("mixes request classes"), std::string::npos);
}

}  // namespace
}  // namespace capq

namespace capq {
namespace {

// A probe decided early measured only what finished before the decision: none of its
// percentiles is a load point for the refit, which keeps the probe's level alone.
TEST(PredictTest, AProbeDecidedEarlyGivesTheRefitItsBoundAndItsItl) {
  Row row = Load(std::string(CAPQ_SOURCE_DIR) + "/rows/b70/b70_qwen38_27b_8k1k.yaml");
  TrialSummary probe;
  probe.level = 8;
  probe.has_metrics = true;
  probe.ttft_ms.n = 20;
  probe.ttft_ms.p50 = 4000;
  probe.ttft_ms.p95 = 11000;
  probe.itl_ms.n = 20;
  probe.itl_ms.p50 = 12;
  const MeasuredLoad measured = LoadFromTrial(probe, row);
  EXPECT_DOUBLE_EQ(measured.ttft_gate_ms, 11000);
  EXPECT_DOUBLE_EQ(measured.itl_p50_ms, 12);
  EXPECT_DOUBLE_EQ(measured.ttft_p50_ms, 4000);
  EXPECT_FALSE(measured.gate_at_least);
  // Decided by the row's TTFT gate: its bound is a lower bound, the finished requests' TTFT p50
  // (the quicker ones) is no figure, their ITL is.
  EarlyDecision by_ttft;
  by_ttft.gate = row.slo.front();
  ASSERT_EQ(by_ttft.gate.metric, SloMetric::kTtft);
  by_ttft.lowest_reachable_ms = 9500;
  probe.decided = by_ttft;
  const MeasuredLoad decided = LoadFromTrial(probe, row);
  EXPECT_EQ(decided.concurrency, 8);
  EXPECT_DOUBLE_EQ(decided.ttft_gate_ms, 9500);
  EXPECT_TRUE(decided.gate_at_least);
  EXPECT_TRUE(std::isnan(decided.ttft_p50_ms));
  EXPECT_DOUBLE_EQ(decided.itl_p50_ms, 12);
  // Decided by another gate: no TTFT figure at all.
  EarlyDecision by_e2e = by_ttft;
  by_e2e.gate.metric = SloMetric::kE2e;
  probe.decided = by_e2e;
  const MeasuredLoad other = LoadFromTrial(probe, row);
  EXPECT_TRUE(std::isnan(other.ttft_gate_ms));
  EXPECT_FALSE(other.gate_at_least);
  EXPECT_TRUE(std::isnan(other.ttft_p50_ms));
}

}  // namespace
}  // namespace capq

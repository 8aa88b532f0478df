// Calibration: the engine model's costs fitted back from C = 1 baselines that a known profile
// produced, so every fitted figure has a true value to meet.
#include "capq/engine/calibrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "capq/engine/predict.h"

namespace capq::engine {
namespace {

EngineProfile Truth() {
  EngineProfile p;
  p.name = "truth";
  p.max_total_tokens = 1 << 22;
  p.page_size = 16;
  p.max_running_requests = 8;
  p.chunked_prefill_size = 4096;
  p.b0_s = 0.02;
  p.b1_s_per_prefill_token = 2e-4;
  p.b2_s_per_chunk_token_sq = 0;
  p.b3_s_per_decode_row = 2e-4;  // one token per row at the prompt's per-token cost
  p.b4_s_per_decode_kv_token = 0;
  p.overhead_s = 0;
  p.template_prefix_tokens = 0;
  return p;
}

ServerShape ShapeOf(const EngineProfile& truth) {
  ServerShape s;
  s.profile = truth;
  s.profile.b0_s = s.profile.b1_s_per_prefill_token = s.profile.b3_s_per_decode_row = 1;
  s.profile.b4_s_per_decode_kv_token = 1;
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A C = 1 baseline of `truth`: TTFT and ITL medians over 9 requests.
BaselinePoint Measure(const EngineProfile& truth, int64_t prompt_tokens, int64_t output_tokens) {
  PredictOptions o;
  o.prompt_tokens = prompt_tokens;
  o.output_tokens = output_tokens;
  o.measured_requests = 9;
  o.shared_prefix_tokens = 0;
  Result<PredictedTrial> t = PredictTrial(truth, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  std::vector<double> ttft, itl;
  for (const auto& r : t->measured) {
    ttft.push_back(static_cast<double>(r.ttft_ns()) / 1e6);
    itl.push_back(r.itl_ns() / 1e6);
  }
  return BaselinePoint{prompt_tokens, output_tokens, Median(ttft), Median(itl), 0};
}

const Parameter* Find(const Calibration& c, const std::string& name) {
  for (const Parameter& p : c.parameters) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

double TtftAt(const EngineProfile& p, int concurrency) {
  PredictOptions o;
  o.prompt_tokens = 3000;
  o.output_tokens = 200;
  o.concurrency = concurrency;
  o.measured_requests = 32;
  o.shared_prefix_tokens = 0;
  Result<PredictedTrial> t = PredictTrial(p, o);
  EXPECT_TRUE(t.ok());
  return TtftPercentileNs(t->measured, 95) / 1e6;
}

TEST(CalibrateTest, OneLengthRecoversFixedAndPerTokenCostsAndPredictsLoadAsTheTruth) {
  const EngineProfile truth = Truth();
  Result<Calibration> c = Calibrate(ShapeOf(truth), {Measure(truth, 3000, 200)});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->profile.b0_s, truth.b0_s, 1e-4);
  EXPECT_NEAR(c->profile.b1_s_per_prefill_token, truth.b1_s_per_prefill_token, 1e-6);
  EXPECT_EQ(c->profile.b4_s_per_decode_kv_token, 0);
  EXPECT_EQ(Find(*c, "b1_s_per_prefill_token")->basis, Basis::kMeasured);
  EXPECT_EQ(Find(*c, "b3_s_per_decode_row")->basis, Basis::kAssumed);
  EXPECT_EQ(Find(*c, "b4_s_per_decode_kv_token")->basis, Basis::kAssumed);
  // Where the truth matches the assumptions, load is predicted as the truth runs it.
  for (int conc : {4, 12}) EXPECT_NEAR(TtftAt(c->profile, conc), TtftAt(truth, conc), 2.0);
}

TEST(CalibrateTest, TwoLengthsMeasureTheDecodeRowAndContextCosts) {
  EngineProfile truth = Truth();
  truth.b3_s_per_decode_row = 5e-3;
  truth.b4_s_per_decode_kv_token = 1e-6;
  const BaselinePoint longer = Measure(truth, 3000, 200), shorter = Measure(truth, 1000, 200);
  Result<Calibration> two = Calibrate(ShapeOf(truth), {shorter, longer});
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_NEAR(two->profile.b0_s, truth.b0_s, 2e-4);
  EXPECT_NEAR(two->profile.b1_s_per_prefill_token, 2e-4, 2e-6);
  EXPECT_NEAR(two->profile.b4_s_per_decode_kv_token, 1e-6, 2e-8);
  EXPECT_NEAR(two->profile.b3_s_per_decode_row, 5e-3, 2e-4);
  for (const char* name :
       {"b0_s", "b1_s_per_prefill_token", "b3_s_per_decode_row", "b4_s_per_decode_kv_token"}) {
    EXPECT_EQ(Find(*two, name)->basis, Basis::kMeasured) << name;
  }
  // One length cannot see b3 or b4: it assumes them, and says so.
  Result<Calibration> one = Calibrate(ShapeOf(truth), {longer});
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(one->profile.b3_s_per_decode_row, one->profile.b1_s_per_prefill_token, 1e-9);
  EXPECT_EQ(Find(*one, "b3_s_per_decode_row")->basis, Basis::kAssumed);
}

TEST(CalibrateTest, SpeculativeAcceptanceIsMeasuredFromChunksOrAssumed) {
  EngineProfile truth = Truth();
  truth.spec_draft_tokens = 7;
  BaselinePoint b{8000, 512, 2000, 9, 3.6};
  Result<Calibration> measured = Calibrate(ShapeOf(truth), {b});
  ASSERT_TRUE(measured.ok()) << measured.status().ToString();
  EXPECT_DOUBLE_EQ(measured->profile.spec_accept_mean, 2.6);
  EXPECT_EQ(Find(*measured, "spec_accept_mean")->basis, Basis::kMeasured);
  // A decode row of a verify step computes 1 + 7 tokens.
  EXPECT_NEAR(measured->profile.b3_s_per_decode_row, 8 * measured->profile.b1_s_per_prefill_token,
              1e-12);
  b.tokens_per_chunk = 0;
  Result<Calibration> assumed = Calibrate(ShapeOf(truth), {b});
  ASSERT_TRUE(assumed.ok());
  EXPECT_DOUBLE_EQ(assumed->profile.spec_accept_mean, kAssumedSpecAcceptMean);
  EXPECT_EQ(Find(*assumed, "spec_accept_mean")->basis, Basis::kAssumed);
}

// A decode row that costs far more than a prompt token (a CPU server's per-slot sampling): one
// C = 1 baseline cannot see it, a trial under load measures it.
TEST(CalibrateTest, ATrialUnderLoadMeasuresTheDecodeRowCost) {
  EngineProfile truth = Truth();
  truth.b0_s = 0.0004;
  truth.b1_s_per_prefill_token = 2.5e-5;
  truth.b3_s_per_decode_row = 3.5e-4;  // 14 x b1
  truth.max_running_requests = 8;
  const BaselinePoint base = Measure(truth, 523, 128);
  Result<Calibration> one = Calibrate(ShapeOf(truth), {base});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_LT(one->profile.b3_s_per_decode_row, 1e-4) << "assumed from the prompt's cost";
  PredictOptions load;
  load.prompt_tokens = 523;
  load.output_tokens = 128;
  load.concurrency = 14;
  load.measured_requests = 56;
  load.shared_prefix_tokens = 0;
  Result<PredictedTrial> t = PredictTrial(truth, load);
  ASSERT_TRUE(t.ok());
  std::vector<double> itl;
  for (const auto& r : t->measured) itl.push_back(r.itl_ns() / 1e6);
  Result<Calibration> refined = RefineWithLoad(*one, base, load, Median(itl));
  ASSERT_TRUE(refined.ok()) << refined.status().ToString();
  EXPECT_NEAR(refined->profile.b3_s_per_decode_row, 3.5e-4, 2e-5);
  EXPECT_NEAR(refined->profile.b0_s, 0.0004, 3e-5);
  EXPECT_EQ(Find(*refined, "b3_s_per_decode_row")->basis, Basis::kMeasured);
  for (int conc : {8, 9}) EXPECT_NEAR(TtftAt(refined->profile, conc), TtftAt(truth, conc), 5.0);
  EXPECT_FALSE(RefineWithLoad(*one, base, load, 0).ok());
}

// FitLoad takes every load point's TTFT percentiles as well as its ITL: the decode row's cost
// is recovered from two probes together, and from the TTFT of a probe whose ITL was not measured.
TEST(CalibrateTest, AFitOverEveryLoadPointMeasuresTheDecodeRowCost) {
  EngineProfile truth = Truth();
  truth.b0_s = 0.0004;
  truth.b1_s_per_prefill_token = 2.5e-5;
  truth.b3_s_per_decode_row = 3.5e-4;  // 14 x b1
  truth.max_running_requests = 8;
  const BaselinePoint base = Measure(truth, 523, 128);
  Result<Calibration> one = Calibrate(ShapeOf(truth), {base});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  std::vector<LoadPoint> points;
  for (int conc : {6, 14}) {
    LoadPoint lp;
    lp.load.prompt_tokens = 523;
    lp.load.output_tokens = 128;
    lp.load.concurrency = conc;
    lp.load.measured_requests = 4 * conc;
    lp.load.shared_prefix_tokens = 0;
    Result<PredictedTrial> t = PredictTrial(truth, lp.load);
    ASSERT_TRUE(t.ok());
    std::vector<double> itl;
    for (const auto& r : t->measured) itl.push_back(r.itl_ns() / 1e6);
    lp.itl_p50_ms = Median(itl);
    lp.ttft_p50_ms = TtftPercentileNs(t->measured, 50) / 1e6;
    lp.ttft_gate_ms = TtftPercentileNs(t->measured, 95) / 1e6;
    points.push_back(lp);
  }
  Result<Calibration> fit = FitLoad(*one, base, points);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_NEAR(fit->profile.b3_s_per_decode_row, 3.5e-4, 3e-5);
  EXPECT_EQ(Find(*fit, "b3_s_per_decode_row")->basis, Basis::kMeasured);
  EXPECT_NE(Find(*fit, "b3_s_per_decode_row")->how.find("C=6, C=14"), std::string::npos)
      << Find(*fit, "b3_s_per_decode_row")->how;
  // The TTFT alone (a probe decided early keeps no ITL) still says the row is costly.
  std::vector<LoadPoint> ttft_only = {points.back()};
  ttft_only[0].itl_p50_ms = NAN;
  Result<Calibration> from_ttft = FitLoad(*one, base, ttft_only);
  ASSERT_TRUE(from_ttft.ok()) << from_ttft.status().ToString();
  EXPECT_GT(from_ttft->profile.b3_s_per_decode_row, 1.5e-4);
  EXPECT_FALSE(FitLoad(*one, base, {}).ok());
}

// A probe decided early gives its gating percentile as a lower bound: a bound above the
// baseline-only model raises the decode row's cost until the model reaches it; a bound the model
// already exceeds leaves the fit free (any b3 whose model is at or above it misfits nothing).
TEST(CalibrateTest, ALowerBoundRaisesTheDecodeRowCostOnlyWhenTheModelIsBelowIt) {
  EngineProfile truth = Truth();
  truth.b0_s = 0.0004;
  truth.b1_s_per_prefill_token = 2.5e-5;
  truth.b3_s_per_decode_row = 3.5e-4;
  truth.max_running_requests = 8;
  const BaselinePoint base = Measure(truth, 523, 128);
  Result<Calibration> one = Calibrate(ShapeOf(truth), {base});
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  LoadPoint lp;
  lp.load.prompt_tokens = 523;
  lp.load.output_tokens = 128;
  lp.load.concurrency = 14;
  lp.load.measured_requests = 56;
  lp.load.shared_prefix_tokens = 0;
  auto p95_ms = [&lp](const EngineProfile& p) {
    Result<PredictedTrial> t = PredictTrial(p, lp.load);
    EXPECT_TRUE(t.ok());
    return t.ok() ? TtftPercentileNs(t->measured, 95) / 1e6 : NAN;
  };
  const double truth_ms = p95_ms(truth);
  const double baseline_only_ms = p95_ms(one->profile);
  ASSERT_LT(baseline_only_ms, 0.9 * truth_ms) << "the baseline alone must under-predict here";
  lp.ttft_gate_ms = 0.9 * truth_ms;
  lp.gate_at_least = true;
  Result<Calibration> raised = FitLoad(*one, base, {lp});
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  EXPECT_GT(raised->profile.b3_s_per_decode_row, 4 * one->profile.b3_s_per_decode_row);
  EXPECT_GE(p95_ms(raised->profile), 0.98 * lp.ttft_gate_ms);
  // A bound below the model constrains nothing: the fit keeps the model at or above it, where
  // the same figure as a measurement would pull the model down to it.
  lp.ttft_gate_ms = 0.5 * baseline_only_ms;
  Result<Calibration> free = FitLoad(*one, base, {lp});
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_GE(p95_ms(free->profile), lp.ttft_gate_ms);
  lp.gate_at_least = false;
  Result<Calibration> matched = FitLoad(*one, base, {lp});
  ASSERT_TRUE(matched.ok()) << matched.status().ToString();
  EXPECT_LT(p95_ms(matched->profile), p95_ms(free->profile));
}

TEST(CalibrateTest, ABaselineThatCannotBeFittedIsRefusedWithItsFigures) {
  const ServerShape shape = ShapeOf(Truth());
  // A prefill faster than one decode step leaves no per-token cost.
  Result<Calibration> c = Calibrate(shape, {BaselinePoint{3000, 200, 10, 30, 0}});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("TTFT p50 10.0 ms"), std::string::npos)
      << c.status().message();
  EXPECT_FALSE(Calibrate(shape, {BaselinePoint{3000, 1, 500, 30, 0}}).ok());
  EXPECT_FALSE(Calibrate(shape, {}).ok());
  Result<Calibration> close = Calibrate(
      shape, {BaselinePoint{3000, 200, 620, 20, 0}, BaselinePoint{2900, 200, 600, 20, 0}});
  ASSERT_FALSE(close.ok());
  EXPECT_NE(close.status().message().find("at least 10%"), std::string::npos);
}

}  // namespace
}  // namespace capq::engine

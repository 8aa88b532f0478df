#include "capq/qualify/recommend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "capq/model/row_loader.h"
#include "capq/qualify/qualify.h"

namespace capq {
namespace {

constexpr double kBoundMs = 10000;

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TrialSummary Trial(QualifyPhase phase, int level, double ttft_ms) {
  TrialSummary t;
  t.phase = phase;
  t.level = level;
  t.slo = {SloCheck{"ttft", 95, kBoundMs, ttft_ms, ttft_ms < kBoundMs, {}}};
  t.outcome = ttft_ms < kBoundMs ? TrialOutcome::kPass : TrialOutcome::kSloFail;
  return t;
}

// A proven Cmax with these p95 TTFTs (ms) on its confirmation trials at Cmax and Cmax + 1.
RowQualification Proven(int cmax, const std::vector<double>& at, const std::vector<double>& above) {
  RowQualification q;
  q.row.id = "r";
  q.row.slo = {SloGate{SloMetric::kTtft, 95, kBoundMs}};
  q.status = QualifyStatus::kProven;
  q.cmax = cmax;
  q.operating_point = cmax;
  for (double v : at) q.trials.push_back(Trial(QualifyPhase::kConfirm, cmax, v));
  for (double v : above) q.trials.push_back(Trial(QualifyPhase::kConfirm, cmax + 1, v));
  return q;
}

Recommendation Rec(const RowQualification& q) { return Recommend(q, RequalifyFields(q.row)); }

TEST(RecommendTest, DefaultIsOneStepBelowAProvenCmax) {
  RowQualification q = Proven(7, {8000, 8500, 8700}, {10500, 10600, 10400});
  q.trials.push_back(Trial(QualifyPhase::kProbe, 6, 7990));
  Recommendation r = Rec(q);
  ASSERT_TRUE(r.level.has_value());
  EXPECT_EQ(*r.level, 6);
  EXPECT_EQ(r.from_level, 7);
  EXPECT_EQ(r.steps_down, 1);
  EXPECT_FALSE(r.thin_margin);
  EXPECT_FALSE(r.noisy);
  EXPECT_EQ(r.rule, "one step below the proven Cmax (1 default)");
  EXPECT_TRUE(Has(r.reason, "the C=7 confirmation trials keep at least 10% headroom")) << r.reason;
  ASSERT_TRUE(r.margin.has_value());
  EXPECT_TRUE(r.margin->at_recommended);
  EXPECT_EQ(r.margin->level, 6);
  EXPECT_EQ(r.margin->measured_ms, 7990);
  EXPECT_EQ(r.margin->text, "ttft p95 7.99 s vs 10.00 s at C=6: 20% headroom (worst of 1 trial)");
}

TEST(RecommendTest, AMarginNotMeasuredAtTheRecommendedLevelSaysSoAndGivesCmaxs) {
  Recommendation r = Rec(Proven(7, {8000, 8700, 8500}, {10500, 10600, 10400}));
  ASSERT_EQ(r.level, 6);
  ASSERT_TRUE(r.margin.has_value());
  EXPECT_FALSE(r.margin->at_recommended);
  EXPECT_EQ(r.margin->level, 7);
  EXPECT_EQ(r.margin->measured_ms, 8700);
  EXPECT_EQ(r.margin->text,
            "not measured at C=6 (no trial ran there); ttft p95 8.70 s vs 10.00 s at C=7: 13% "
            "headroom (worst of 3 trials)");
}

TEST(RecommendTest, AThinMarginAtCmaxStepsTwoDown) {
  Recommendation r = Rec(Proven(7, {9230, 9300, 9310}, {10500, 10600, 10400}));
  EXPECT_EQ(r.level, 5);
  EXPECT_EQ(r.steps_down, 2);
  EXPECT_TRUE(r.thin_margin);
  EXPECT_FALSE(r.noisy);
  EXPECT_EQ(r.rule, "two steps below the proven Cmax (1 default + 1 thin margin)");
  EXPECT_EQ(r.reason,
            "the C=7 confirmation trials keep less than 10% headroom (worst ttft p95 9.31 s vs "
            "10.00 s: 6.9%)");
}

// Thin means a worst trial within 10% of the bound: exactly 10% headroom is not thin.
TEST(RecommendTest, TheThinThresholdIsTenPercentOfTheBound) {
  EXPECT_EQ(Rec(Proven(7, {8000, 9000}, {10500})).level, 6);
  EXPECT_EQ(Rec(Proven(7, {8000, 9001}, {10500})).level, 5);
}

TEST(RecommendTest, AThinMarginOnAnyGateCounts) {
  RowQualification q = Proven(7, {5000, 5000}, {10500, 10500});
  q.row.slo.push_back(SloGate{SloMetric::kItl, 95, 50});
  for (auto& t : q.trials) t.slo.push_back(SloCheck{"itl", 95, 50, 48, true, {}});
  Recommendation r = Rec(q);
  EXPECT_EQ(r.level, 5);
  EXPECT_TRUE(r.thin_margin);
  EXPECT_TRUE(Has(r.reason, "(worst itl p95 48.0 ms vs 50.0 ms: 4.0%)")) << r.reason;
}

TEST(RecommendTest, ProvenSidesThatOverlapAreANoisyBoundary) {
  Recommendation r = Rec(Proven(7, {8000, 8000, 8000}, {10500, 9900, 10400}));
  EXPECT_EQ(r.level, 5);
  EXPECT_TRUE(r.noisy);
  EXPECT_FALSE(r.thin_margin);
  EXPECT_EQ(r.rule, "two steps below the proven Cmax (1 default + 1 noisy boundary)");
  EXPECT_TRUE(Has(r.reason, "the boundary was noisy (C=8 passed 1 of 3)")) << r.reason;
}

// The qualification itself: C=5 passes one of its trials, so the result is lowered to C=4; the
// recommendation steps two below that and keeps the margin the C=2 probe measured.
TEST(RecommendTest, ALoweredQualificationStepsTwoBelowItsOperatingPoint) {
  Row row;
  row.id = "fake";
  row.identity.image = "repo@sha256:abc";
  row.workload.input_tokens = 512;
  row.workload.output_tokens = 64;
  row.slo = {SloGate{SloMetric::kTtft, 95, 1000}};
  row.trials.seeds = {101, 202, 303};
  TrialRunner runner = [](const Row& r, const TrialRequest& req) {
    double p95 = req.level == 5 && req.trial == 2 ? 990.0 : 200.0 * req.level;
    TrialSummary t;
    t.slo = {SloCheck{"ttft", 95, r.slo[0].below_ms, p95, p95 < r.slo[0].below_ms, {}}};
    t.outcome = t.slo[0].passed ? TrialOutcome::kPass : TrialOutcome::kSloFail;
    return t;
  };
  RowQualification q = Qualify(row, runner, QualifyOptions{});
  ASSERT_EQ(q.status, QualifyStatus::kLowered);
  ASSERT_EQ(q.operating_point, 4);
  const Recommendation& r = q.recommendation;
  EXPECT_EQ(r.level, 2);
  EXPECT_EQ(r.from_level, 4);
  EXPECT_TRUE(r.noisy);
  EXPECT_EQ(r.rule, "two steps below the lowered operating point (1 default + 1 noisy boundary)");
  EXPECT_TRUE(Has(r.reason, "the boundary was noisy (C=5 passed 1 of 6)")) << r.reason;
  ASSERT_TRUE(r.margin.has_value());
  EXPECT_TRUE(r.margin->at_recommended);
  EXPECT_TRUE(Has(r.margin->text, "ttft p95 0.40 s vs 1.00 s at C=2: 60% headroom"))
      << r.margin->text;
  EXPECT_EQ(r.requalify_on.at(1).field, "identity.image");
}

TEST(RecommendTest, AThinMarginAndANoisyBoundaryAddUp) {
  RowQualification q = Proven(6, {9500, 9400, 9600}, {10100, 10200, 10300});
  q.status = QualifyStatus::kLowered;
  q.cmax.reset();
  Recommendation r = Rec(q);
  EXPECT_EQ(r.level, 3);
  EXPECT_TRUE(r.thin_margin);
  EXPECT_TRUE(r.noisy);
  EXPECT_EQ(r.rule,
            "three steps below the lowered operating point (1 default + 1 thin margin + 1 noisy "
            "boundary)");
}

TEST(RecommendTest, NeverBelowOne) {
  Recommendation one = Rec(Proven(1, {2000, 2000}, {10500, 10500}));
  EXPECT_EQ(one.level, 1);
  EXPECT_EQ(one.steps_down, 0);
  EXPECT_EQ(one.rule,
            "one step below the proven Cmax (1 default); held at C=1, the lowest level, so it "
            "keeps no step");
  Recommendation two = Rec(Proven(2, {9500, 9600}, {10500, 10500}));
  EXPECT_EQ(two.level, 1);
  EXPECT_EQ(two.steps_down, 1);
  EXPECT_TRUE(Has(two.rule, "held at C=1, the lowest level, so it keeps one step")) << two.rule;
}

TEST(RecommendTest, NoProvenBoundaryGivesNoRecommendationAndSaysWhy) {
  RowQualification q = Proven(7, {8000}, {10500});
  q.cmax.reset();
  q.operating_point = 64;  // as Qualify keeps the last passing probe: not a boundary
  q.max_level = 64;
  q.status = QualifyStatus::kNoFailUpToCap;
  Recommendation cap = Rec(q);
  EXPECT_FALSE(cap.level.has_value());
  EXPECT_FALSE(cap.margin.has_value());
  EXPECT_EQ(cap.reason,
            "no proven Cmax: every probe up to C=64 passed, so Cmax >= 64 is not a claim to step "
            "down from");
  q.status = QualifyStatus::kFailsAtOne;
  EXPECT_EQ(Rec(q).reason,
            "no proven Cmax: C=1 misses the row's gates: there is no level to "
            "operate at");
  q.status = QualifyStatus::kLowered;
  q.operating_point.reset();
  EXPECT_FALSE(Rec(q).level.has_value());
  EXPECT_TRUE(Has(Rec(q).reason, "no operating point")) << Rec(q).reason;
  q.status = QualifyStatus::kCorrectnessFail;
  q.failed_gate = "nonempty_deltas";
  EXPECT_TRUE(Has(Rec(q).reason, "correctness gate nonempty_deltas failed")) << Rec(q).reason;
}

// A margin no trial measured is not a margin: it counts as thin.
TEST(RecommendTest, AnUnmeasuredMarginCountsAsThin) {
  RowQualification q = Proven(7, {8000, 8000}, {10500, 10500});
  for (auto& t : q.trials) t.slo[0].measured_ms = NAN;
  Recommendation r = Rec(q);
  EXPECT_EQ(r.level, 5);
  EXPECT_TRUE(r.thin_margin);
  EXPECT_FALSE(r.margin.has_value());
  EXPECT_TRUE(Has(r.reason, "the margin is unknown and counts as thin")) << r.reason;
}

TEST(RecommendTest, ARateRowStepsInRateStepsAndReadsAsRates) {
  RowQualification q = Proven(6, {8000, 8000}, {10500, 10500});
  q.cmax.reset();
  q.row.arrival = ArrivalKind::kPoisson;
  q.row.rate_step_rps = 0.25;
  q.rmax_rps = 1.5;
  q.trials.push_back(Trial(QualifyPhase::kProbe, 5, 7000));
  q.recommendation = Rec(q);
  EXPECT_EQ(q.recommendation.level, 5);
  EXPECT_EQ(q.recommendation.rule, "one step below the proven Rmax (1 default)");
  EXPECT_TRUE(Has(q.recommendation.reason, "the R=1.50 rps confirmation trials keep"))
      << q.recommendation.reason;
  EXPECT_TRUE(Has(q.recommendation.margin->text, "at R=1.25 rps: 30% headroom"));
  EXPECT_TRUE(Has(RecommendationLine(q),
                  "policy (not the benchmark answer): operate at R=1.25 rps — one step below "
                  "the proven Rmax"))
      << RecommendationLine(q);
}

TEST(RecommendTest, TheLineIsLabelledAPolicyAndCountsThePinnedFields) {
  RowQualification q = Proven(7, {8000, 8700, 8500}, {10500, 10600, 10400});
  q.recommendation = Recommend(q, {{"identity.image", "x"}, {"slo", "p95 ttft < 10000 ms"}});
  EXPECT_EQ(
      RecommendationLine(q),
      "policy (not the benchmark answer): operate at C=6 — one step below the proven Cmax "
      "(1 default); margin kept: not measured at C=6 (no trial ran there); ttft p95 8.70 s vs "
      "10.00 s at C=7: 13% headroom (worst of 3 trials); requalify when any of 2 pinned "
      "fields changes (capacity data)");
  q.status = QualifyStatus::kFailsAtOne;
  q.recommendation = Rec(q);
  EXPECT_EQ(RecommendationLine(q),
            "policy (not the benchmark answer): no recommended operating limit — no proven Cmax: "
            "C=1 misses the row's gates: there is no level to operate at");
}

std::string Pinned(const std::vector<PinnedField>& fields, const std::string& name) {
  for (const auto& f : fields) {
    if (f.field == name) return f.value;
  }
  return "(absent)";
}

// Part VII: requalify when the image digest, checkpoint, runtime, driver, graph policy,
// speculative settings or workload distribution changes.
TEST(RecommendTest, RequalifyFieldsPinTheIdentityTheWorkloadAndTheContract) {
  auto row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/b70/b70_qwen38_27b_8k1k.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  auto f = RequalifyFields(*row);
  EXPECT_EQ(Pinned(f, "identity.engine"), "sglang");
  EXPECT_EQ(Pinned(f, "identity.image"), row->identity.image);
  EXPECT_EQ(Pinned(f, "identity.model"), "ulkaa/Qwen3.8-27B-AWQ-INT4");
  EXPECT_EQ(Pinned(f, "identity.model_revision"), "2bf7f1646dc0875cff4404fdfef976cfb0ff2199");
  EXPECT_EQ(Pinned(f, "identity.hardware"), "4 x Intel Arc Pro B70");
  EXPECT_EQ(Pinned(f, "identity.driver"), "17012946");
  for (const auto& [key, value] : row->identity.server_expect) {
    EXPECT_EQ(Pinned(f, "identity.server_expect." + key), value) << key;
  }
  EXPECT_EQ(Pinned(f, "identity.server_expect.speculative_algorithm"), "EAGLE");
  EXPECT_EQ(Pinned(f, "workload.input_tokens"), "8192");
  EXPECT_EQ(Pinned(f, "workload.output_tokens"), "1024");
  EXPECT_EQ(Pinned(f, "workload.input_stddev_tokens"), "0");
  EXPECT_EQ(Pinned(f, "workload.sampling"), "temperature 0, ignore_eos true");
  EXPECT_EQ(Pinned(f, "workload.arrival"), "closed_loop");
  EXPECT_EQ(Pinned(f, "workload.prompt_corpus"), "synthetic");
  EXPECT_EQ(Pinned(f, "cache.prefix_cache"), "enabled");
  EXPECT_EQ(Pinned(f, "slo"), "p95 ttft < 10000 ms");
  EXPECT_EQ(Pinned(f, "percentile_method"), "linear");
  // What the capacity data keeps of the row pins the same identity, shape and contract.
  auto kept = RequalifyFields(RowInfoFromRow(*row));
  for (const auto& k : kept) EXPECT_EQ(Pinned(f, k.field), k.value) << k.field;
  EXPECT_EQ(Pinned(kept, "identity.image"), row->identity.image);
}

}  // namespace
}  // namespace capq

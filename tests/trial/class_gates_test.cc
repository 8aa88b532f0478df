#include "capq/trial/class_gates.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/record/artifacts.h"
#include "capq/trial/trial.h"

namespace capq {
namespace {

const std::string kMixedRow = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_mixed.yaml";

// 120 measured requests of the shipped mixed row's plan at C = 6; each class's TTFT is fixed
// (heavy slow), so the global p95 passes the 1200 ms gate while the heavy class misses it.
struct Fixture {
  Row row;
  TrialPlan plan;
  std::vector<RequestResult> meas;
};

Fixture Make(double heavy_ttft_ms) {
  Fixture f;
  auto row = LoadRow(kMixedRow);
  EXPECT_TRUE(row.ok()) << row.status().ToString();
  f.row = *row;
  PlanInputs in;
  in.level = 6;
  auto plan = MakeTrialPlan(f.row, in);
  EXPECT_TRUE(plan.ok());
  f.plan = *plan;
  for (const PlanRequest& p : f.plan.measured) {
    RequestResult r;
    r.id = p.id;
    r.index = p.index;
    r.phase = Phase::kMeasured;
    r.http_status = 200;
    r.start_ns = 1'000'000'000LL + p.index * 1'000'000LL;
    const double ttft_ms = p.traffic_class == "heavy" ? heavy_ttft_ms : 200;
    r.ttft_ns = static_cast<int64_t>(ttft_ms * 1e6);
    r.e2e_ns = *r.ttft_ns + 100'000'000LL;
    r.end_ns = r.start_ns + *r.e2e_ns;
    r.completion_tokens = p.max_tokens;
    f.meas.push_back(r);
  }
  return f;
}

TEST(ClassGates, AHeavyTailFailsTheTrialAndIsNamedWhenTheGlobalGatePasses) {
  Fixture f = Make(1500);
  auto classes = JudgeClasses(f.row, f.plan, f.meas, 1.0);
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(classes[0].name, "short");
  EXPECT_EQ(classes[0].requests, 60);
  EXPECT_EQ(classes[2].requests, 20);
  EXPECT_TRUE(classes[0].passed());
  EXPECT_FALSE(classes[2].passed());
  EXPECT_NEAR(classes[2].ttft_p95_ms, 1500, 1e-6);
  EXPECT_NEAR(classes[0].ttft_p99_ms, 200, 1e-6);

  TrialVerdict v;
  v.outcome = TrialOutcome::kPass;
  v.latency_pass = true;
  ApplyClassGates(f.row, classes, &v);
  EXPECT_EQ(v.outcome, TrialOutcome::kSloFail);
  EXPECT_FALSE(v.latency_pass);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_EQ(v.reasons[0], "class heavy: p95 ttft 1500.0 ms is not below 1200.0 ms");
  ASSERT_EQ(v.classes.size(), 3u);
}

TEST(ClassGates, EveryClassWithinItsGateLeavesAPassAlone) {
  Fixture f = Make(900);
  TrialVerdict v;
  v.outcome = TrialOutcome::kPass;
  v.latency_pass = true;
  ApplyClassGates(f.row, JudgeClasses(f.row, f.plan, f.meas, 1.0), &v);
  EXPECT_EQ(v.outcome, TrialOutcome::kPass);
  EXPECT_TRUE(v.reasons.empty());
}

TEST(ClassGates, AClassWithNothingMeasuredFails) {
  Fixture f = Make(900);
  std::vector<RequestResult> no_heavy;
  for (size_t i = 0; i < f.meas.size(); ++i) {
    if (f.plan.measured[i].traffic_class != "heavy") no_heavy.push_back(f.meas[i]);
  }
  TrialVerdict v;
  v.outcome = TrialOutcome::kPass;
  ApplyClassGates(f.row, JudgeClasses(f.row, f.plan, no_heavy, 1.0), &v);
  EXPECT_EQ(v.outcome, TrialOutcome::kSloFail);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_NE(v.reasons[0].find("class heavy: p95 ttft: nothing measured"), std::string::npos);
}

TEST(ClassGates, VerdictJsonKeepsTheClasses) {
  Fixture f = Make(1500);
  TrialVerdict v;
  v.outcome = TrialOutcome::kSloFail;
  ApplyClassGates(f.row, JudgeClasses(f.row, f.plan, f.meas, 1.0), &v);
  VerdictContext ctx;
  ctx.row_id = f.row.id;
  auto back = VerdictFromJson(VerdictToJson(v, ctx));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->verdict.classes.size(), 3u);
  EXPECT_EQ(back->verdict.classes[2].name, "heavy");
  EXPECT_EQ(back->verdict.classes[2].requests, 20);
  EXPECT_FALSE(back->verdict.classes[2].passed());
  EXPECT_TRUE(back->verdict.classes[1].passed());
  EXPECT_NEAR(back->verdict.classes[2].gate_ms[0], 1500, 1e-6);
}

}  // namespace
}  // namespace capq

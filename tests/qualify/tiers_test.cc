#include "capq/qualify/tiers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "capq/record/artifacts.h"
#include "capq/trial/trial.h"
#include "tier_test_util.h"

namespace capq {
namespace {

namespace fs = std::filesystem;
using testing::FakeTieredRow;
using testing::FakeTierServer;
using testing::TierRunner;

const SloGate kTtft95{SloMetric::kTtft, 95, 1000};
const SloGate kItl95{SloMetric::kItl, 95, 16};
const SloGate kTtft99{SloMetric::kTtft, 99, 1000};

// 100 measured requests: TTFT 1..100 x 9 ms (p95 855.45 ms, p99 891.09 ms), ITL 20 ms each.
TrialMetrics HundredRequests() {
  TrialMetrics m;
  m.requests = 100;
  for (int i = 1; i <= 100; ++i) {
    m.ttft_values_ms.push_back(9.0 * i);
    m.itl_values_ms.push_back(20.0);
    m.e2e_values_ms.push_back(9.0 * i + 20.0 * 63);
  }
  return m;
}

CorrectnessReport AllCorrect() {
  CorrectnessReport c;
  c.gates = {GateResult{"status_200", true, true, "", {}}};
  return c;
}

// The verdict of one trial written as the trial path writes it and read back as qualify reads it.
TrialSummary ReadBack(const TrialVerdict& v) {
  fs::path dir = fs::temp_directory_path() / ("capq_tiers_" + std::to_string(getpid()));
  fs::create_directories(dir);
  VerdictContext ctx;
  ctx.row_id = "tiered";
  ctx.phase = QualifyPhase::kConfirm;
  std::ofstream(dir / "verdict.json") << VerdictToJson(v, ctx).dump(1);
  Result<TrialSummary> t = ReadTrialDir(dir.string());
  fs::remove_all(dir);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : TrialSummary{};
}

TEST(TierJudgementTest, OneTrialChecksEveryGateOfEveryTierOnce) {
  Row row = FakeTieredRow();
  TrialVerdict v = Decide(row, HundredRequests(), AllCorrect());
  // The row's own gate decides the outcome; the tiers' other gates ride along, once each (p95
  // TTFT is the primary's and ttft_itl's, and is not repeated).
  ASSERT_EQ(v.slo.size(), 1u);
  EXPECT_EQ(v.outcome, TrialOutcome::kPass);
  ASSERT_EQ(v.tier_slo.size(), 2u);
  EXPECT_EQ(v.tier_slo[0].gate.metric, SloMetric::kItl);
  EXPECT_DOUBLE_EQ(v.tier_slo[0].measured_ms, 20.0);
  EXPECT_FALSE(v.tier_slo[0].passed);
  EXPECT_EQ(v.tier_slo[1].gate.percentile, 99);
  EXPECT_NEAR(v.tier_slo[1].measured_ms, 891.09, 1e-9);
  EXPECT_TRUE(v.tier_slo[1].passed);
  // The tier gates take no part in the row's reasons: the failed ITL gate is the tier's business.
  for (const auto& r : v.reasons) EXPECT_EQ(r.find("itl"), std::string::npos) << r;
}

TEST(TierJudgementTest, EachTierReadsItsVerdictFromTheSameMeasurement) {
  Row row = FakeTieredRow();
  TrialSummary t = ReadBack(Decide(row, HundredRequests(), AllCorrect()));
  ASSERT_EQ(t.tier_slo.size(), 2u) << "verdict.json must carry the tier gates";
  EXPECT_EQ(TierOutcome(t, row.slo), TrialOutcome::kPass);
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[0].slo),
            TrialOutcome::kSloFail);  // ITL 20 ms is not below 16 ms
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[1].slo), TrialOutcome::kPass);  // p99 891 ms < 1000 ms
  TrialSummary itl = TierView(t, row.slo_tiers[0].slo);
  ASSERT_EQ(itl.slo.size(), 2u);
  EXPECT_EQ(itl.slo[1].metric, "itl");
  EXPECT_FALSE(itl.passed());
  EXPECT_FALSE(itl.latency_pass);
  EXPECT_TRUE(itl.tier_slo.empty());
  EXPECT_EQ(itl.ttft_ms.p95, t.ttft_ms.p95) << "a view keeps every measured figure";
  // A bound exactly at the measured value fails: strictly below, for a tier as for the row.
  row.slo_tiers[1].slo[0].below_ms = t.tier_slo[1].measured_ms;
  TrialVerdict exact = Decide(row, HundredRequests(), AllCorrect());
  ASSERT_EQ(exact.tier_slo.size(), 2u);
  EXPECT_FALSE(exact.tier_slo[1].passed);
}

TEST(TierJudgementTest, NoTierPassesABrokenTrialOrAGateItDidNotJudge) {
  Row row = FakeTieredRow();
  TrialSummary t = ReadBack(Decide(row, HundredRequests(), AllCorrect()));
  const std::vector<SloGate> unjudged = {SloGate{SloMetric::kE2e, 95, 1e9}};
  EXPECT_EQ(FindCheck(t, unjudged[0]), nullptr);
  EXPECT_EQ(TierOutcome(t, unjudged), TrialOutcome::kSloFail);
  EXPECT_TRUE(std::isnan(TierView(t, unjudged).slo[0].measured_ms));
  t.correctness_pass = false;
  t.outcome = TrialOutcome::kCorrectnessFail;
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[1].slo), TrialOutcome::kCorrectnessFail);
  t.outcome = TrialOutcome::kSloFail;  // a latency miss elsewhere with a broken stream is still no
                                       // tier pass
  EXPECT_EQ(TierOutcome(t, row.slo_tiers[1].slo), TrialOutcome::kSloFail);
}

TEST(TierJudgementTest, ARowWithoutTiersWritesNoTierGates) {
  Row row = FakeTieredRow();
  row.slo_tiers.clear();
  TrialVerdict v = Decide(row, HundredRequests(), AllCorrect());
  EXPECT_TRUE(v.tier_slo.empty());
  EXPECT_FALSE(VerdictToJson(v, VerdictContext{}).contains("tier_slo"));
}

TEST(TierOrderTest, AStricterContractCoversEveryGateOfTheLooserOne) {
  EXPECT_TRUE(AtLeastAsStrict({kTtft95, kItl95}, {kTtft95}));
  EXPECT_TRUE(AtLeastAsStrict({kTtft99}, {kTtft95}));  // a higher percentile of the same values
  EXPECT_TRUE(AtLeastAsStrict({SloGate{SloMetric::kTtft, 95, 900}}, {kTtft95}));
  EXPECT_FALSE(AtLeastAsStrict({kTtft95}, {kTtft95, kItl95}));
  EXPECT_FALSE(AtLeastAsStrict({kItl95}, {kTtft95}));
  EXPECT_FALSE(AtLeastAsStrict({SloGate{SloMetric::kTtft, 99, 1100}}, {kTtft95}));
  EXPECT_FALSE(AtLeastAsStrict({kTtft95}, {kTtft99}));
}

TEST(TierOrderTest, AStricterTierAdmittingMoreIsNamed) {
  RowQualification q;
  TierQualification loose, strict;
  loose.name = "primary";
  loose.slo = {kTtft95};
  loose.status = QualifyStatus::kProven;
  loose.cmax = loose.operating_point = 6;
  strict = loose;
  strict.name = "ttft_itl";
  strict.slo = {kTtft95, kItl95};
  strict.cmax = strict.operating_point = 6;
  q.tiers = {loose, strict};
  EXPECT_TRUE(TierOrderViolations(q).empty()) << "an equal Cmax keeps the order";
  q.tiers[1].cmax = q.tiers[1].operating_point = 7;
  std::vector<std::string> v = TierOrderViolations(q);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], "tier ttft_itl is at least as strict as tier primary but admits C=7 > C=6");
  q.tiers[1].status = QualifyStatus::kNoFailUpToCap;  // no claim, nothing to compare
  EXPECT_TRUE(TierOrderViolations(q).empty());
}

class TierQualifyTest : public ::testing::Test {
 protected:
  RowQualification Run() {
    QualifyOptions opt;
    opt.max_level = 64;
    return Qualify(row_, TierRunner(server_), opt);
  }
  static const TierQualification* Tier(const RowQualification& q, const std::string& name) {
    for (const auto& t : q.tiers) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  Row row_ = FakeTieredRow();
  FakeTierServer server_;
};

TEST_F(TierQualifyTest, EveryTierGetsItsOwnBoundaryOnTrialsRunOnce) {
  RowQualification q = Run();
  ASSERT_EQ(q.status, QualifyStatus::kProven) << q.message;
  EXPECT_EQ(q.cmax, 4);
  ASSERT_EQ(q.tiers.size(), 3u);
  EXPECT_EQ(q.tiers[0].name, "primary");
  EXPECT_EQ(q.tiers[0].cmax, 4);
  EXPECT_EQ(q.tiers[0].trials_run, static_cast<int>(q.trials.size()));
  for (const char* name : {"ttft_itl", "ttft_p99"}) {
    const TierQualification* t = Tier(q, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->status, QualifyStatus::kProven) << name << ": " << t->message;
    EXPECT_EQ(t->cmax, 3) << name;
  }
  // No (phase, C, k) was run twice, and every call is a trial of the data.
  for (const auto& [key, n] : server_.Counts()) {
    EXPECT_EQ(n, 1) << PhaseName(std::get<0>(key)) << " C=" << std::get<1>(key)
                    << " k=" << std::get<2>(key);
  }
  EXPECT_EQ(server_.calls.size(), q.trials.size() + q.tier_trials.size());
  int run = 0;
  for (const auto& t : q.tiers) run += t.trials_run;
  EXPECT_EQ(run, static_cast<int>(server_.calls.size())) << "each trial counted as run once";
}

TEST_F(TierQualifyTest, TrialsWhereTiersMeetAreReusedAndCounted) {
  RowQualification q = Run();
  const TierQualification* itl = Tier(q, "ttft_itl");
  const TierQualification* p99 = Tier(q, "ttft_p99");
  ASSERT_TRUE(itl && p99);
  // ttft_itl's C=4 side is the primary's Cmax: those three confirmations are the primary's.
  int reused_at_4 = 0;
  for (const TierTrial* x : itl->DecidedBy()) {
    EXPECT_EQ(x->outcome, x->level == 3 ? TrialOutcome::kPass : TrialOutcome::kSloFail);
    reused_at_4 += x->level == 4 && x->reused;
  }
  EXPECT_EQ(itl->DecidedBy().size(), 6u);
  EXPECT_EQ(reused_at_4, 3);
  // ttft_p99 meets ttft_itl at C=3: it runs nothing at all.
  EXPECT_EQ(p99->trials_run, 0);
  EXPECT_EQ(p99->DecidedBy().size(), 6u);
  for (const TierTrial* x : p99->DecidedBy()) EXPECT_TRUE(x->reused);
  for (const auto& t : q.tiers) {
    EXPECT_EQ(t.trials_run + t.trials_reused, static_cast<int>(t.trials.size())) << t.name;
    std::set<std::tuple<QualifyPhase, int, int>> keys;
    for (const auto& x : t.trials) {
      EXPECT_TRUE(keys.insert({x.phase, x.level, x.trial}).second) << t.name;
      EXPECT_NE(q.FindTrial(x.phase, x.level, x.trial), nullptr) << t.name;
    }
  }
  const std::string line = TierLine(*p99);
  EXPECT_EQ(line.rfind("tiered tier ttft_p99: Cmax = 3 — C=3 ttft p99 ", 0), 0u) << line;
  EXPECT_NE(line.find("(0 trials run, " + std::to_string(p99->trials_reused) + " reused)"),
            std::string::npos)
      << line;
}

TEST_F(TierQualifyTest, TheStricterTierNeverAdmitsMore) {
  RowQualification q = Run();
  const TierQualification* itl = Tier(q, "ttft_itl");
  ASSERT_TRUE(itl && itl->cmax && q.tiers[0].cmax);
  ASSERT_TRUE(AtLeastAsStrict(itl->slo, q.tiers[0].slo));
  EXPECT_LE(*itl->cmax, *q.tiers[0].cmax);
  EXPECT_TRUE(TierOrderViolations(q).empty());
  // The tier's own confirmations hold its claim when judged again from the trials.
  for (const TierTrial* x : itl->DecidedBy()) {
    const TrialSummary* t = q.FindTrial(x->phase, x->level, x->trial);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(TierOutcome(*t, itl->slo), x->outcome);
  }
}

TEST_F(TierQualifyTest, TrialsRunForTiersAreRecordedLikeThePrimarysOwn) {
  RowQualification q = Run();
  ASSERT_FALSE(q.tier_trials.empty());
  for (const auto& t : q.tier_trials) {
    // Not among the primary's trials, and seeded as the primary would have seeded it.
    for (const auto* p : q.Trials(t.phase, t.level)) EXPECT_NE(p->trial, t.trial);
    EXPECT_EQ(t.seed, TrialSeed(row_, t.phase, t.level, t.trial));
    EXPECT_FALSE(t.slo.empty());
    EXPECT_EQ(t.slo[0].metric, "ttft") << "the trial keeps the row's own gate first";
    EXPECT_GE(t.start_offset_s, 0);
  }
  ASSERT_EQ(q.phases.back().name, "tiers");
  EXPECT_EQ(q.phases.back().trials, static_cast<int>(q.tier_trials.size()));
  EXPECT_NE(CostLine(q).find("tiers " + std::to_string(q.tier_trials.size()) + " trials"),
            std::string::npos)
      << CostLine(q);
}

TEST_F(TierQualifyTest, ABrokenStreamInATiersTrialStopsTheTiersAfterIt) {
  server_.broken = {
      {QualifyPhase::kConfirm, 3, 2}};  // run for ttft_itl only: the primary never confirms C=3
  RowQualification q = Run();
  EXPECT_EQ(q.status, QualifyStatus::kProven) << "the primary's claim stands on its own trials";
  const TierQualification* itl = Tier(q, "ttft_itl");
  const TierQualification* p99 = Tier(q, "ttft_p99");
  ASSERT_TRUE(itl && p99);
  EXPECT_EQ(itl->status, QualifyStatus::kCorrectnessFail);
  EXPECT_NE(itl->message.find("nonempty_deltas"), std::string::npos) << itl->message;
  EXPECT_EQ(p99->status, QualifyStatus::kCouldNotRun);
  EXPECT_EQ(p99->message.rfind("not searched: tier ttft_itl stopped the qualification", 0), 0u)
      << p99->message;
  EXPECT_EQ(p99->trials_run, 0);
}

TEST_F(TierQualifyTest, NoTierIsSearchedWhenThePrimaryStops) {
  server_.broken = {{QualifyPhase::kConfirm, 4, 1}};
  RowQualification q = Run();
  ASSERT_EQ(q.status, QualifyStatus::kCorrectnessFail);
  ASSERT_EQ(q.tiers.size(), 3u);
  for (size_t i = 1; i < q.tiers.size(); ++i) {
    EXPECT_EQ(q.tiers[i].status, QualifyStatus::kCouldNotRun);
    EXPECT_NE(q.tiers[i].message.find("not searched: tier primary"), std::string::npos);
  }
  EXPECT_TRUE(q.tier_trials.empty());
  EXPECT_EQ(server_.calls.size(), q.trials.size());
}

TEST_F(TierQualifyTest, ARowWithoutTiersQualifiesAsBefore) {
  row_.slo_tiers.clear();
  RowQualification q = Run();
  EXPECT_EQ(q.status, QualifyStatus::kProven);
  EXPECT_TRUE(q.tiers.empty());
  EXPECT_TRUE(q.tier_trials.empty());
  EXPECT_NE(q.phases.back().name, "tiers");
}

}  // namespace
}  // namespace capq

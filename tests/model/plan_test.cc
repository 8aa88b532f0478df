#include "capq/model/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "capq/model/arrival.h"
#include "capq/model/row_loader.h"

namespace capq {
namespace {

PlanInputs Inputs(int concurrency, int trial, QualifyPhase phase = QualifyPhase::kConfirm) {
  PlanInputs in;
  in.level = concurrency;
  in.trial_index = trial;
  in.phase = phase;
  return in;
}

Row TestRow() {
  Row row;
  row.id = "plan_row";
  row.identity.engine = Engine::kSglang;
  row.identity.served_model_name = "Model-X";
  row.workload.input_tokens = 40;
  row.workload.output_tokens = 16;
  row.workload.sampling.temperature = 0;
  row.workload.sampling.ignore_eos = true;
  row.warmup = {8, 1};
  row.measured = {64, 4};
  row.trials.seeds = {101, 202, 303};
  return row;
}

TEST(TrialSeed, FromRowOrOverride) {
  Row row = TestRow();
  EXPECT_EQ(*TrialSeed(row, 2, std::nullopt), 202u);
  EXPECT_EQ(*TrialSeed(row, 2, 9), 9u);
  auto missing = TrialSeed(row, 4, std::nullopt);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no seed for trial 4"), std::string::npos);
}

TEST(MakeTrialPlan, SizesIdsAndDisjointSets) {
  Row row = TestRow();
  auto plan = MakeTrialPlan(row, Inputs(20, 1));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->seed, 101u);
  EXPECT_EQ(plan->warmup.size(), 8u);
  EXPECT_EQ(plan->measured.size(), 80u);  // max(64, 4 * 20)
  EXPECT_EQ(plan->expected_measured, 80);
  EXPECT_EQ(plan->warmup[3].id, "w3");
  EXPECT_EQ(plan->measured[17].id, "m17");
  std::set<std::string> warm, meas;
  for (const auto& r : plan->warmup) warm.insert(r.prompt.sha256);
  for (const auto& r : plan->measured) meas.insert(r.prompt.sha256);
  EXPECT_EQ(warm.size(), 8u);
  EXPECT_EQ(meas.size(), 80u);
  for (const auto& h : warm) EXPECT_EQ(meas.count(h), 0u);
  EXPECT_EQ(plan->calibration, "word_count");
}

TEST(MakeTrialPlan, TheBaselineMeasuresTheFewestItsGatesAllow) {
  Row row = TestRow();
  row.slo = {SloGate{SloMetric::kTtft, 95, 2500}};
  auto base = MakeTrialPlan(row, Inputs(1, 1, QualifyPhase::kBaseline));
  auto claim = MakeTrialPlan(row, Inputs(1, 1, QualifyPhase::kConfirm));
  ASSERT_TRUE(base.ok() && claim.ok());
  EXPECT_EQ(base->measured.size(), 20u);  // p95: at least one request above it
  EXPECT_EQ(base->expected_measured, 20);
  EXPECT_EQ(base->warmup.size(), 8u);  // the row's own warm-ups
  EXPECT_EQ(claim->expected_measured, 64);
  EXPECT_EQ(MakeTrialPlan(row, Inputs(1, 1, QualifyPhase::kProbe))->expected_measured, 64);
}

TEST(BaselineRequests, TheSampleRuleOfEveryTierAtLeastTheSeedsTenAtMostTheRowsOwn) {
  Row row = TestRow();
  EXPECT_EQ(BaselineRequests(row), kSeedBaselineRequests);  // no gate
  row.slo = {SloGate{SloMetric::kTtft, 50, 900}};
  EXPECT_EQ(BaselineRequests(row), 10);
  row.slo.push_back(SloGate{SloMetric::kItl, 90, 50});
  EXPECT_EQ(BaselineRequests(row), 10);
  row.slo_tiers = {SloTier{"strict", {SloGate{SloMetric::kTtft, 97.5, 800}}}};
  EXPECT_EQ(BaselineRequests(row), 40);
  row.slo_tiers[0].slo[0].percentile = 99;  // needs 100: the row's own 64 at C = 1
  EXPECT_EQ(BaselineRequests(row), 64);
}

TEST(BaselineRequests, RowsWhoseSharesOrReuseNeedTheSampleKeepIt) {
  Row row = TestRow();
  row.slo = {SloGate{SloMetric::kTtft, 95, 2500}};
  row.measured = {100, 4};
  EXPECT_EQ(BaselineRequests(row), 20);
  Row mixed = row;
  mixed.mix = Mix{};
  EXPECT_EQ(BaselineRequests(mixed), 100);
  Row prefix = row;
  prefix.prefix = PrefixReuse{};
  EXPECT_EQ(BaselineRequests(prefix), 100);
  Row sessions = row;
  sessions.sessions = Sessions{};
  EXPECT_EQ(BaselineRequests(sessions), 100);
}

TEST(MakeTrialPlan, BodiesCarryEverySamplingParameter) {
  Row row = TestRow();
  row.workload.sampling.top_p = 0.9;
  auto plan = MakeTrialPlan(row, Inputs(1, 3));
  ASSERT_TRUE(plan.ok());
  auto body = nlohmann::json::parse(plan->measured[0].body);
  EXPECT_EQ(body["model"], "Model-X");
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["temperature"], 0.0);
  EXPECT_EQ(body["top_p"], 0.9);
  EXPECT_EQ(body["max_tokens"], 16);
  EXPECT_EQ(body["max_completion_tokens"], 16);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["seed"], 303);
  EXPECT_EQ(body["messages"][0]["content"], plan->measured[0].prompt.text);
  EXPECT_FALSE(TestRow().workload.sampling.top_p.has_value());
  auto plain = nlohmann::json::parse(ChatRequestBody(TestRow(), "hi", 4, 1));
  EXPECT_FALSE(plain.contains("top_p"));
}

TEST(MakeTrialPlan, StddevDrawsVaryAndStayPositive) {
  Row row = TestRow();
  row.workload.output_stddev_tokens = 5;
  auto plan = MakeTrialPlan(row, Inputs(1, 1));
  ASSERT_TRUE(plan.ok());
  std::set<int64_t> lengths;
  for (const auto& r : plan->measured) {
    EXPECT_GE(r.max_tokens, 1);
    lengths.insert(r.max_tokens);
  }
  EXPECT_GT(lengths.size(), 3u);
}

TEST(PlanJson, RoundTrips) {
  Row row = TestRow();
  auto plan = MakeTrialPlan(row, Inputs(2, 2, QualifyPhase::kProbe));
  ASSERT_TRUE(plan.ok());
  auto back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seed, plan->seed);
  EXPECT_EQ(back->phase, QualifyPhase::kProbe);
  ASSERT_EQ(back->measured.size(), plan->measured.size());
  EXPECT_EQ(back->measured[5].body, plan->measured[5].body);
  EXPECT_EQ(back->warmup[1].prompt.sha256, plan->warmup[1].prompt.sha256);
  nlohmann::json bad = PlanToJson(*plan);
  bad.erase("seed");
  EXPECT_FALSE(PlanFromJson(bad).ok());
}

}  // namespace
}  // namespace capq

namespace capq {
namespace {

// A tokenizer whose first token of a word is its first letter: many distinct lead words collide.
TEST(MakeTrialPlan, NoTwoPromptsOfATrialStartWithTheSameServerToken) {
  Row row = TestRow();
  FirstTokenFn first_letter = [](const std::string& lead) -> Result<int64_t> {
    return static_cast<int64_t>(std::tolower(static_cast<unsigned char>(lead[0])));
  };
  PlanInputs in;
  in.level = 1;
  in.first_token = &first_letter;
  row.warmup.requests = 2;
  row.measured.min_requests = 18;
  Result<TrialPlan> plan = MakeTrialPlan(row, in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::set<char> firsts;
  std::set<int> indices;
  for (const auto* list : {&plan->warmup, &plan->measured}) {
    for (const auto& r : *list) {
      EXPECT_TRUE(firsts.insert(std::tolower(r.prompt.text[0])).second) << r.prompt.text;
      EXPECT_TRUE(indices.insert(r.prompt.generator_index).second);
    }
  }
  EXPECT_EQ(firsts.size(), 20u);
  EXPECT_FALSE(plan->skipped_leads.empty());
  // A reworded prompt keeps its generator index, so it keeps its lead word.
  PlanRequest r = plan->measured.back();
  RewordRequest(row, *plan, 3, 3, &r);
  EXPECT_EQ(r.prompt.lead_word, plan->measured.back().prompt.lead_word);
  EXPECT_EQ(r.prompt.text.substr(0, r.prompt.lead_word.size()), r.prompt.lead_word);
  // 26 letters cannot give 30 prompts a first token each: refused, never silently shared.
  row.measured.min_requests = 28;
  Result<TrialPlan> too_many = MakeTrialPlan(row, in);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("a first token of their own"), std::string::npos);
}

}  // namespace
}  // namespace capq

namespace capq {
namespace {

// TestRow's shape, open loop: Poisson at 0.5 requests/s per level, 60 s measured after a 10 s ramp.
Row RateRow() {
  Row row;
  row.id = "rate_plan_row";
  row.identity.engine = Engine::kSim;
  row.identity.served_model_name = "Model-X";
  row.workload.input_tokens = 40;
  row.workload.output_tokens = 16;
  row.workload.arrival_kind = ArrivalKind::kPoisson;
  row.workload.open_loop.rate_step_rps = 0.5;
  row.workload.open_loop.cv = 1;
  row.workload.open_loop.duration_s = 60;
  row.workload.open_loop.ramp_s = 10;
  row.warmup = {4, 1};
  row.trials.seeds = {101, 202, 303};
  return row;
}

TEST(RatePlan, RampFirstThenMeasuredWithParallelOffsets) {
  const Row row = RateRow();
  Result<TrialPlan> plan = MakeTrialPlan(row, Inputs(4, 1));  // level 4: 2 requests/s
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->arrival, ArrivalKind::kPoisson);
  EXPECT_TRUE(plan->open_loop());
  EXPECT_EQ(plan->level, 4);
  EXPECT_EQ(plan->rate_rps, 2.0);
  EXPECT_EQ(plan->arrival_cv, 1.0);
  EXPECT_EQ(plan->schedule_seed, ScheduleSeed(101, QualifyPhase::kConfirm, 4));
  EXPECT_NE(plan->schedule_seed, plan->corpus_seed);
  EXPECT_EQ(plan->warmup.size(), 4u);
  EXPECT_EQ(plan->warmup_concurrency, 1);

  const size_t n = plan->measured.size();
  ASSERT_EQ(plan->send_offsets_ns.size(), n);
  EXPECT_TRUE(std::is_sorted(plan->send_offsets_ns.begin(), plan->send_offsets_ns.end()));
  // About 20 ramp requests (10 s at 2/s) and 120 measured (60 s at 2/s).
  EXPECT_GT(plan->ramp_requests, 5);
  EXPECT_LT(plan->ramp_requests, 40);
  EXPECT_EQ(plan->expected_measured, static_cast<int>(n) - plan->ramp_requests);
  EXPECT_GT(plan->expected_measured, 80);
  EXPECT_LT(plan->expected_measured, 170);
  EXPECT_EQ(plan->measured_start_ns, 10'000'000'000);
  EXPECT_EQ(plan->measured_end_ns, 70'000'000'000);

  std::set<std::string> ids;
  for (size_t i = 0; i < n; ++i) {
    const PlanRequest& r = plan->measured[i];
    const bool ramp = static_cast<int>(i) < plan->ramp_requests;
    SCOPED_TRACE(r.id);
    EXPECT_EQ(r.ramp, ramp);
    EXPECT_FALSE(r.warmup);
    EXPECT_EQ(r.index, static_cast<int>(i));
    EXPECT_EQ(r.id, ramp ? "r" + std::to_string(i) : "m" + std::to_string(i - plan->ramp_requests));
    EXPECT_TRUE(ids.insert(r.id).second);
    if (ramp) {
      EXPECT_LT(plan->send_offsets_ns[i], plan->measured_start_ns);
    } else {
      EXPECT_GE(plan->send_offsets_ns[i], plan->measured_start_ns);
      EXPECT_LT(plan->send_offsets_ns[i], plan->measured_end_ns);
    }
  }
  // The schedule is the row's at this rate and seed, cut at the end of the measured interval.
  EXPECT_EQ(plan->send_offsets_ns,
            ArrivalOffsetsForDurationNs(ArrivalKind::kPoisson, 2.0, 1, 70, plan->schedule_seed));

  // Every prompt is unique, and the ramp's and the measured ones are disjoint from the warm-ups.
  std::set<std::string> warm, sent;
  for (const auto& r : plan->warmup) warm.insert(r.prompt.sha256);
  for (const auto& r : plan->measured) {
    EXPECT_TRUE(sent.insert(r.prompt.sha256).second);
    EXPECT_EQ(warm.count(r.prompt.sha256), 0u);
    EXPECT_EQ(nlohmann::json::parse(r.body)["messages"][0]["content"], r.prompt.text);
  }
}

TEST(RatePlan, ARequestsRowMeasuresExactlyThatManyAfterTheRamp) {
  Row row = RateRow();
  row.workload.open_loop.duration_s.reset();
  row.workload.open_loop.requests = 150;
  Result<TrialPlan> plan = MakeTrialPlan(row, Inputs(6, 2));  // 3 requests/s
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->rate_rps, 3.0);
  EXPECT_EQ(plan->expected_measured, 150);
  EXPECT_EQ(static_cast<int>(plan->measured.size()), plan->ramp_requests + 150);
  EXPECT_EQ(plan->send_offsets_ns.size(), plan->measured.size());
  const int64_t ramp_ns = 10'000'000'000;
  const auto& at = plan->send_offsets_ns;
  const int before =
      static_cast<int>(std::count_if(at.begin(), at.end(), [&](int64_t v) { return v < ramp_ns; }));
  EXPECT_EQ(before, plan->ramp_requests);  // the ramp is every request scheduled before ramp_s
  EXPECT_GT(plan->ramp_requests, 10);
  EXPECT_EQ(plan->measured.back().id, "m149");
  EXPECT_EQ(plan->measured_start_ns, ramp_ns);
  EXPECT_EQ(plan->measured_end_ns, at.back() + 1);

  // No ramp: the first scheduled request is measured.
  row.workload.open_loop.ramp_s = 0;
  Result<TrialPlan> bare = MakeTrialPlan(row, Inputs(6, 2));
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->ramp_requests, 0);
  EXPECT_EQ(bare->measured.size(), 150u);
  EXPECT_EQ(bare->measured.front().id, "m0");
  EXPECT_FALSE(bare->measured.front().ramp);
}

TEST(RatePlan, ConstantArrivalIsEvenlySpacedFromZero) {
  Row row = RateRow();
  row.workload.arrival_kind = ArrivalKind::kConstant;
  row.workload.open_loop.cv = 0;
  row.workload.open_loop.duration_s = 30;
  row.workload.open_loop.ramp_s = 5;
  Result<TrialPlan> plan = MakeTrialPlan(row, Inputs(2, 1));  // 1 request/s
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->ramp_requests, 5);       // 0, 1, 2, 3, 4 s
  EXPECT_EQ(plan->expected_measured, 30);  // 5 .. 34 s
  EXPECT_EQ(plan->send_offsets_ns.front(), 0);
  EXPECT_EQ(plan->send_offsets_ns[5], 5'000'000'000);
  EXPECT_EQ(plan->send_offsets_ns.back(), 34'000'000'000);
}

TEST(RatePlan, SchedulesDifferAcrossTrialsLevelsAndPhasesButRepeatExactly) {
  const Row row = RateRow();
  auto offsets = [&](int level, int trial, QualifyPhase phase) {
    Result<TrialPlan> p = MakeTrialPlan(row, Inputs(level, trial, phase));
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? p->send_offsets_ns : std::vector<int64_t>{};
  };
  const auto base = offsets(4, 1, QualifyPhase::kConfirm);
  EXPECT_EQ(base, offsets(4, 1, QualifyPhase::kConfirm));
  EXPECT_NE(base, offsets(4, 2, QualifyPhase::kConfirm));
  EXPECT_NE(base, offsets(4, 1, QualifyPhase::kProbe));
  // At another level the schedule is not merely rescaled: its seed differs too.
  const auto other = offsets(8, 1, QualifyPhase::kConfirm);
  ASSERT_GE(other.size(), 2u);
  EXPECT_NE(other[0] * 2, base[0]);
}

TEST(RatePlan, AScheduleTooLargeForOneTrialIsRefused) {
  Row row = RateRow();
  row.workload.open_loop.duration_s = 3600;
  Result<TrialPlan> plan = MakeTrialPlan(row, Inputs(1000, 1));  // 500/s for an hour
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("more than 1000000"), std::string::npos)
      << plan.status().message();
}

TEST(RatePlan, JsonRoundTripKeepsTheSchedule) {
  const Row row = RateRow();
  Result<TrialPlan> plan = MakeTrialPlan(row, Inputs(4, 3, QualifyPhase::kProbe));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const nlohmann::json j = PlanToJson(*plan);
  EXPECT_EQ(j["schema"], kPlanSchema);
  EXPECT_EQ(j["arrival"]["kind"], "poisson");
  EXPECT_EQ(j["measured"][0]["ramp"], true);
  EXPECT_EQ(j["measured"][0]["send_offset_ns"], plan->send_offsets_ns[0]);
  Result<TrialPlan> back = PlanFromJson(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->arrival, plan->arrival);
  EXPECT_EQ(back->rate_rps, plan->rate_rps);
  EXPECT_EQ(back->arrival_cv, plan->arrival_cv);
  EXPECT_EQ(back->schedule_seed, plan->schedule_seed);
  EXPECT_EQ(back->ramp_requests, plan->ramp_requests);
  EXPECT_EQ(back->expected_measured, plan->expected_measured);
  EXPECT_EQ(back->measured_start_ns, plan->measured_start_ns);
  EXPECT_EQ(back->measured_end_ns, plan->measured_end_ns);
  EXPECT_EQ(back->send_offsets_ns, plan->send_offsets_ns);
  ASSERT_EQ(back->measured.size(), plan->measured.size());
  for (size_t i = 0; i < plan->measured.size(); ++i) {
    EXPECT_EQ(back->measured[i].id, plan->measured[i].id);
    EXPECT_EQ(back->measured[i].ramp, plan->measured[i].ramp);
    EXPECT_EQ(back->measured[i].index, plan->measured[i].index);
    EXPECT_EQ(back->measured[i].body, plan->measured[i].body);
  }
  EXPECT_EQ(PlanToJson(*back), j);

  // A plan whose ramp is out of place or whose schedule runs backwards is refused.
  nlohmann::json moved = j;
  moved["measured"][0]["ramp"] = false;
  EXPECT_FALSE(PlanFromJson(moved).ok());
  nlohmann::json backwards = j;
  backwards["measured"][2]["send_offset_ns"] = -1;
  EXPECT_FALSE(PlanFromJson(backwards).ok());
  nlohmann::json missing = j;
  missing["measured"][1].erase("send_offset_ns");
  EXPECT_FALSE(PlanFromJson(missing).ok());
}

TEST(RatePlan, ClosedLoopPlansAreUnchanged) {
  const Row row = TestRow();
  Result<TrialPlan> plan = MakeTrialPlan(row, Inputs(20, 1));
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->arrival, ArrivalKind::kClosedLoop);
  EXPECT_FALSE(plan->open_loop());
  EXPECT_TRUE(plan->send_offsets_ns.empty());
  EXPECT_EQ(plan->ramp_requests, 0);
  EXPECT_EQ(plan->rate_rps, 0);
  EXPECT_EQ(plan->schedule_seed, 0u);
  EXPECT_EQ(plan->expected_measured, 80);
  for (const auto& r : plan->measured) EXPECT_FALSE(r.ramp);
  // plan.json has exactly the keys it always had, and such a file loads as closed loop.
  const nlohmann::json j = PlanToJson(*plan);
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys,
            (std::set<std::string>{"schema", "row_id", "engine", "concurrency", "trial", "seed",
                                   "phase", "corpus", "calibration", "calibration_note",
                                   "warmup_concurrency", "expected_measured", "first_token_check",
                                   "skipped_leads", "warmup", "measured"}));
  std::set<std::string> request_keys;
  for (const auto& [k, v] : j["measured"][0].items()) request_keys.insert(k);
  EXPECT_EQ(request_keys, (std::set<std::string>{"id", "index", "max_tokens", "prompt", "body"}));
  Result<TrialPlan> back = PlanFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->arrival, ArrivalKind::kClosedLoop);
  EXPECT_TRUE(back->send_offsets_ns.empty());
  EXPECT_EQ(PlanToJson(*back), j);
}

}  // namespace
}  // namespace capq

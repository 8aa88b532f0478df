#include "capq/model/plan.h"

#include <gtest/gtest.h>

#include <cctype>
#include <set>

namespace capq {
namespace {

PlanInputs Inputs(int concurrency, int trial, std::string phase = "confirm") {
  PlanInputs in;
  in.concurrency = concurrency;
  in.trial_index = trial;
  in.phase = std::move(phase);
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
  auto plan = MakeTrialPlan(row, Inputs(2, 2, "probe"));
  ASSERT_TRUE(plan.ok());
  auto back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seed, plan->seed);
  EXPECT_EQ(back->phase, "probe");
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
  in.concurrency = 1;
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

// The simulated engine against hand-computed schedules (engine.h states the semantics): step
// times, admission, queueing and the schedule policies.
#include "capq/engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "engine_test_util.h"

namespace capq::engine {
namespace {

using namespace capq::engine::testing;  // NOLINT

TEST(EngineTest, SingleUserTtftEqualsPrefillFormula) {
  EngineProfile p = TestProfile();
  p.b2_s_per_chunk_token_sq = 1e-9;
  p.overhead_s = 0.0005;
  Driver d(p);
  const VirtNs t0 = 7 * kMs;
  d.Submit(1, Prompt(1000, 1), 4, t0);
  const VirtNs first = d.RunUntil(1, Kind::kTokens);
  // Budget 256: chunks 256, 256, 256, 232. Each step = b0 + overhead + b1*c + b2*c^2.
  auto step_ns = [&](double c) {
    return std::llround((0.001 + 0.0005 + 1e-6 * c + 1e-9 * c * c) * 1e9);
  };
  EXPECT_EQ(first - t0, 3 * step_ns(256) + step_ns(232));
  EXPECT_EQ(d.engine().stats().steps, 4);
  const EngineEvent* tok = d.First(1, Kind::kTokens);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->tokens, 1);
  EXPECT_EQ(tok->total_tokens, 1);
  const EngineEvent* adm = d.First(1, Kind::kAdmitted);
  ASSERT_NE(adm, nullptr);
  EXPECT_EQ(adm->t, t0);
  EXPECT_EQ(adm->cached_tokens, 0);
}

TEST(EngineTest, LongPromptTakesCeilLengthOverBudgetSteps) {
  for (int64_t len : {1, 255, 256, 257, 5000, 10000}) {
    EngineProfile p = TestProfile();
    p.chunked_prefill_size = 512;
    Driver d(p);
    d.Submit(1, Prompt(len, 2), 1, 0);
    d.RunUntil(1, Kind::kTokens);
    EXPECT_EQ(d.engine().stats().steps, (len + 511) / 512) << "prompt " << len;
  }
}

TEST(EngineTest, DecodeStepsAndFinishLength) {
  Driver d(TestProfile());
  d.Submit(1, Prompt(100, 3), 5, 0);
  d.RunUntilIdle();
  auto toks = d.TokensOf(1);
  ASSERT_EQ(toks.size(), 5u);
  // Prefill 1 ms + 100 us; each decode step 1 ms + 100 us for one row.
  EXPECT_EQ(toks[0].t, 1'100'000);
  for (size_t i = 1; i < toks.size(); ++i) EXPECT_EQ(toks[i].t - toks[i - 1].t, 1'100'000);
  const EngineEvent* fin = d.First(1, Kind::kFinished);
  ASSERT_NE(fin, nullptr);
  EXPECT_STREQ(fin->finish_reason, "length");
  EXPECT_EQ(fin->total_tokens, 5);
  EXPECT_EQ(fin->t, toks.back().t);
  EXPECT_TRUE(d.engine().Idle());
  EXPECT_EQ(d.engine().stats().generated_tokens_total, 5);
}

TEST(EngineTest, EosFinishesWithStop) {
  Driver d(TestProfile());
  d.Submit(1, Prompt(10, 4), 50, 0, /*eos_at=*/7);
  d.Submit(2, Prompt(10, 5), 5, 0, /*eos_at=*/9);  // EOS beyond max_tokens: length wins
  d.RunUntilIdle();
  ASSERT_NE(d.First(1, Kind::kFinished), nullptr);
  EXPECT_STREQ(d.First(1, Kind::kFinished)->finish_reason, "stop");
  EXPECT_EQ(d.First(1, Kind::kFinished)->total_tokens, 7);
  EXPECT_STREQ(d.First(2, Kind::kFinished)->finish_reason, "length");
  EXPECT_EQ(d.First(2, Kind::kFinished)->total_tokens, 5);
}

TEST(EngineTest, BurstAtOneInstantSharesTheFirstStep) {
  Driver d(TestProfile());
  for (uint64_t id = 1; id <= 3; ++id) d.Submit(id, Prompt(50, 10 + id), 2, 0);
  d.AdvanceTo(0);
  for (uint64_t id = 1; id <= 3; ++id) EXPECT_EQ(d.Find(id, Kind::kAdmitted), 0);
  // One step prefills all three (150 tokens <= 256 budget): 1 ms + 150 us.
  for (uint64_t id = 1; id <= 3; ++id) EXPECT_EQ(d.RunUntil(id, Kind::kTokens), 1'150'000);
}

TEST(EngineTest, QueueingStartsAboveTheRunningLimit) {
  EngineProfile p = TestProfile();
  p.max_running_requests = 2;
  Driver d(p);
  for (uint64_t id = 1; id <= 3; ++id) d.Submit(id, Prompt(100, 20 + id), 3, 0);
  d.AdvanceTo(0);
  EXPECT_EQ(d.engine().stats().running, 2);
  EXPECT_EQ(d.engine().stats().waiting, 1);
  EXPECT_FALSE(d.Find(3, Kind::kAdmitted).has_value());
  d.RunUntilIdle();
  // Request 3 is admitted exactly when the first running request finishes.
  EXPECT_EQ(*d.Find(3, Kind::kAdmitted), *d.Find(1, Kind::kFinished));
  EXPECT_GT(*d.Find(3, Kind::kTokens), *d.Find(1, Kind::kFinished));

  // With the limit at 3 nobody waits.
  p.max_running_requests = 3;
  Driver d3(p);
  for (uint64_t id = 1; id <= 3; ++id) d3.Submit(id, Prompt(100, 20 + id), 3, 0);
  d3.AdvanceTo(0);
  EXPECT_EQ(d3.engine().stats().waiting, 0);
}

TEST(EngineTest, QueueingStartsWhenThePoolIsFull) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 4096;
  p.page_size = 64;
  p.prefix_cache = false;
  Driver d(p);
  // Each request reserves pages(1000 + 100) = 1152 tokens: three fit in 4096, a fourth does not.
  for (uint64_t id = 1; id <= 5; ++id) d.Submit(id, Prompt(1000, 30 + id), 100, 0);
  d.AdvanceTo(0);
  EngineStats st = d.engine().stats();
  EXPECT_EQ(st.running, 3);
  EXPECT_EQ(st.waiting, 2);
  EXPECT_EQ(st.pool_used_tokens, 3 * 1152);
  d.RunUntilIdle();
  EXPECT_EQ(*d.Find(4, Kind::kAdmitted), *d.Find(1, Kind::kFinished));
  EXPECT_EQ(d.engine().stats().pool_used_tokens, 0);
}

TEST(EngineTest, AdmissionIsFcfsWithoutOvertaking) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 2048;
  p.page_size = 64;
  p.prefix_cache = false;
  Driver d(p);
  d.Submit(1, Prompt(1000, 40), 24, 0);  // 1024
  d.Submit(2, Prompt(1500, 41), 12, 0);  // 1536: does not fit beside 1
  d.Submit(3, Prompt(10, 42), 10, 0);    // small, would fit, but must not overtake 2
  d.AdvanceTo(0);
  EXPECT_TRUE(d.Find(1, Kind::kAdmitted).has_value());
  EXPECT_FALSE(d.Find(2, Kind::kAdmitted).has_value());
  EXPECT_FALSE(d.Find(3, Kind::kAdmitted).has_value());
  d.RunUntilIdle();
  EXPECT_LE(*d.Find(2, Kind::kAdmitted), *d.Find(3, Kind::kAdmitted));
}

TEST(EngineTest, DecodeSlowsAsRowsAreAdded) {
  EngineProfile p = TestProfile();
  p.b4_s_per_decode_kv_token = 1e-8;
  auto spacing_with_rows = [&](int rows) {
    Driver d(p);
    for (int i = 0; i < rows; ++i) d.Submit(100 + i, Prompt(100, 50 + i), 20, 0);
    d.RunUntilIdle();
    auto toks = d.TokensOf(100);
    return toks[10].t - toks[9].t;
  };
  const VirtNs one = spacing_with_rows(1);
  const VirtNs four = spacing_with_rows(4);
  // One row: b0 + b3 + b4 * (100 prompt + 10 generated) tokens of context.
  EXPECT_EQ(one, std::llround((0.001 + 1e-4 + 1e-8 * 110) * 1e9));
  EXPECT_EQ(four, std::llround((0.001 + 4e-4 + 1e-8 * 4 * 110) * 1e9));
  EXPECT_GT(four, one);
}

// A decoding request A, then B arrives: prefill-first stalls A during B's prefill, decode-first
// keeps A emitting every step and spends only the rest of the budget on B.
TEST(EngineTest, PrefillFirstStallsDecodeDecodeFirstDoesNot) {
  auto run = [](SchedulePolicy policy, bool mixed) {
    EngineProfile p = TestProfile();
    p.policy = policy;
    p.mixed_chunks = mixed;
    p.chunked_prefill_size = 100;
    auto d = std::make_unique<Driver>(p);
    d->Submit(1, Prompt(10, 60), 100, 0);
    d->RunUntil(1, Kind::kTokens);
    d->AdvanceTo(d->now() + 3 * kMs);
    d->Submit(2, Prompt(1000, 61), 5, d->now());
    d->RunUntil(2, Kind::kTokens);
    return d;
  };
  {
    auto d = run(SchedulePolicy::kPrefillFirst, false);
    const VirtNs b_admit = *d->Find(2, Kind::kAdmitted), b_first = *d->Find(2, Kind::kTokens);
    int a_tokens_during = 0;
    for (const auto& e : d->TokensOf(1)) a_tokens_during += (e.t > b_admit && e.t < b_first);
    EXPECT_EQ(a_tokens_during, 0);
    // B's prefill: 10 steps of 100 tokens each, 1 ms + 100 us.
    EXPECT_EQ(b_first - b_admit, 10 * 1'100'000);
  }
  {
    auto d = run(SchedulePolicy::kDecodeFirst, false);
    const VirtNs b_admit = *d->Find(2, Kind::kAdmitted), b_first = *d->Find(2, Kind::kTokens);
    int a_tokens_during = 0;
    for (const auto& e : d->TokensOf(1)) a_tokens_during += (e.t > b_admit && e.t <= b_first);
    // Budget 100 - 1 decode row = 99 per step: ceil(1000 / 99) = 11 steps, A decodes in each.
    EXPECT_EQ(a_tokens_during, 11);
    EXPECT_EQ(b_first - b_admit, 10 * std::llround((0.001 + 99e-6 + 1e-4) * 1e9) +
                                     std::llround((0.001 + 10e-6 + 1e-4) * 1e9));
  }
  {
    auto d = run(SchedulePolicy::kPrefillFirst, true);  // mixed chunks: A rides along
    const VirtNs b_admit = *d->Find(2, Kind::kAdmitted), b_first = *d->Find(2, Kind::kTokens);
    int a_tokens_during = 0;
    for (const auto& e : d->TokensOf(1)) a_tokens_during += (e.t > b_admit && e.t <= b_first);
    EXPECT_EQ(a_tokens_during, 11);
  }
}

TEST(EngineTest, SpeculativeDecodingEmitsSeveralTokensPerStepWithTheConfiguredMean) {
  EngineProfile p = TestProfile();
  p.spec_draft_tokens = 7;
  p.spec_accept_mean = 2.5;
  Driver d(p);
  const int64_t max_new = 400'000;
  d.Submit(1, Prompt(64, 70), max_new, 0);
  d.Submit(2, Prompt(64, 71), max_new, 0);
  d.RunUntilIdle();
  std::set<std::pair<uint64_t, VirtNs>> seen;
  int64_t decode_steps = 0, decode_tokens = 0, max_chunk = 0, multi = 0;
  for (const auto& e : d.events()) {
    if (e.kind != Kind::kTokens) continue;
    EXPECT_TRUE(seen.insert({e.request_id, e.t}).second) << "two chunks for one row in one step";
    if (e.total_tokens == 1) continue;        // the prefill step's single first token
    if (e.total_tokens == max_new) continue;  // possibly truncated at max_tokens
    ++decode_steps;
    decode_tokens += e.tokens;
    max_chunk = std::max(max_chunk, e.tokens);
    multi += e.tokens > 1;
  }
  EXPECT_LE(max_chunk, 8);
  EXPECT_EQ(max_chunk, 8);
  EXPECT_GT(multi, decode_steps / 2);
  const double mean_accepted = static_cast<double>(decode_tokens) / decode_steps - 1;
  EXPECT_NEAR(mean_accepted, 2.5, 0.03) << decode_steps << " steps";
  EXPECT_EQ(d.First(1, Kind::kFinished)->total_tokens, max_new);
}

}  // namespace
}  // namespace capq::engine

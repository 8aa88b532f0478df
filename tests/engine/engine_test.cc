// The simulated engine against hand-computed schedules (engine.h states the semantics).
#include "capq/engine/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

namespace capq::engine {
namespace {

using Kind = EngineEvent::Kind;
constexpr VirtNs kMs = 1'000'000;

// Round numbers so every step time is an exact integer of nanoseconds.
EngineProfile TestProfile() {
  EngineProfile p;
  p.name = "test";
  p.max_total_tokens = 1 << 20;
  p.page_size = 16;
  p.max_running_requests = 8;
  p.chunked_prefill_size = 256;
  p.context_length = 1 << 20;
  p.policy = SchedulePolicy::kPrefillFirst;
  p.mixed_chunks = false;
  p.prefix_cache = true;
  p.b0_s = 0.001;                   // 1 ms per step
  p.b1_s_per_prefill_token = 1e-6;  // 1 us per prefill token
  p.b2_s_per_chunk_token_sq = 0;
  p.b3_s_per_decode_row = 1e-4;  // 100 us per decode row
  p.b4_s_per_decode_kv_token = 0;
  p.overhead_s = 0;
  return p;
}

std::vector<uint32_t> Prompt(int64_t len, uint32_t salt) {
  std::vector<uint32_t> t(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i)
    t[static_cast<size_t>(i)] = salt * 1000003u + static_cast<uint32_t>(i);
  return t;
}

// Drives an engine the way the server does: advance, then submit.
class Driver {
 public:
  explicit Driver(const EngineProfile& p) : engine_(p) {}

  void Submit(uint64_t id, std::vector<uint32_t> prompt, int64_t max_new, VirtNs at,
              int64_t eos_at = -1) {
    AdvanceTo(at);
    EngineRequest r;
    r.id = id;
    r.prompt_tokens = std::move(prompt);
    r.max_new_tokens = max_new;
    r.eos_at_tokens = eos_at;
    engine_.Submit(std::move(r), at);
  }
  void AdvanceTo(VirtNs t) {
    ASSERT_GE(t, now_);
    now_ = t;
    engine_.AdvanceTo(t, &events_);
  }
  void RunUntilIdle() {
    while (auto next = engine_.NextEventTime()) AdvanceTo(*next);
    AdvanceTo(now_);
  }
  // Runs steps until request `id` has an event of `kind`; returns its time.
  VirtNs RunUntil(uint64_t id, Kind kind) {
    for (;;) {
      if (auto t = Find(id, kind)) return *t;
      auto next = engine_.NextEventTime();
      if (!next) return -1;
      AdvanceTo(*next);
    }
  }
  std::optional<VirtNs> Find(uint64_t id, Kind kind) const {
    for (const auto& e : events_) {
      if (e.request_id == id && e.kind == kind) return e.t;
    }
    return std::nullopt;
  }
  const EngineEvent* First(uint64_t id, Kind kind) const {
    for (const auto& e : events_) {
      if (e.request_id == id && e.kind == kind) return &e;
    }
    return nullptr;
  }
  std::vector<EngineEvent> TokensOf(uint64_t id) const {
    std::vector<EngineEvent> out;
    for (const auto& e : events_) {
      if (e.request_id == id && e.kind == Kind::kTokens) out.push_back(e);
    }
    return out;
  }
  Engine& engine() { return engine_; }
  const std::vector<EngineEvent>& events() const { return events_; }
  VirtNs now() const { return now_; }

 private:
  Engine engine_;
  std::vector<EngineEvent> events_;
  VirtNs now_ = 0;
};

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

TEST(EngineTest, PrefixCacheHitShortensPrefillAndReportsCachedTokens) {
  Driver d(TestProfile());
  std::vector<uint32_t> a = Prompt(1000, 80);
  d.Submit(1, a, 2, 0);
  d.RunUntilIdle();
  EXPECT_EQ(d.engine().stats().cache_tokens, 1000 + 2 - 1);  // prompt + output - 1

  // Shares the first 800 tokens with A, then differs.
  std::vector<uint32_t> b = a;
  for (size_t i = 800; i < b.size(); ++i) b[i] += 7;
  const VirtNs tb = d.now() + kMs;
  d.Submit(2, b, 2, tb);
  const VirtNs b_first = d.RunUntil(2, Kind::kTokens);
  EXPECT_EQ(d.First(2, Kind::kAdmitted)->cached_tokens, 800);
  // 200 uncached tokens in one 256 budget step: 1 ms + 200 us.
  EXPECT_EQ(b_first - tb, 1'200'000);
  d.RunUntilIdle();

  // An identical prompt still computes its last token.
  const VirtNs ta = d.now() + kMs;
  d.Submit(3, a, 2, ta);
  EXPECT_EQ(d.RunUntil(3, Kind::kTokens) - ta, 1'001'000);
  EXPECT_EQ(d.First(3, Kind::kAdmitted)->cached_tokens, 999);
  d.RunUntilIdle();
  EXPECT_EQ(d.engine().stats().cached_tokens_total, 800 + 999);
  EXPECT_EQ(d.engine().stats().prompt_tokens_total, 3000);

  // Cache disabled: never a hit.
  EngineProfile off = TestProfile();
  off.prefix_cache = false;
  Driver d2(off);
  d2.Submit(1, a, 2, 0);
  d2.RunUntilIdle();
  d2.Submit(2, a, 2, d2.now());
  d2.RunUntilIdle();
  EXPECT_EQ(d2.First(2, Kind::kAdmitted)->cached_tokens, 0);
}

TEST(EngineTest, FlushIsRefusedWhileBusyAndEmptiesTheCacheWhenIdle) {
  Driver d(TestProfile());
  std::vector<uint32_t> a = Prompt(300, 90);
  d.Submit(1, a, 3, 0);
  EXPECT_FALSE(d.engine().Idle());
  EXPECT_FALSE(d.engine().FlushCache());
  d.RunUntilIdle();
  EXPECT_TRUE(d.engine().Idle());
  EXPECT_EQ(d.engine().stats().cache_tokens, 300 + 3 - 1);
  // The refused flush changed nothing: a resubmission hits.
  d.Submit(2, a, 3, d.now());
  d.AdvanceTo(d.now());
  EXPECT_EQ(d.First(2, Kind::kAdmitted)->cached_tokens, 299);
  d.RunUntilIdle();
  EXPECT_TRUE(d.engine().FlushCache());
  EXPECT_EQ(d.engine().stats().cache_tokens, 0);
  d.Submit(3, a, 3, d.now());
  d.AdvanceTo(d.now());
  EXPECT_EQ(d.First(3, Kind::kAdmitted)->cached_tokens, 0);
}

TEST(EngineTest, CacheEvictsToAdmitAndNeverBlocksAdmission) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 2048;
  p.page_size = 64;
  Driver d(p);
  d.Submit(1, Prompt(1500, 95), 10, 0);
  d.RunUntilIdle();
  EXPECT_EQ(d.engine().stats().cache_tokens, 1500 + 10 - 1);
  // Needs pages(1900 + 10) = 1920: only fits if A's cached prompt is evicted.
  d.Submit(2, Prompt(1900, 96), 10, d.now());
  d.AdvanceTo(d.now());
  ASSERT_TRUE(d.Find(2, Kind::kAdmitted).has_value());
  EXPECT_LE(d.engine().stats().cache_tokens + 1920, 2048);
  d.RunUntilIdle();
  EXPECT_STREQ(d.First(2, Kind::kFinished)->finish_reason, "length");
}

// Output ids as a server streams them: a function of the prompt and the position.
std::function<uint32_t(int64_t)> OutputIds(uint32_t salt) {
  return [salt](int64_t i) { return 0x40000000u + salt * 7919u + static_cast<uint32_t>(i); };
}

// The next turn of a chat: the previous prompt, its whole output, then new words.
std::vector<uint32_t> NextTurn(const std::vector<uint32_t>& prompt, uint32_t salt, int64_t output,
                               int64_t new_words) {
  std::vector<uint32_t> next = prompt;
  const auto ids = OutputIds(salt);
  for (int64_t i = 0; i < output; ++i) next.push_back(ids(i));
  for (int64_t i = 0; i < new_words; ++i) next.push_back(0x70000000u + static_cast<uint32_t>(i));
  return next;
}

void SubmitWithOutput(Driver& d, uint64_t id, std::vector<uint32_t> prompt, int64_t max_new,
                      uint32_t salt, VirtNs at) {
  d.AdvanceTo(at);
  EngineRequest r;
  r.id = id;
  r.prompt_tokens = std::move(prompt);
  r.max_new_tokens = max_new;
  r.output_token = OutputIds(salt);
  d.engine().Submit(std::move(r), at);
}

// SGLang's cache_finished_req inserts prompt + output - 1 tokens: the next turn of a chat finds
// all of them.
TEST(EngineTest, FinishedRequestsCacheTheirOutputSoTheNextTurnHitsIt) {
  Driver d(TestProfile());
  const std::vector<uint32_t> p1 = Prompt(500, 60);
  SubmitWithOutput(d, 1, p1, 40, 1, 0);
  d.RunUntilIdle();
  EXPECT_EQ(d.engine().stats().cache_tokens, 500 + 40 - 1);
  const std::vector<uint32_t> p2 = NextTurn(p1, 1, 40, 30);
  SubmitWithOutput(d, 2, p2, 40, 2, d.now() + kMs);
  d.RunUntilIdle();
  EXPECT_EQ(d.First(2, Kind::kAdmitted)->cached_tokens, 500 + 40 - 1);
  // Turn 3 finds turn 2's prompt and output.
  const std::vector<uint32_t> p3 = NextTurn(p2, 2, 40, 30);
  SubmitWithOutput(d, 3, p3, 40, 3, d.now() + kMs);
  d.RunUntilIdle();
  EXPECT_EQ(d.First(3, Kind::kAdmitted)->cached_tokens, static_cast<int64_t>(p2.size()) + 40 - 1);

  // Output ids other than the ones the next prompt quotes: only the prompt is a hit.
  Driver other(TestProfile());
  SubmitWithOutput(other, 1, p1, 40, 9, 0);
  other.RunUntilIdle();
  SubmitWithOutput(other, 2, p2, 40, 2, other.now() + kMs);
  other.RunUntilIdle();
  EXPECT_EQ(other.First(2, Kind::kAdmitted)->cached_tokens, 500);

  // Prefix cache off: neither the history nor a repeated prompt is ever served from cache.
  EngineProfile off = TestProfile();
  off.prefix_cache = false;
  Driver cold(off);
  SubmitWithOutput(cold, 1, p1, 40, 1, 0);
  cold.RunUntilIdle();
  SubmitWithOutput(cold, 2, p2, 40, 2, cold.now() + kMs);
  SubmitWithOutput(cold, 3, p1, 40, 1, cold.now() + kMs);
  cold.RunUntilIdle();
  EXPECT_EQ(cold.First(2, Kind::kAdmitted)->cached_tokens, 0);
  EXPECT_EQ(cold.First(3, Kind::kAdmitted)->cached_tokens, 0);
  EXPECT_EQ(cold.engine().stats().cache_tokens, 0);
  EXPECT_EQ(cold.engine().stats().cached_tokens_total, 0);
}

// vLLM's prefix cache: whole blocks in, whole blocks out.
TEST(EngineTest, BlockGranularCacheHoldsAndServesWholeBlocksOnly) {
  EngineProfile p = TestProfile();
  p.cache_block_tokens = 16;
  Driver d(p);
  const std::vector<uint32_t> p1 = Prompt(100, 63);
  SubmitWithOutput(d, 1, p1, 10, 1, 0);
  d.RunUntilIdle();
  EXPECT_EQ(d.engine().stats().cache_tokens, (100 + 10 - 1) / 16 * 16);  // 96 of 109
  SubmitWithOutput(d, 2, p1, 10, 1, d.now() + kMs);
  d.RunUntilIdle();
  EXPECT_EQ(d.First(2, Kind::kAdmitted)->cached_tokens, 96);  // 99 matched, 6 blocks
  const std::vector<uint32_t> p2 = NextTurn(p1, 1, 10, 40);   // 150 tokens
  SubmitWithOutput(d, 3, p2, 10, 2, d.now() + kMs);
  d.RunUntilIdle();
  EXPECT_EQ(d.First(3, Kind::kAdmitted)->cached_tokens, 96);  // the cache holds 6 blocks
  // A prompt of one block: prompt - 1 leaves no whole block to serve.
  SubmitWithOutput(d, 4, Prompt(16, 64), 4, 4, d.now() + kMs);
  d.RunUntilIdle();
  SubmitWithOutput(d, 5, Prompt(16, 64), 4, 4, d.now() + kMs);
  d.RunUntilIdle();
  EXPECT_EQ(d.First(5, Kind::kAdmitted)->cached_tokens, 0);
}

// Cached output counts in the pool like cached prompts: when admissions need the room, a
// session's history is evicted (least recently used first) and its next turn goes cold.
TEST(EngineTest, CachedHistoryIsEvictedUnderPoolPressure) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 2048;
  p.page_size = 16;
  const std::vector<uint32_t> p1 = Prompt(700, 61);
  const std::vector<uint32_t> p2 = NextTurn(p1, 1, 100, 50);  // 850 tokens

  // No pressure: turn 2 hits turn 1's prompt + output - 1.
  Driver calm(p);
  SubmitWithOutput(calm, 1, p1, 100, 1, 0);
  calm.RunUntilIdle();
  EXPECT_EQ(calm.engine().stats().cache_tokens, 799);
  SubmitWithOutput(calm, 2, p2, 100, 2, calm.now() + kMs);
  calm.RunUntilIdle();
  EXPECT_EQ(calm.First(2, Kind::kAdmitted)->cached_tokens, 799);

  // Another request in between needs pages(1200 + 100) = 1312 tokens: with 799 cached the pool
  // (2048) has 1249 free, so the history's tail goes.
  Driver pressed(p);
  SubmitWithOutput(pressed, 1, p1, 100, 1, 0);
  pressed.RunUntilIdle();
  SubmitWithOutput(pressed, 10, Prompt(1200, 62), 100, 10, pressed.now() + kMs);
  pressed.RunUntilIdle();
  EXPECT_LE(pressed.engine().stats().cache_tokens, 2048);
  SubmitWithOutput(pressed, 2, p2, 100, 2, pressed.now() + kMs);
  pressed.RunUntilIdle();
  EXPECT_EQ(pressed.First(2, Kind::kAdmitted)->cached_tokens, 0);
}

TEST(EngineTest, CancelFreesThePoolAndSilencesTheRequest) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 2048;
  p.page_size = 64;
  p.prefix_cache = false;
  Driver d(p);
  d.Submit(1, Prompt(1000, 100), 1000, 0);  // 2048: the whole pool
  d.Submit(2, Prompt(100, 101), 10, 0);
  d.Submit(3, Prompt(100, 102), 10, 0);
  d.RunUntil(1, Kind::kTokens);
  d.AdvanceTo(d.now() + 5 * kMs + 1);
  EXPECT_EQ(d.engine().stats().waiting, 2);
  d.engine().Cancel(3, d.now());  // waiting: leaves the queue at once
  EXPECT_EQ(d.engine().stats().waiting, 1);
  const VirtNs cancel_t = d.now();
  d.engine().Cancel(1, cancel_t);
  const VirtNs boundary = *d.engine().NextEventTime();
  d.RunUntilIdle();
  for (const auto& e : d.events()) {
    if (e.request_id == 1) {
      EXPECT_LE(e.t, cancel_t);
    }
    EXPECT_NE(e.request_id, 3u);
  }
  EXPECT_EQ(*d.Find(2, Kind::kAdmitted), boundary);
  EXPECT_STREQ(d.First(2, Kind::kFinished)->finish_reason, "length");
  EXPECT_EQ(d.engine().stats().pool_used_tokens, 0);
  EXPECT_EQ(d.engine().stats().requests_cancelled, 2);
  EXPECT_TRUE(d.engine().Idle());
}

TEST(EngineTest, CancelAtStepStartReformsTheStep) {
  Driver d(TestProfile());
  d.Submit(1, Prompt(200, 110), 5, 0);
  d.Submit(2, Prompt(200, 111), 5, 0);
  d.engine().Cancel(1, 0);
  // Only request 2's 200 tokens are prefilled: 1 ms + 200 us.
  EXPECT_EQ(d.RunUntil(2, Kind::kTokens), 1'200'000);
  d.RunUntilIdle();
  EXPECT_FALSE(d.Find(1, Kind::kTokens).has_value());
}

TEST(EngineTest, RejectsRequestsThatCanNeverFit) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 4096;
  p.page_size = 64;
  p.context_length = 3000;
  Driver d(p);
  d.Submit(1, Prompt(2990, 120), 20, 0);  // over the context length
  p.context_length = 100000;
  Driver d2(p);
  d2.Submit(1, Prompt(4000, 121), 97, 0);  // pages(4097) = 4160 > pool
  d2.Submit(2, Prompt(4000, 122), 96, 0);  // exactly 4096: fits
  d2.Submit(3, {}, 10, 0);
  d2.Submit(4, Prompt(10, 123), 0, 0);
  d.RunUntilIdle();
  d2.RunUntilIdle();
  ASSERT_NE(d.First(1, Kind::kRejected), nullptr);
  EXPECT_STREQ(d.First(1, Kind::kRejected)->finish_reason, "too_long");
  ASSERT_NE(d2.First(1, Kind::kRejected), nullptr);
  EXPECT_STREQ(d2.First(1, Kind::kRejected)->finish_reason, "too_long");
  EXPECT_EQ(d2.First(2, Kind::kRejected), nullptr);
  EXPECT_STREQ(d2.First(2, Kind::kFinished)->finish_reason, "length");
  EXPECT_STREQ(d2.First(3, Kind::kRejected)->finish_reason, "invalid");
  EXPECT_STREQ(d2.First(4, Kind::kRejected)->finish_reason, "invalid");
  EXPECT_EQ(d2.engine().stats().requests_rejected, 3);
}

std::vector<EngineEvent> Scenario(const EngineProfile& p, uint32_t salt) {
  Driver d(p);
  for (uint64_t id = 0; id < 12; ++id) {
    d.Submit(id, Prompt(300 + 97 * static_cast<int64_t>(id), salt + static_cast<uint32_t>(id)),
             40 + static_cast<int64_t>(id), static_cast<VirtNs>(id) * 3 * kMs);
    if (id == 7) d.engine().Cancel(5, d.now());
  }
  d.RunUntilIdle();
  return d.events();
}

bool SameEvents(const std::vector<EngineEvent>& a, const std::vector<EngineEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].request_id != b[i].request_id || a[i].t != b[i].t ||
        a[i].tokens != b[i].tokens || a[i].total_tokens != b[i].total_tokens ||
        a[i].cached_tokens != b[i].cached_tokens) {
      return false;
    }
  }
  return true;
}

TEST(EngineTest, DeterministicGivenProfileAndCalls) {
  EngineProfile p = TestProfile();
  p.max_running_requests = 4;
  p.spec_draft_tokens = 4;
  p.spec_accept_mean = 1.5;
  p.step_jitter = 0.2;
  p.epoch_jitter = 0.1;
  const auto a = Scenario(p, 1000);
  const auto b = Scenario(p, 1000);
  EXPECT_TRUE(SameEvents(a, b));
  // Different prompts draw different noise (so repeated trials disagree), and so does a new seed.
  EXPECT_FALSE(SameEvents(a, Scenario(p, 2000)));
  p.jitter_seed = 2;
  EXPECT_FALSE(SameEvents(a, Scenario(p, 1000)));
}

TEST(EngineTest, StepJitterStaysWithinItsBounds) {
  EngineProfile p = TestProfile();
  p.step_jitter = 0.25;
  Driver d(p);
  d.Submit(1, Prompt(10, 130), 2000, 0);
  d.RunUntilIdle();
  auto toks = d.TokensOf(1);
  VirtNs lo = INT64_MAX, hi = 0;
  for (size_t i = 1; i < toks.size(); ++i) {
    lo = std::min(lo, toks[i].t - toks[i - 1].t);
    hi = std::max(hi, toks[i].t - toks[i - 1].t);
  }
  EXPECT_GE(lo, 1'100'000 * 0.75 - 1);
  EXPECT_LE(hi, 1'100'000 * 1.25 + 1);
  EXPECT_LT(lo, 1'100'000 * 0.8);  // the noise really spans its range
  EXPECT_GT(hi, 1'100'000 * 1.2);
}

TEST(EngineTest, EpochJitterChangesAfterEachFlush) {
  EngineProfile p = TestProfile();
  p.epoch_jitter = 0.3;
  Driver d(p);
  std::set<VirtNs> durations;
  for (int epoch = 0; epoch < 4; ++epoch) {
    const VirtNs t0 = d.now();
    d.Submit(static_cast<uint64_t>(epoch), Prompt(10, 140), 3, t0);
    d.RunUntilIdle();
    durations.insert(*d.Find(static_cast<uint64_t>(epoch), Kind::kFinished) - t0);
    ASSERT_TRUE(d.engine().FlushCache());
  }
  EXPECT_GE(durations.size(), 3u);
}

TEST(EngineTest, AdvanceBeforeTheStepEndsEmitsNothingNew) {
  Driver d(TestProfile());
  d.Submit(1, Prompt(100, 150), 3, 0);
  d.AdvanceTo(0);
  const size_t n = d.events().size();  // the admission
  d.AdvanceTo(1'099'999);
  EXPECT_EQ(d.events().size(), n);
  EXPECT_EQ(*d.engine().NextEventTime(), 1'100'000);
  d.AdvanceTo(1'100'000);
  EXPECT_GT(d.events().size(), n);
}

// AdvanceTo hands out a step's events before freeing the rows it ended, caching their prompts and
// planning the next step; whatever the engine is asked next must see that work done. A request
// arriving at the very instant another finishes finds the pool it freed and the prompt it cached.
TEST(EngineTest, ArrivalAtAFinishInstantSeesThePoolFreedAndThePromptCached) {
  const std::vector<uint32_t> x = Prompt(1000, 170);
  // Submits straight after the step that finished request 1, with no other engine call between.
  auto submit = [](Driver& d, uint64_t id, std::vector<uint32_t> prompt, VirtNs at) {
    EngineRequest r;
    r.id = id;
    r.prompt_tokens = std::move(prompt);
    r.max_new_tokens = 2;
    d.engine().Submit(std::move(r), at);
    d.AdvanceTo(at);  // collects the admission
    return d.First(id, Kind::kAdmitted);
  };

  EngineProfile tight = TestProfile();
  tight.max_total_tokens = 1024;  // one 1,000-token request at a time
  Driver d(tight);
  d.Submit(1, x, 2, 0);
  const VirtNs done = d.RunUntil(1, Kind::kFinished);
  const EngineEvent* admitted = submit(d, 2, Prompt(1000, 171), done);
  ASSERT_NE(admitted, nullptr);
  EXPECT_EQ(admitted->t, done);

  Driver c(TestProfile());
  c.Submit(1, x, 2, 0);
  const VirtNs c_done = c.RunUntil(1, Kind::kFinished);
  admitted = submit(c, 2, x, c_done);
  ASSERT_NE(admitted, nullptr);
  EXPECT_EQ(admitted->cached_tokens, 999);

  Driver st(TestProfile());
  st.Submit(1, x, 2, 0);
  st.RunUntil(1, Kind::kFinished);
  EXPECT_EQ(st.engine().stats().cache_tokens, 1000 + 2 - 1);
  EXPECT_EQ(st.engine().stats().pool_used_tokens, 0);
  EXPECT_TRUE(st.engine().Idle());
}

// The same calls give the same events whether the engine is advanced to every step's end (each
// step's bookkeeping deferred to the next call) or far past several steps at once (done in
// between).
TEST(EngineTest, EventsDoNotDependOnHowFarEachAdvanceGoes) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 2048;
  p.max_running_requests = 3;
  p.step_jitter = 0.1;
  auto run = [&](bool every_step) {
    Driver d(p);
    std::mt19937 rng(7);
    VirtNs t = 0;
    for (uint64_t id = 0; id < 60; ++id) {
      t += static_cast<VirtNs>(rng() % 5) * kMs;
      if (every_step) {
        while (auto next = d.engine().NextEventTime()) {
          if (*next > t) break;
          d.AdvanceTo(*next);
        }
      }
      std::vector<uint32_t> prompt = Prompt(200 + rng() % 600, 300 + rng() % 3);
      prompt.resize(prompt.size() - rng() % 100);
      d.Submit(id, std::move(prompt), 1 + rng() % 20, t);
      if (rng() % 8 == 0) d.engine().Cancel(rng() % (id + 1), t);
    }
    d.RunUntilIdle();
    return d.events();
  };
  const auto fine = run(true);
  const auto coarse = run(false);
  EXPECT_GT(fine.size(), 300u);
  EXPECT_TRUE(SameEvents(fine, coarse));
}

// Random arrivals, cancels and flushes against a tiny pool with shared prefixes: every request ends
// exactly once with the tokens it asked for, and the pool and running limits are never exceeded.
TEST(EngineTest, RandomScheduleKeepsEveryInvariant) {
  int64_t cached_total = 0, rejected_total = 0, cancelled_total = 0, stop_total = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    EngineProfile p = TestProfile();
    p.max_total_tokens = 1200;
    p.page_size = 16;
    p.max_running_requests = 1 + static_cast<int>(rng() % 5);
    p.chunked_prefill_size = 64 + rng() % 300;
    p.policy = rng() % 2 ? SchedulePolicy::kPrefillFirst : SchedulePolicy::kDecodeFirst;
    p.mixed_chunks = rng() % 2;
    p.spec_draft_tokens = static_cast<int>(rng() % 4);
    p.spec_accept_mean = p.spec_draft_tokens / 2.0;
    p.step_jitter = 0.1;
    Driver d(p);
    std::vector<std::vector<uint32_t>> bases = {Prompt(900, 1), Prompt(900, 2), Prompt(900, 3)};
    struct Want {
      int64_t tokens = 0;
      bool eos = false;
      VirtNs cancelled_at = -1;
      bool rejected_ok = false;
    };
    std::map<uint64_t, Want> want;
    VirtNs t = 0;
    for (uint64_t id = 0; id < 150; ++id) {
      t += static_cast<VirtNs>(rng() % 4) * kMs;
      std::vector<uint32_t> prompt;
      const auto& base = bases[rng() % 3];
      prompt.assign(base.begin(), base.begin() + 1 + rng() % 900);
      for (int i = 0, extra = static_cast<int>(rng() % 200); i < extra; ++i) {
        prompt.push_back(7'000'000 + static_cast<uint32_t>(rng() % 1000));
      }
      const int64_t max_new = 1 + rng() % 300;
      const int64_t eos = rng() % 4 == 0 ? 1 + static_cast<int64_t>(rng() % 300) : -1;
      Want& w = want[id];
      w.rejected_ok = static_cast<int64_t>(prompt.size()) + max_new > 1200;
      w.eos = eos > 0 && eos <= max_new;
      w.tokens = w.eos ? eos : max_new;
      d.Submit(id, std::move(prompt), max_new, t, eos);
      if (rng() % 10 == 0) {
        const uint64_t victim = rng() % (id + 1);
        d.engine().Cancel(victim, t);
        if (want[victim].cancelled_at < 0) want[victim].cancelled_at = t;
      }
      if (rng() % 20 == 0 && d.engine().Idle()) {
        EXPECT_TRUE(d.engine().FlushCache());
      }
      const EngineStats st = d.engine().stats();
      ASSERT_LE(st.pool_used_tokens, p.max_total_tokens);
      ASSERT_LE(st.cache_tokens, p.max_total_tokens);
      ASSERT_LE(st.running, p.max_running_requests);
    }
    d.RunUntilIdle();
    std::map<uint64_t, int64_t> got_tokens, ends;
    VirtNs last = 0;
    for (const auto& e : d.events()) {
      ASSERT_GE(e.t, last);
      last = e.t;
      const Want& w = want[e.request_id];
      if (w.cancelled_at >= 0) {
        ASSERT_LE(e.t, w.cancelled_at) << "event after cancel, seed " << seed;
      }
      if (e.kind == Kind::kTokens) {
        got_tokens[e.request_id] += e.tokens;
        ASSERT_EQ(got_tokens[e.request_id], e.total_tokens);
        ASSERT_LE(e.tokens, 1 + p.spec_draft_tokens);
      }
      if (e.kind == Kind::kFinished || e.kind == Kind::kRejected) {
        ASSERT_EQ(++ends[e.request_id], 1) << "two endings for " << e.request_id;
      }
      if (e.kind == Kind::kFinished) {
        ASSERT_EQ(e.total_tokens, w.tokens);
        ASSERT_STREQ(e.finish_reason, w.eos ? "stop" : "length");
      }
      if (e.kind == Kind::kRejected) {
        ASSERT_TRUE(w.rejected_ok);
      }
    }
    for (const auto& [id, w] : want) {
      if (w.cancelled_at < 0) {
        EXPECT_EQ(ends[id], 1) << "request " << id << " never ended";
      }
    }
    EXPECT_TRUE(d.engine().Idle());
    EXPECT_EQ(d.engine().stats().pool_used_tokens, 0);
    cached_total += d.engine().stats().cached_tokens_total;
    rejected_total += d.engine().stats().requests_rejected;
    cancelled_total += d.engine().stats().requests_cancelled;
    for (const auto& e : d.events()) {
      stop_total += e.kind == Kind::kFinished && std::string(e.finish_reason) == "stop";
    }
  }
  // The schedule really exercised cache hits, rejections, cancels and early stops.
  EXPECT_GT(cached_total, 0);
  EXPECT_GT(rejected_total, 0);
  EXPECT_GT(cancelled_total, 0);
  EXPECT_GT(stop_total, 0);
}

}  // namespace
}  // namespace capq::engine

// The simulated engine's prefix cache (engine.h states the semantics): hits, flushes, eviction,
// finished requests' output and block granularity.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <string>

#include "capq/engine/engine.h"
#include "engine_test_util.h"

namespace capq::engine {
namespace {

using namespace capq::engine::testing;  // NOLINT

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

}  // namespace
}  // namespace capq::engine

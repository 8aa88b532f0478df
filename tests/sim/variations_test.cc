// The variation table (sim/variations.h): each dialect's own framing, and varied mode's draws.
#include "capq/sim/variations.h"

#include <gtest/gtest.h>

#include <set>

namespace capq::sim {
namespace {

TEST(Variations, EachDialectSendsItsOwnEnginesFraming) {
  engine::EngineProfile p;
  p.stream_interval = 3;
  const StreamVariation sglang = DialectVariation(Dialect::kSglang, p);
  EXPECT_EQ(sglang.tokens_per_chunk, 3);
  EXPECT_EQ(sglang.cached_zero, CachedZero::kNull);  // usage_processor.py, recorded Qwen3.8
  EXPECT_TRUE(sglang.merge_when_slow);
  const StreamVariation vllm = DialectVariation(Dialect::kVllm, p);
  EXPECT_EQ(vllm.cached_zero, CachedZero::kAbsent);
  EXPECT_TRUE(vllm.last_text_on_finish);
  const StreamVariation llamacpp = DialectVariation(Dialect::kLlamacpp, p);
  EXPECT_EQ(llamacpp.cached_zero, CachedZero::kObject);  // recorded b9749, 14
  EXPECT_FALSE(llamacpp.merge_when_slow);
}

// A request's draw depends on the seed and its index alone, and over a trial's requests every
// value of every variation turns up, each beside the others.
TEST(Variations, VariedDrawsAreSeededAndCoverEveryValue) {
  EXPECT_EQ(DrawVariation(7, 12), DrawVariation(7, 12));
  std::set<int> per_chunk, cached, usage;
  int merged = 0, last_text = 0, empty_fr = 0, empty_id = 0, role = 0, int_stop = 0, ping = 0,
      early_role = 0, differ = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const StreamVariation v = DrawVariation(7, i);
    differ += !(v == DrawVariation(8, i));
    per_chunk.insert(v.tokens_per_chunk);
    cached.insert(static_cast<int>(v.cached_zero));
    usage.insert(static_cast<int>(v.usage_key));
    merged += v.merge_when_slow;
    last_text += v.last_text_on_finish;
    empty_fr += v.empty_finish_reason;
    empty_id += v.empty_id;
    role += v.role_every_delta;
    int_stop += v.integer_stop;
    ping += v.keepalive_while_queued;
    early_role += v.role_at_admission;
  }
  EXPECT_EQ(per_chunk, (std::set<int>{1, 2, 3, 4}));
  EXPECT_EQ(cached.size(), 3u);
  EXPECT_EQ(usage.size(), 3u);
  for (int n : {merged, last_text, empty_fr, empty_id, role, int_stop, ping, early_role}) {
    EXPECT_GT(n, 0);
    EXPECT_LT(n, 64);
  }
  EXPECT_GT(differ, 32);  // another seed, another trial's draws
}

TEST(Variations, ModesParseAndAnUnknownOneIsRefused) {
  EXPECT_EQ(*ParseVariationMode("varied"), VariationMode::kVaried);
  EXPECT_EQ(*ParseVariationMode("dialect"), VariationMode::kDialect);
  Result<VariationMode> bad = ParseVariationMode("random");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("dialect or varied"), std::string::npos);
}

}  // namespace
}  // namespace capq::sim

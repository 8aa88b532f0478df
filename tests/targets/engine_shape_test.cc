// Each engine's reported limits in the engine model's terms.
#include "capq/targets/engine_shape.h"

#include <gtest/gtest.h>

namespace capq {
namespace {

const engine::Parameter* Fact(const engine::ServerShape& s, const std::string& name) {
  for (const auto& p : s.facts) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

TEST(EngineShapeTest, SglangRunsPrefillFirstWithItsReportedLimitsAndSpeculativeSteps) {
  Result<engine::ServerShape> s =
      ShapeFromLimits(Engine::kSglang, {{"max_running_requests", "9"},
                                        {"max_total_num_tokens", "262144"},
                                        {"chunked_prefill_size", "4096"},
                                        {"context_length", "262144"},
                                        {"speculative_num_steps", "7"}});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->profile.max_running_requests, 9);
  EXPECT_EQ(s->profile.max_total_tokens, 262144);
  EXPECT_EQ(s->profile.chunked_prefill_size, 4096);
  EXPECT_EQ(s->profile.spec_draft_tokens, 7);
  EXPECT_EQ(s->profile.policy, engine::SchedulePolicy::kPrefillFirst);
  EXPECT_EQ(s->profile.cache_model, engine::CacheModel::kRadix);
  EXPECT_EQ(Fact(*s, "chunked_prefill_size")->basis, engine::Basis::kReported);
  // Not reported: the documented default, marked assumed.
  EXPECT_EQ(s->profile.page_size, 1);
  EXPECT_EQ(Fact(*s, "page_size")->basis, engine::Basis::kAssumed);
  Result<engine::ServerShape> plain =
      ShapeFromLimits(Engine::kSglang, {{"max_running_requests", "4"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->profile.spec_draft_tokens, 0);
}

TEST(EngineShapeTest, LlamacppHasPrivateSlotsAndVllmDecodesFirst) {
  Result<engine::ServerShape> l =
      ShapeFromLimits(Engine::kLlamacpp, {{"total_slots", "8"}, {"n_ctx", "2048"}});
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->profile.cache_model, engine::CacheModel::kSlots);
  EXPECT_EQ(l->profile.max_running_requests, 8);
  EXPECT_EQ(l->profile.context_length, 2048);
  EXPECT_EQ(l->profile.policy, engine::SchedulePolicy::kDecodeFirst);
  EXPECT_EQ(Fact(*l, "chunked_prefill_size")->basis, engine::Basis::kAssumed);
  Result<engine::ServerShape> v = ShapeFromLimits(
      Engine::kVllm, {{"max_model_len", "8192"}, {"num_gpu_blocks", "100"}, {"block_size", "16"}});
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(v->profile.max_total_tokens, 1600);
  EXPECT_EQ(v->profile.policy, engine::SchedulePolicy::kDecodeFirst);
  EXPECT_EQ(Fact(*v, "max_running_requests")->basis, engine::Basis::kAssumed);
}

TEST(EngineShapeTest, ARunningLimitTheServerDidNotReportIsRefusedByName) {
  Result<engine::ServerShape> s = ShapeFromLimits(Engine::kSglang, {{"context_length", "8"}});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("max_running_requests"), std::string::npos);
  Result<engine::ServerShape> l = ShapeFromLimits(Engine::kLlamacpp, {{"total_slots", "x"}});
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("total_slots"), std::string::npos);
  EXPECT_FALSE(ShapeFromLimits(Engine::kSim, {}).ok());
}

}  // namespace
}  // namespace capq

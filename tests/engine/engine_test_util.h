// What the engine tests share: a profile of round numbers, prompts and a driver that advances and
// submits the way the server does.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "capq/engine/engine.h"

namespace capq::engine::testing {

using Kind = EngineEvent::Kind;
constexpr VirtNs kMs = 1'000'000;

// Round numbers so every step time is an exact integer of nanoseconds.
inline EngineProfile TestProfile() {
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

inline std::vector<uint32_t> Prompt(int64_t len, uint32_t salt) {
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

}  // namespace capq::engine::testing

// cache_model slots against the llama.cpp recordings (conformance/llamacpp/INDEX.md), in token
// terms: a 4-token template prefix shared by every chat prompt, 6 suffix tokens, 8 slots.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "capq/engine/engine.h"

namespace capq::engine {
namespace {

using Kind = EngineEvent::Kind;

EngineProfile SlotsProfile(bool host_cache) {
  EngineProfile p;
  p.name = "slots";
  p.max_running_requests = 8;
  p.context_length = 2048;
  p.chunked_prefill_size = 2048;
  p.policy = SchedulePolicy::kDecodeFirst;
  p.cache_model = CacheModel::kSlots;
  p.host_prompt_cache = host_cache;
  p.b0_s = 0.001;
  p.b1_s_per_prefill_token = 1e-4;
  p.b3_s_per_decode_row = 1e-4;
  p.b4_s_per_decode_kv_token = 0;
  p.overhead_s = 0;
  return p;
}

// A chat prompt as the Phi-3 template tokenizes it: <s> <|user|> ▁ \n, the content, 6 suffix ids.
std::vector<uint32_t> Chat(uint32_t first_word, int content_tokens) {
  std::vector<uint32_t> t = {1, 32010, 29871, 13, first_word};
  for (int i = 1; i < content_tokens; ++i) t.push_back(100000 + static_cast<uint32_t>(i));
  for (uint32_t id : {32007u, 29871u, 13u, 32001u, 29871u, 13u}) t.push_back(id);
  return t;
}

class SlotsDriver {
 public:
  explicit SlotsDriver(const EngineProfile& p) : engine_(p) {}

  // Submits the requests at one instant and runs until the engine is idle; returns each one's
  // cached_tokens.
  // `outputs[i]`, when given, names request i's output ids.
  std::vector<int64_t> Run(const std::vector<std::vector<uint32_t>>& prompts, int64_t max_new,
                           const std::vector<std::function<uint32_t(int64_t)>>& outputs = {}) {
    std::vector<uint64_t> ids;
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.id = next_id_++;
      r.prompt_tokens = prompts[i];
      r.max_new_tokens = max_new;
      if (i < outputs.size()) r.output_token = outputs[i];
      ids.push_back(r.id);
      engine_.Submit(std::move(r), now_);
    }
    std::vector<EngineEvent> events;
    while (auto next = engine_.NextEventTime()) {
      now_ = *next;
      engine_.AdvanceTo(now_, &events);
    }
    std::vector<int64_t> cached;
    for (uint64_t id : ids) {
      int64_t c = -1;
      for (const auto& e : events)
        if (e.request_id == id && e.kind == Kind::kAdmitted) c = e.cached_tokens;
      cached.push_back(c);
    }
    return cached;
  }
  int64_t RunOne(const std::vector<uint32_t>& prompt) { return Run({prompt}, 16)[0]; }
  std::vector<int64_t> EraseAll() {
    std::vector<int64_t> n;
    for (int i = 0; i < 8; ++i) n.push_back(engine_.EraseSlot(i).value_or(-1));
    return n;
  }
  Engine& engine() { return engine_; }

 private:
  Engine engine_;
  uint64_t next_id_ = 1;
  VirtNs now_ = 0;
};

// Recordings 20-*, then 30 to 40 on the default server (host prompt cache on).
TEST(EngineSlotsTest, ReplaysTheDefaultServersCacheSequence) {
  SlotsDriver d(SlotsProfile(true));
  std::vector<std::vector<uint32_t>> load;
  for (uint32_t w = 0; w < 8; ++w) load.push_back(Chat(500 + w, 44));
  for (int64_t c : d.Run(load, 128)) EXPECT_EQ(c, 0);  // fresh slots hold nothing

  const auto sierra = Chat(7001, 293);     // 303 tokens
  EXPECT_EQ(d.RunOne(sierra), 4);          // 30: an LRU slot that held a chat prompt
  EXPECT_EQ(d.RunOne(sierra), 302);        // 31: the same slot, all but the last token
  EXPECT_EQ(d.RunOne(Chat(7002, 41)), 4);  // 32
  EXPECT_EQ(d.RunOne(Chat(7003, 47)), 4);  // 33
  const auto tango = Chat(7004, 293);
  EXPECT_EQ(d.RunOne(tango), 4);  // 34
  const std::vector<int64_t> erased = d.EraseAll();
  EXPECT_EQ(std::count(erased.begin(), erased.end(), 318), 2) << "Sierra and Tango: 303 + 16 - 1";
  EXPECT_EQ(d.RunOne(tango), 0);  // 36: never copied to the host cache
  const auto uniform = Chat(7005, 293);
  EXPECT_EQ(d.RunOne(uniform), 0);         // 37: an erased slot
  EXPECT_EQ(d.RunOne(Chat(7006, 45)), 0);  // 38: its launch copies Uniform's slot to the host
  d.EraseAll();
  EXPECT_EQ(d.RunOne(uniform), 302);  // 40: restored from the host cache
}

// Recordings 86 to 93 (--cache-ram 0): erase makes a repeat cold; in-slot reuse still works.
TEST(EngineSlotsTest, WithoutTheHostCacheEraseMakesARepeatCold) {
  SlotsDriver d(SlotsProfile(false));
  const auto whiskey = Chat(8001, 294);
  EXPECT_EQ(d.RunOne(whiskey), 0);  // 86
  const std::vector<int64_t> erased = d.EraseAll();
  EXPECT_EQ(erased[7], 319) << "a fresh server starts on slot 7";  // 87
  EXPECT_EQ(d.RunOne(whiskey), 0);                                 // 88
  const auto xray = Chat(8002, 293);
  EXPECT_EQ(d.RunOne(xray), 0);            // 89
  EXPECT_EQ(d.RunOne(Chat(8003, 45)), 0);  // 90
  const std::vector<int64_t> erased2 = d.EraseAll();
  EXPECT_EQ(erased2[6], 319);  // 91: 88 ran on slot 6, 89 on 5, 90 on 4
  EXPECT_EQ(erased2[5], 318);
  EXPECT_EQ(erased2[4], 70);
  EXPECT_EQ(d.RunOne(xray), 0);    // 92
  EXPECT_EQ(d.RunOne(xray), 302);  // 93
}

TEST(EngineSlotsTest, RequestsPastTheSlotsWaitAndEraseWaitsForAnIdleSlot) {
  SlotsDriver d(SlotsProfile(true));
  Engine& e = d.engine();
  for (uint64_t id = 1; id <= 12; ++id) {
    EngineRequest r;
    r.id = id;
    r.prompt_tokens = Chat(600 + static_cast<uint32_t>(id), 44);
    r.max_new_tokens = 64;
    e.Submit(std::move(r), 0);
  }
  EngineStats st = e.stats();
  EXPECT_EQ(st.running, 8);
  EXPECT_EQ(st.waiting, 4);
  const std::vector<SlotState> slots = e.Slots();
  ASSERT_EQ(slots.size(), 8u);
  for (const SlotState& s : slots) EXPECT_TRUE(s.processing);
  EXPECT_FALSE(e.EraseSlot(0).has_value());
  std::vector<EngineEvent> events;
  while (auto next = e.NextEventTime()) e.AdvanceTo(*next, &events);
  EXPECT_TRUE(e.Idle());
  EXPECT_EQ(e.EraseSlot(0).value_or(-1), 54 + 64 - 1);
  EXPECT_EQ(e.EraseSlot(0).value_or(-1), 0);
}

TEST(EngineSlotsTest, SlotsRejectOnlyWhatTheirOwnContextCannotHold) {
  EngineProfile p = SlotsProfile(true);
  p.max_total_tokens = 64;  // ignored: every slot has context_length tokens of its own
  p.page_size = 64;
  Engine e(p);
  EngineRequest ok;
  ok.id = 1;
  ok.prompt_tokens = Chat(1, 1000);
  ok.max_new_tokens = 2048 - 1010;
  e.Submit(std::move(ok), 0);
  EngineRequest too_long;
  too_long.id = 2;
  too_long.prompt_tokens = Chat(2, 1000);
  too_long.max_new_tokens = 2048 - 1010 + 1;
  e.Submit(std::move(too_long), 0);
  std::vector<EngineEvent> events;
  e.AdvanceTo(0, &events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Kind::kAdmitted);
  EXPECT_EQ(events[1].kind, Kind::kRejected);
}

TEST(EngineSlotsTest, ErasingEverySlotStartsANewJitterEpoch) {
  EngineProfile p = SlotsProfile(true);
  p.epoch_jitter = 0.3;
  SlotsDriver d(p);
  VirtNs now = 0;
  auto step_of = [&](uint32_t word) {
    Engine& e = d.engine();
    EngineRequest r;
    r.id = 1000 + word;
    r.prompt_tokens = Chat(word, 100);
    r.max_new_tokens = 1;
    e.Submit(std::move(r), now);
    const VirtNs end = *e.NextEventTime();
    const VirtNs duration = end - now;
    std::vector<EngineEvent> events;
    e.AdvanceTo(end, &events);
    now = end;
    return duration;
  };
  std::set<VirtNs> durations;
  for (uint32_t i = 0; i < 6; ++i) {
    durations.insert(step_of(9000 + i));
    d.EraseAll();
  }
  std::set<VirtNs> unflushed;
  for (uint32_t i = 0; i < 6; ++i) unflushed.insert(step_of(9100 + i));
  EXPECT_GT(durations.size(), 1u) << "one jitter factor for every epoch";
  EXPECT_EQ(unflushed.size(), 1u) << "one epoch without erases";
}

TEST(EngineSlotsTest, IdleStartDelayBatchesNearSimultaneousArrivals) {
  EngineProfile p = SlotsProfile(true);
  p.idle_start_delay_s = 0.004;
  Engine e(p);
  constexpr VirtNs kMs = 1'000'000;
  auto submit = [&](uint64_t id, VirtNs at) {
    EngineRequest r;
    r.id = id;
    r.prompt_tokens = Chat(static_cast<uint32_t>(id), 293);
    r.max_new_tokens = 4;
    e.Submit(std::move(r), at);
  };
  std::vector<EngineEvent> events;
  submit(1, 0);
  EXPECT_EQ(e.NextEventTime(), 4 * kMs) << "the first step waits for the delay";
  e.AdvanceTo(1 * kMs, &events);
  submit(2, 1 * kMs);
  EXPECT_TRUE(events.empty());
  while (auto next = e.NextEventTime()) e.AdvanceTo(*next, &events);
  std::map<uint64_t, VirtNs> admitted, first;
  for (const auto& ev : events) {
    if (ev.kind == Kind::kAdmitted) admitted[ev.request_id] = ev.t;
    if (ev.kind == Kind::kTokens && !first.count(ev.request_id)) first[ev.request_id] = ev.t;
  }
  EXPECT_EQ(admitted[1], 4 * kMs);
  EXPECT_EQ(admitted[2], 4 * kMs);
  EXPECT_EQ(first[1], first[2]) << "one prefill batch for both";
  // Each time the engine goes idle, the next arrival waits the delay again.
  const VirtNs idle_at = events.back().t;
  submit(3, idle_at + kMs);
  EXPECT_EQ(e.NextEventTime(), idle_at + 5 * kMs);
}

// A chat's second turn as a per-message template renders it: the whole turn 1 prompt, its output,
// the end-of-turn and user markers, new words and the suffix.
std::vector<uint32_t> SecondTurn(const std::vector<uint32_t>& turn1, int64_t output) {
  std::vector<uint32_t> t = turn1;
  for (int64_t i = 0; i < output; ++i) t.push_back(500000 + static_cast<uint32_t>(i));
  for (uint32_t id : {32007u, 29871u, 13u, 32010u, 29871u, 13u, 777u, 778u}) t.push_back(id);
  for (uint32_t id : {32007u, 29871u, 13u, 32001u, 29871u, 13u}) t.push_back(id);
  return t;
}

uint32_t TurnOneOutput(int64_t i) { return 500000 + static_cast<uint32_t>(i); }

// The slot keeps prompt + output - 1 with the ids the stream sent, and the next turn goes to the
// slot whose tokens share the most with it (ts/server-context.cpp:1600-1676).
TEST(EngineSlotsTest, SecondTurnFindsItsHistoryInItsSlot) {
  const std::vector<uint32_t> t1 = Chat(4000, 100);
  ASSERT_EQ(t1.size(), 110u);
  const std::vector<uint32_t> t2 = SecondTurn(t1, 16);
  SlotsDriver d(SlotsProfile(true));
  d.Run({t1}, 16, {TurnOneOutput});
  const auto held = d.engine().Slots();
  EXPECT_EQ(held[7].n_kv_tokens, 110 + 16 - 1);
  // Another idle slot holds a shorter match; the history's slot still wins.
  d.Run({Chat(4001, 50)}, 16);
  const auto cached = d.Run({t2}, 16)[0];
  EXPECT_EQ(cached, 110 + 16 - 1);
}

// Other tasks took the history's slot in between: it is gone from the slots, and only the host
// prompt cache (which copied it when they launched) brings it back, as on the real server.
TEST(EngineSlotsTest, SecondTurnAfterItsSlotWasReusedNeedsTheHostCache) {
  const std::vector<uint32_t> t1 = Chat(4000, 100);
  const std::vector<uint32_t> t2 = SecondTurn(t1, 16);
  std::vector<std::vector<uint32_t>> others;
  for (uint32_t k = 0; k < 8; ++k) others.push_back(Chat(5000 + k, 60));
  for (bool host : {true, false}) {
    SCOPED_TRACE(host ? "host cache" : "no host cache");
    SlotsDriver d(SlotsProfile(host));
    d.Run({t1}, 16, {TurnOneOutput});
    d.Run(others, 16);  // all eight slots run other chats
    for (const auto& s : d.engine().Slots()) EXPECT_LT(s.n_kv_tokens, 110);
    const int64_t cached = d.Run({t2}, 16)[0];
    if (host) {
      EXPECT_EQ(cached, 110 + 16 - 1);
    } else {
      EXPECT_EQ(cached, 4);  // the template prefix every chat shares
    }
  }
}

}  // namespace
}  // namespace capq::engine

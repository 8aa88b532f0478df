// The simulated engine's cancels, rejections, determinism, jitter and invariants under random
// schedules (engine.h states the semantics).
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

// A random profile with a tiny pool: every limit and policy a schedule can hit.
EngineProfile RandomProfile(std::mt19937* rng) {
  EngineProfile p = TestProfile();
  p.max_total_tokens = 1200;
  p.page_size = 16;
  p.max_running_requests = 1 + static_cast<int>((*rng)() % 5);
  p.chunked_prefill_size = 64 + (*rng)() % 300;
  p.policy = (*rng)() % 2 ? SchedulePolicy::kPrefillFirst : SchedulePolicy::kDecodeFirst;
  p.mixed_chunks = (*rng)() % 2;
  p.spec_draft_tokens = static_cast<int>((*rng)() % 4);
  p.spec_accept_mean = p.spec_draft_tokens / 2.0;
  p.step_jitter = 0.1;
  return p;
}

// What one request of a random schedule must end with.
struct Want {
  int64_t tokens = 0;
  bool eos = false;
  VirtNs cancelled_at = -1;
  bool rejected_ok = false;
};

// 150 random arrivals sharing three prefixes, with cancels and flushes between them; the pool and
// running limits are checked after each call.
std::map<uint64_t, Want> SubmitRandomSchedule(const EngineProfile& p, std::mt19937* rng,
                                              Driver* d) {
  std::mt19937& r = *rng;
  std::vector<std::vector<uint32_t>> bases = {Prompt(900, 1), Prompt(900, 2), Prompt(900, 3)};
  std::map<uint64_t, Want> want;
  VirtNs t = 0;
  for (uint64_t id = 0; id < 150; ++id) {
    t += static_cast<VirtNs>(r() % 4) * kMs;
    const auto& base = bases[r() % 3];
    std::vector<uint32_t> prompt(base.begin(), base.begin() + 1 + r() % 900);
    for (int i = 0, extra = static_cast<int>(r() % 200); i < extra; ++i) {
      prompt.push_back(7'000'000 + static_cast<uint32_t>(r() % 1000));
    }
    const int64_t max_new = 1 + r() % 300;
    const int64_t eos = r() % 4 == 0 ? 1 + static_cast<int64_t>(r() % 300) : -1;
    Want& w = want[id];
    w.rejected_ok = static_cast<int64_t>(prompt.size()) + max_new > 1200;
    w.eos = eos > 0 && eos <= max_new;
    w.tokens = w.eos ? eos : max_new;
    d->Submit(id, std::move(prompt), max_new, t, eos);
    if (r() % 10 == 0) {
      const uint64_t victim = r() % (id + 1);
      d->engine().Cancel(victim, t);
      if (want[victim].cancelled_at < 0) want[victim].cancelled_at = t;
    }
    if (r() % 20 == 0 && d->engine().Idle()) {
      EXPECT_TRUE(d->engine().FlushCache());
    }
    const EngineStats st = d->engine().stats();
    EXPECT_LE(st.pool_used_tokens, p.max_total_tokens);
    EXPECT_LE(st.cache_tokens, p.max_total_tokens);
    EXPECT_LE(st.running, p.max_running_requests);
  }
  return want;
}

// Every event in time order, none after its request's cancel, tokens adding up, one ending per
// request with the tokens and finish reason it asked for.
void CheckEvents(const EngineProfile& p, const Driver& d, std::map<uint64_t, Want>& want,
                 uint32_t seed) {
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
}

// Random arrivals, cancels and flushes against a tiny pool with shared prefixes: every request ends
// exactly once with the tokens it asked for, and the pool and running limits are never exceeded.
TEST(EngineTest, RandomScheduleKeepsEveryInvariant) {
  int64_t cached_total = 0, rejected_total = 0, cancelled_total = 0, stop_total = 0;
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    std::mt19937 rng(seed);
    const EngineProfile p = RandomProfile(&rng);
    Driver d(p);
    std::map<uint64_t, Want> want = SubmitRandomSchedule(p, &rng, &d);
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed;
    d.RunUntilIdle();
    CheckEvents(p, d, want, seed);
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed;
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

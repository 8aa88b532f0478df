// The engine model alone, offline (no sockets, no clocks): how many decode tokens it simulates per
// CPU second under a decode-heavy closed loop. Target (issue 3): >= 1M decode tokens per CPU
// second.
#include <benchmark/benchmark.h>

#include <vector>

#include "capq/engine/engine.h"
#include "capq/engine/predict.h"
#include "capq/engine/profile.h"

namespace {

using capq::engine::Engine;
using capq::engine::EngineEvent;
using capq::engine::EngineProfile;
using capq::engine::EngineRequest;

EngineProfile DecodeHeavy(int rows, int spec_draft_tokens) {
  EngineProfile p;
  p.name = "bench";
  p.max_total_tokens = 1 << 24;
  p.max_running_requests = rows;
  p.chunked_prefill_size = 8192;
  p.spec_draft_tokens = spec_draft_tokens;
  p.spec_accept_mean = spec_draft_tokens > 0 ? 2.2 : 0;
  p.step_jitter = 0.1;
  return p;
}

// args: running rows, draft tokens. Each request: 256 prompt tokens, 4096 output tokens; a finished
// request is replaced at once so the engine stays full.
void BM_EngineDecode(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(0));
  const EngineProfile profile = DecodeHeavy(rows, static_cast<int>(state.range(1)));
  constexpr int64_t kPrompt = 256, kOutput = 4096;
  int64_t tokens = 0, steps = 0;
  std::vector<EngineEvent> events;
  events.reserve(4096);
  for (auto _ : state) {
    state.PauseTiming();
    Engine engine(profile);
    uint64_t next_id = 0;
    auto submit = [&](capq::engine::VirtNs at) {
      EngineRequest r;
      r.id = next_id++;
      r.prompt_tokens.resize(kPrompt);
      for (int64_t i = 0; i < kPrompt; ++i)
        r.prompt_tokens[i] = static_cast<uint32_t>(r.id * 7919 + i);
      r.max_new_tokens = kOutput;
      engine.Submit(std::move(r), at);
    };
    for (int i = 0; i < rows; ++i) submit(0);
    state.ResumeTiming();
    // Simulate until 4 * rows requests have finished.
    int64_t finished = 0;
    while (finished < 4 * rows) {
      const auto next = engine.NextEventTime();
      if (!next) break;
      events.clear();
      engine.AdvanceTo(*next, &events);
      for (const EngineEvent& e : events) {
        if (e.kind == EngineEvent::Kind::kTokens) tokens += e.tokens;
        if (e.kind == EngineEvent::Kind::kFinished) {
          ++finished;
          submit(*next);
        }
      }
    }
    steps += engine.stats().steps;
  }
  state.counters["decode_tokens_per_cpu_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
  state.counters["steps_per_cpu_s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineDecode)
    ->ArgNames({"rows", "draft"})
    ->Args({8, 0})
    ->Args({64, 0})
    ->Args({256, 0})
    ->Args({9, 7})
    ->Args({64, 7})
    ->Unit(benchmark::kMillisecond);

// A whole predicted b70_twin trial (8K/1K at C=8, 64 measured requests): what one qualify
// prediction costs.
void BM_PredictB70Trial(benchmark::State& state) {
  auto profile =
      capq::engine::LoadProfile(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/profiles/b70_twin.yaml");
  if (!profile.ok()) {
    state.SkipWithError(profile.status().ToString().c_str());
    return;
  }
  capq::engine::PredictOptions o;
  o.prompt_tokens = 8243;
  o.output_tokens = 1024;
  o.concurrency = 8;
  o.measured_requests = 64;
  o.warmup_requests = 8;
  int64_t tokens = 0;
  for (auto _ : state) {
    auto t = capq::engine::PredictTrial(*profile, o);
    if (!t.ok()) {
      state.SkipWithError(t.status().ToString().c_str());
      return;
    }
    for (const auto& r : t->measured) tokens += r.output_tokens;
    benchmark::DoNotOptimize(t->measured_end_ns);
  }
  state.counters["decode_tokens_per_cpu_s"] =
      benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_PredictB70Trial)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

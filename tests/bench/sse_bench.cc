// SSE framing + timestamping throughput on one core: the load generator's write-callback work per
// read (NowNs() then SseFramer::Feed). Target: >= 1M events/s. Reported as items_per_second.
// Beside it, the fail-fast check the loop runs once per finished stream, between socket reads.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/sse.h"

namespace {

// A realistic SGLang token chunk (~260 bytes on the wire).
std::string Event(int i) {
  return "data: "
         "{\"id\":\"9f0c1b2a6d7e4c3f\",\"object\":\"chat.completion.chunk\",\"created\":1764412800,"
         "\"model\":\"Qwen3.8-27B\",\"choices\":[{\"index\":0,\"delta\":{\"role\":null,\"content\":"
         "\" tok" +
         std::to_string(i) +
         "\",\"reasoning_content\":null},\"logprobs\":null,\"finish_reason\":null,\"matched_stop\":"
         "null}]}"
         "\n\n";
}

// One event per read: what a server flushing each token produces.
void BM_FrameOneEventPerRead(benchmark::State& state) {
  std::vector<std::string> reads;
  for (int i = 0; i < 1024; ++i) reads.push_back(Event(i));
  std::vector<capq::SseEvent> out;
  out.reserve(reads.size());
  int64_t events = 0, bytes = 0;
  for (auto _ : state) {
    capq::SseFramer framer;
    out.clear();
    for (const std::string& r : reads) {
      const capq::MonoNs t = capq::NowNs();
      framer.Feed(r, t, &out);
      bytes += static_cast<int64_t>(r.size());
    }
    events += static_cast<int64_t>(out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(events);
  state.SetBytesProcessed(bytes);
}
BENCHMARK(BM_FrameOneEventPerRead);

// Reads of `range(0)` bytes cutting events anywhere (bursty servers, large socket reads).
void BM_FrameBulkReads(benchmark::State& state) {
  std::string stream;
  int n = 0;
  for (; n < 4096; ++n) stream += Event(n);
  const size_t read_bytes = static_cast<size_t>(state.range(0));
  std::vector<capq::SseEvent> out;
  out.reserve(static_cast<size_t>(n));
  int64_t events = 0;
  for (auto _ : state) {
    capq::SseFramer framer;
    out.clear();
    for (size_t off = 0; off < stream.size(); off += read_bytes) {
      const capq::MonoNs t = capq::NowNs();
      framer.Feed(std::string_view(stream).substr(off, read_bytes), t, &out);
    }
    events += static_cast<int64_t>(out.size());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(events);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(stream.size()));
}
BENCHMARK(BM_FrameBulkReads)->Arg(1500)->Arg(16384)->ArgName("read_bytes");

// FindStreamBreak() on a finished clean stream of range(0) token chunks: the time the load
// generator's loop spends away from its sockets per completion. Reported as time per stream.
void BM_FailFastCheckPerStream(benchmark::State& state) {
  capq::RawRecord r;
  r.id = "m0";
  r.http_status = 200;
  r.content_type = "text/event-stream";
  r.actual_send_ns = 1;
  capq::SseFramer framer;
  std::string usage =
      "data: {\"id\":\"9f0c1b2a6d7e4c3f\",\"model\":\"Qwen3.8-27B\",\"choices\":[],"
      "\"usage\":{\"prompt_tokens\":8192,\"completion_tokens\":" +
      std::to_string(state.range(0)) + "}}\n\ndata: [DONE]\n\n";
  for (int i = 0; i < state.range(0); ++i) framer.Feed(Event(i), capq::NowNs(), &r.events);
  framer.Feed(usage, capq::NowNs(), &r.events);
  r.end_ns = capq::NowNs();
  capq::Row row;
  row.correctness.finish_reason.enabled = false;
  const capq::FailFastRules rules = capq::FailFastRulesFor(row, "Qwen3.8-27B");
  if (capq::FindStreamBreak(r, rules)) state.SkipWithError("the clean stream broke a gate");
  for (auto _ : state) benchmark::DoNotOptimize(capq::FindStreamBreak(r, rules));
}
BENCHMARK(BM_FailFastCheckPerStream)
    ->Arg(1024)
    ->Arg(2048)
    ->ArgName("chunks")
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();

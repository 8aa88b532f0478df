// SSE framing + timestamping throughput on one core: the load generator's write-callback work per
// read (NowNs() then SseFramer::Feed). Target: >= 1M events/s. Reported as items_per_second.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "capq/clock.h"
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

}  // namespace

BENCHMARK_MAIN();

// Fuzzes SseFramer: arbitrary bytes split into arbitrary reads must frame exactly as the same bytes
// in one read (the framer's contract), never exceed the event cap, and never crash.
// Input: byte 0 = cap selector, byte 1 = split seed, rest = the stream.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "capq/measurement/sse.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t cap = data[0] < 128 ? 1 + data[0] : capq::SseFramer::kDefaultMaxEventBytes;
  uint32_t seed = data[1] * 2654435761u + 1;
  const std::string_view stream(reinterpret_cast<const char*>(data + 2), size - 2);

  capq::SseFramer whole(cap);
  std::vector<capq::SseEvent> want;
  whole.Feed(stream, 1, &want);
  whole.Finish(2, &want);

  capq::SseFramer split(cap);
  std::vector<capq::SseEvent> got;
  size_t off = 0;
  while (off < stream.size()) {
    seed = seed * 1103515245u + 12345u;
    const size_t n = 1 + (seed >> 16) % 17;
    split.Feed(stream.substr(off, n), 1, &got);
    off += n;
  }
  split.Finish(2, &got);

  Check(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Check(got[i].data == want[i].data);
    Check(got[i].truncated == want[i].truncated);
    Check(got[i].data.size() <= cap);
  }
  Check(split.comments() == whole.comments());
  Check(split.overflowed() == whole.overflowed());
  Check(split.unterminated_events() == whole.unterminated_events());
  Check(split.bytes() == static_cast<int64_t>(stream.size()));
  return 0;
}

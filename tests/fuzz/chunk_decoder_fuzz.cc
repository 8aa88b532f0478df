// Fuzzes the decoder and the raw-record JSON: arbitrary server bytes, framed as SSE, must decode
// without crashing, and every artifact built from them must serialize (nlohmann::json throws on
// invalid UTF-8 when dumping) and round-trip byte for byte.
// Input: byte 0 = HTTP status selector, rest = the response body as streamed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/sse.h"

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  capq::RawRecord r;
  r.id = "m0";
  r.intended_send_ns = 100;
  r.actual_send_ns = 200;
  r.first_byte_ns = 300;
  r.first_body_ns = 300;
  r.http_status = data[0] < 200 ? 200 : data[0];
  r.content_type = "text/event-stream";
  capq::SseFramer framer(4096);
  for (size_t off = 0; off < body.size(); off += 7) {
    framer.Feed(body.substr(off, 7), 400 + static_cast<int64_t>(off), &r.events);
  }
  framer.Finish(100000, &r.events);
  r.end_ns = 100001;
  r.sse_overflow = framer.overflowed();
  r.sse_unterminated = framer.unterminated_events();
  if (data[0] & 1) r.body = std::string(body);  // a non-SSE body with the same bytes
  r.body_bytes = static_cast<int64_t>(body.size());

  const capq::RequestResult d = capq::DecodeRecord(r);
  Check(d.output_utf8_bytes == static_cast<int64_t>(d.output_text.size()));
  Check(d.nonempty_chunks <= d.chunks);
  Check(d.output_sha256.size() == 64);
  if (d.ttft_ns) Check(*d.ttft_ns >= 0);
  (void)capq::RequestResultToJson(d).dump();

  const std::string line = capq::RawRecordToJson(r).dump();
  auto back = capq::RawRecordFromJson(nlohmann::json::parse(line));
  Check(back.ok());
  Check(back->events.size() == r.events.size());
  for (size_t i = 0; i < r.events.size(); ++i) Check(back->events[i].data == r.events[i].data);
  Check(back->body == r.body);
  return 0;
}

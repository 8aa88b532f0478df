// Server-sent events framing for the load generator's hot path.
//
// The framer turns response bytes into events and stamps each event with the arrival time of the
// read that completed it. It parses no JSON: decoding happens after the trial (decode.h), so the
// write callback stays cheap and the timestamps stay close to the socket.
//
// Thread safety: none; one framer per response, used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "capq/clock.h"

namespace capq {

struct SseEvent {
  // Arrival of the read that held the event's terminating blank line (the moment a client could
  // act on the event), not of its first byte.
  MonoNs arrival_ns = 0;
  // The event's data lines joined by '\n' (the SSE spec's data buffer without its final '\n').
  std::string data;
  // The data exceeded the framer's cap; `data` holds the first max_event_bytes bytes only.
  bool truncated = false;
  // When the load generator's event loop woke for the batch of readable sockets that held that
  // read (<= arrival_ns; 0 = not known, e.g. evidence written before it was kept). See loadgen.h.
  MonoNs wake_ns = 0;
  // The kernel's receive stamp of the newest byte that read took, where the load generator proved
  // it covers them all (<= arrival_ns; 0 = not proven or not known). See loadgen.h.
  MonoNs kernel_ns = 0;
  // The event's arrival as the metrics count it: the kernel's stamp where there is one, else the
  // read's own clock.
  MonoNs stamp_ns() const {
    return kernel_ns > 0 && kernel_ns <= arrival_ns ? kernel_ns : arrival_ns;
  }
};

class SseFramer {
 public:
  // Large enough for any real chunk (a usage chunk is < 1 KiB; a 1,024-token delta < 16 KiB) while
  // bounding memory when a server streams one endless line.
  static constexpr size_t kDefaultMaxEventBytes = 4u << 20;

  explicit SseFramer(size_t max_event_bytes = kDefaultMaxEventBytes);

  // Appends every event completed by `bytes` to *out. Lines may end in CRLF, LF or CR, and a line,
  // a line ending (CR | LF) or an event may be split across calls at any byte. Comment lines
  // (":...", the usual keep-alive) are dropped and counted; "data:x" and "data: x" are the same;
  // "event", "id" and "retry" fields and unknown fields are ignored. An event whose lines carried
  // no data field is not emitted (SSE spec). REQUIRES: out != nullptr.
  void Feed(std::string_view bytes, MonoNs arrival_ns, std::vector<SseEvent>* out);

  // End of stream: an event still open (data seen, no blank line yet) is emitted with time `t`
  // and counted in unterminated_events(). A partial last line is processed as if terminated.
  void Finish(MonoNs t, std::vector<SseEvent>* out);

  int64_t comments() const { return comments_; }   // comment / keep-alive lines dropped
  bool overflowed() const { return overflowed_; }  // some event or line hit the cap
  int64_t events() const { return events_; }       // events emitted so far
  int64_t unterminated_events() const { return unterminated_; }  // emitted by Finish()
  int64_t bytes() const { return bytes_; }                       // bytes fed so far

 private:
  void ProcessLine(std::string_view line, MonoNs arrival_ns, std::vector<SseEvent>* out);
  size_t LineRoom() const;
  void Dispatch(MonoNs arrival_ns, std::vector<SseEvent>* out);

  size_t max_event_bytes_;
  std::string line_;  // a line split across Feed() calls
  bool line_truncated_ = false;
  bool skip_lf_ = false;  // the previous call ended in CR: a leading LF completes that CRLF
  std::string data_;      // the open event's data buffer
  bool has_data_ = false;
  bool data_truncated_ = false;
  int64_t comments_ = 0;
  bool overflowed_ = false;
  int64_t events_ = 0;
  int64_t unterminated_ = 0;
  int64_t bytes_ = 0;
};

}  // namespace capq

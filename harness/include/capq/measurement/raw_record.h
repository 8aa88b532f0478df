// One request's raw record: what the load generator saw of it, bytes and times, nothing parsed.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/sse.h"
#include "capq/status.h"

namespace capq {

enum class Phase { kWarmup, kMeasured };
const char* PhaseName(Phase p);  // "warmup", "measured"

struct RawRecord {
  std::string id;
  Phase phase = Phase::kMeasured;
  int index = 0;
  // Closed loop: the intended send time is the completion time of the request whose slot this one
  // takes, or the burst start for the first C. actual - intended is the scheduling lag.
  MonoNs intended_send_ns = 0;
  MonoNs actual_send_ns = 0;  // 0 = never sent (run cancelled first)
  MonoNs first_byte_ns = 0;   // first response byte (status line); 0 = none
  MonoNs first_body_ns = 0;   // first body byte; 0 = none
  MonoNs end_ns = 0;          // transfer done, failed or cut
  MonoNs last_byte_ns = 0;    // the latest response byte (header or body); 0 = none
  long http_status = 0;       // 0 = no response
  std::string content_type;
  std::vector<std::string> response_headers;  // raw header lines of the final response, no CRLF
  std::vector<SseEvent> events;               // when the response is text/event-stream
  std::string body;  // non-SSE response bytes (errors, non-streaming), capped
  bool body_truncated = false;
  int64_t body_bytes = 0;       // every body byte received, SSE or not
  std::string transport_error;  // curl's text, "" if none
  bool timed_out = false;
  bool cancelled = false;  // did not complete normally (timeout, cut, interrupt, not sent)
  int64_t sse_comments = 0;
  bool sse_overflow = false;
  int64_t sse_unterminated = 0;    // events the stream ended in the middle of
  bool reused_connection = false;  // sent on a kept-alive connection
  // Cut by the harness's stall bound: no byte for longer than LoadSpec::stall_timeout_s. A server
  // failure (the server stopped sending), unlike cancelled_by_harness.
  bool stalled = false;
  // Why the harness, not the server, cut this request or never sent it: "fail_fast after m12".
  // "" = it ran to its own end (or was cut by an interrupt, which transport_error says).
  std::string cancelled_by_harness;
  // The body as sent when it was built at release (a session turn: the conversation so far);
  // "" = the planned body, which plan.json holds.
  std::string request_body;
};

// Raw records as JSON lines. Event data and bodies that are valid UTF-8 are written as strings;
// anything else as {"b64": "..."} so the bytes survive exactly. FromJson returns InvalidArgument
// naming the missing or mistyped key.
nlohmann::json RawRecordToJson(const RawRecord& r);
Result<RawRecord> RawRecordFromJson(const nlohmann::json& j);

}  // namespace capq

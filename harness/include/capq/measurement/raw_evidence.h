// A trial's raw evidence file, raw.jsonl or raw.jsonl.zst (evidence_log.h), schema capq/raw/v2:
// written while the load runs, so that no stream's events are ever held together in memory.
//
//   {"schema":"capq/raw/v2", ...}                           the first line
//   {"sent":"m17","t":NS}                                   a request was sent (actual send time)
//   {"ev":"m17","t":NS,"w":NS,"data":"..."}                 one SSE event, as it arrived: "t" the
//                                                           read's own stamp, "w" the loop's wake
//                                                           (loadgen.h); data {"b64": ...} when
//                                                           not UTF-8; "truncated": true if cut
//   {"record":{...}}                                        the request ended: its own facts
//                                                           (RawRecordToJson without "events");
//                                                           "request_body" when its body was
//                                                           built at release (a session turn)
//   {"end":{...}}                                           the last line: the load's times and
//                                                           fail-fast header
//
// A file without its "end" line is a trial that did not finish (killed): every request whose
// "record" line is there is whole. Schema capq/raw/v1 (a header, then one line per request with
// its events) is read too.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "capq/status.h"

namespace capq {

inline constexpr const char* kRawSchemaV2 = "capq/raw/v2";

std::string RawSentLine(const std::string& id, MonoNs actual_send_ns);
std::string RawEventLine(const std::string& id, const SseEvent& ev);
std::string RawRecordLine(const RawRecord& r);  // r.events are not written
// An "ev" line's event; InvalidArgument naming the missing or mistyped key.
Result<SseEvent> RawEventFromJson(const nlohmann::json& j);
// An "ev" line read in place, without a generic parse, when it is laid out exactly as
// RawEventLine writes it (its keys in its order, no whitespace, data a string): true with the
// request's id and the event, which are then what parsing the line and RawEventFromJson give.
// False for any other line, well-formed or not: the generic parse reads those and names what is
// wrong. `id` and `ev` are overwritten (their buffers reused from line to line).
bool ParseRawEventLine(std::string_view line, std::string* id, SseEvent* ev);

struct RawEvidenceSummary {
  nlohmann::json header;   // the first line
  nlohmann::json end;      // the "end" object; null when the file has none
  std::string cut;         // the file ended early (evidence_log.h); "" = it ended cleanly
  int64_t records = 0;     // requests with a "record" line
  int64_t unfinished = 0;  // requests sent (or with events) and no "record" line
};

// Reads `path` in one pass, decoding every stream as its events come, and calls `on_record` for
// each request whose record ends (in file order). Memory: the decoders of the requests in flight
// at that point of the file. A malformed line is an error naming path:line.
using RawRecordFn = std::function<void(RawRecord&& meta, RequestResult&& decoded)>;
// With keep_events, each record handed over has its events put back (memory then grows with them).
Result<RawEvidenceSummary> ReadRawEvidence(const std::string& path, const RawRecordFn& on_record,
                                           bool keep_events = false);

// Every record with its events, in file order, and the summary: for tools and tests.
struct RawEvidenceFile {
  RawEvidenceSummary summary;
  std::vector<RawRecord> records;
};
Result<RawEvidenceFile> ReadRawRecords(const std::string& path);

}  // namespace capq

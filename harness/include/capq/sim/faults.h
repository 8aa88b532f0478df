// Fault injection for the simulated server: a broken server on purpose, so that every correctness
// gate of capq has something that trips it.
//
// ## Faults file format (YAML; JSON is YAML too)
//
//   seed: 7                     # optional (default 1): seeds every `probability` draw
//   faults:                     # a list of rules; every rule that matches a request applies to it
//     - kind: http_status       # required: one of the kinds below
//       status: 503             #   http_status only: 500, 429 or 503 (default 500)
//       requests: [0, 2]        # selector: chat requests by arrival index (0-based) ...
//     - kind: error_frame
//       after_tokens: 5         #   mid-stream faults: act once this many output tokens were sent
//       prompt_contains: "boom" # ... or: the conversation's text contains this substring ...
//     - kind: cut_connection
//       after_tokens: 3
//       probability: 0.25       # ... or: each request independently with this probability
//       from_request: 10        #   optional with any selector: only requests with index >= this
//     - kind: health_503_for_s
//       seconds: 2.0
//
// A request's index counts every POST /v1/chat/completions the server received, in arrival order
// from 0, including rejected ones. The prompt text is every message's content joined by newlines.
// Selectors: `requests` (a list of indices, or one integer), `prompt_contains`, `probability`; a
// rule with several selectors needs all of them; a rule with none matches every request. The draw
// for `probability` is a hash of (seed, rule position, request index), so a given file and request
// order always fault the same requests, whatever the timing. When two matching rules have the same
// kind, the first one in the file wins.
//
// Kinds (times are virtual: they scale with --time-scale like everything the server reports):
//   http_status       answer `status` (500|429|503) with a JSON error before any stream byte
//   error_frame       after `after_tokens` tokens send a `data: {"error":{...}}` frame, then
//                     `data: [DONE]`, and end the stream (no finish chunk, no usage)
//   cut_connection    after `after_tokens` tokens close the TCP connection (no terminating chunk,
//                     no [DONE])
//   missing_done      end the stream normally but without `data: [DONE]`
//   malformed_json    after `after_tokens` tokens send one frame whose JSON is truncated,
//                     then carry on
//   usage_off_by      report usage.completion_tokens (and total_tokens) off by `n` (may be
//                     negative)
//   early_stop        stop after `after_tokens` tokens with finish_reason "stop", even with
//                     ignore_eos
//   empty_deltas      every content delta is "" (usage still counts the tokens)
//   duplicate_output  the output text is that of the prompt `same_as` (default: one fixed text
//                     shared by every request this rule matches)
//   slow_first_byte   hold the request `delay_ms` virtual milliseconds before anything happens
//   stall             after `after_tokens` tokens send nothing more and keep the connection open
//   hollow_usage      send the content chunk of every other token only (tokens 1, 3, 5... carry
//                     no chunk at all); usage still counts every token
//   truncate_prompt   keep only the last quarter of the templated prompt: the engine prefills
//                     that, and usage.prompt_tokens reports it
//   wrong_model       every chunk names the model "capq-sim-other-model"
//   several_choices   the content chunk holding token `after_tokens` (default 1) carries a second
//                     choice (index 1, empty delta)
//   wrong_index       the content chunk holding token `after_tokens` (default 1) names choice
//                     index 1
//   data_after_done   one more content-free chunk after `data: [DONE]`
//   second_done       `data: [DONE]` twice
//   sse_fields        every event carries `id:` and `event: message` lines before its data and a
//                     `retry:` line after it (valid SSE: capq must read the data alone)
//   keepalive_comments a `: ping` comment line before every event (valid SSE)
//   usage_every_chunk every content chunk carries the running usage object (continuous usage
//                     stats, valid: the last usage is the total)
//   split_utf8        the content chunk holding token `after_tokens` (default 1) ends its word with
//                     "é" (two bytes; the word count stays) and its event goes out as two HTTP
//                     chunks split between those bytes (valid: only the event is whole JSON)
//   no_prompt_details usage has no prompt_tokens_details (valid: cache hits then come from
//                     /metrics)
//   null_prompt_details usage has "prompt_tokens_details": null (valid, as above)
//   json_error_200    answer HTTP 200 with a JSON error body (application/json) instead of a
//                     stream
//   gzip              the stream's body is gzip-coded (Content-Encoding: gzip), whatever the
//                     request's Accept-Encoding; each event is compressed and sync-flushed on its
//                     own, so it still leaves whole and on time (valid for a client that decodes
//                     what it reads)
//   close_delimited   the stream's answer has neither Transfer-Encoding: chunked nor
//                     Content-Length (an HTTP/1.0 status line and Connection: close): its body ends
//                     when the server closes the connection (RFC 9112 section 6.3, rule 8). Valid
//                     as such; with cut_connection the close that cuts the stream looks to the
//                     client like the body's normal end, and only the missing [DONE] tells
//   lying_flush       the flush call answers success but keeps the cache (server-wide; selectors
//                     are ignored)
//   health_503_for_s  the health endpoint answers 503 for the first `seconds` virtual seconds after
//                     start (server-wide; selectors are ignored)
// Non-streaming requests: error_frame answers HTTP 500 JSON; cut_connection closes without a
// response; stall never answers; malformed_json sends a truncated JSON body; missing_done does
// nothing. Of the stream-shape kinds, truncate_prompt, no_prompt_details, null_prompt_details and
// json_error_200 act on non-streaming answers too; the others only on streams.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "capq/status.h"

namespace capq::sim {

enum class FaultKind {
  kHttpStatus,
  kErrorFrame,
  kCutConnection,
  kMissingDone,
  kMalformedJson,
  kUsageOffBy,
  kEarlyStop,
  kEmptyDeltas,
  kDuplicateOutput,
  kSlowFirstByte,
  kStall,
  kHollowUsage,
  kTruncatePrompt,
  kWrongModel,
  kSeveralChoices,
  kWrongIndex,
  kDataAfterDone,
  kSecondDone,
  kSseFields,
  kKeepaliveComments,
  kUsageEveryChunk,
  kNoPromptDetails,
  kNullPromptDetails,
  kJsonError200,
  kSplitUtf8,
  kGzip,
  kCloseDelimited,
  kLyingFlush,
  kHealth503ForS,
};

const char* FaultKindName(FaultKind kind);  // the `kind:` spelling, e.g. "http_status"

struct FaultRule {
  FaultKind kind = FaultKind::kHttpStatus;
  // Selectors.
  std::vector<int64_t> requests;  // empty = any index
  std::string prompt_contains;    // empty = any prompt
  std::optional<double> probability;
  int64_t from_request = 0;
  // Parameters.
  int status = 500;
  int64_t after_tokens = 1;
  int64_t n = 1;
  std::optional<std::string> same_as;
  double delay_ms = 0;
  double seconds = 0;
};

// What one chat request suffers; all-empty means a healthy request.
struct RequestFaults {
  std::optional<int> http_status;
  std::optional<int64_t> error_frame_after;
  std::optional<int64_t> cut_after;
  bool missing_done = false;
  std::optional<int64_t> malformed_after;
  int64_t usage_off_by = 0;
  std::optional<int64_t> early_stop_after;
  bool empty_deltas = false;
  std::optional<std::string> duplicate_of;  // prompt text whose output this request copies
  double slow_first_byte_ms = 0;
  std::optional<int64_t> stall_after;
  bool hollow_usage = false;
  bool truncate_prompt = false;
  bool wrong_model = false;
  std::optional<int64_t> several_choices_at;  // the token whose chunk carries a second choice
  std::optional<int64_t> wrong_index_at;      // the token whose chunk names choice index 1
  bool data_after_done = false;
  bool second_done = false;
  bool sse_fields = false;
  bool keepalive_comments = false;
  bool usage_every_chunk = false;
  bool no_prompt_details = false;
  bool null_prompt_details = false;
  bool json_error_200 = false;
  std::optional<int64_t> split_utf8_at;  // the token whose word ends with a split two-byte "é"
  bool gzip = false;
  bool close_delimited = false;

  bool any() const;
};

class FaultPlan {
 public:
  FaultPlan() = default;  // no faults
  // Errors name the file, the rule index and the key.
  static Result<FaultPlan> Load(const std::string& path);
  static Result<FaultPlan> Parse(const std::string& text, const std::string& source);

  RequestFaults ForRequest(int64_t request_index, const std::string& prompt_text) const;
  bool lying_flush() const { return lying_flush_; }
  double health_503_for_s() const { return health_503_for_s_; }
  const std::vector<FaultRule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }

 private:
  uint64_t seed_ = 1;
  std::vector<FaultRule> rules_;
  bool lying_flush_ = false;
  double health_503_for_s_ = 0;
};

}  // namespace capq::sim

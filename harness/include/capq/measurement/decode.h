// Decoding raw records into per-request results, after the trial (never on the hot path).
//
// Understands the OpenAI-compatible chunk shapes of SGLang, vLLM, llama.cpp and the simulator:
// delta.content, delta.reasoning_content and delta.reasoning count as generated text; a chunk
// with "choices": [] and "usage" is the usage chunk; {"error": {...}} frames are errors;
// "data: [DONE]" ends the stream. Anything the decoder does not understand is reported in
// `errors`, in words, and never silently skipped.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/raw_record.h"
#include "capq/measurement/text_digest.h"

namespace capq {

struct RequestResult {
  std::string id;
  Phase phase = Phase::kMeasured;
  int index = 0;
  long http_status = 0;
  bool cancelled = false;
  bool timed_out = false;
  bool stalled = false;              // RawRecord::stalled: the server stopped sending
  std::string cancelled_by_harness;  // RawRecord::cancelled_by_harness: not the server's doing
  std::string transport_error;
  MonoNs start_ns = 0;  // actual send
  MonoNs end_ns = 0;
  // Relative to start_ns. TTFT = first chunk with non-empty content or reasoning text.
  std::optional<int64_t> ttft_ns, ttfb_ns, first_event_ns, e2e_ns;
  // When the load generator read the event that carried the first text (its arrival stamp, not
  // the TTFT's stamp): what an early decision knew at a given moment (early_decision.h). 0 = none.
  MonoNs first_token_arrival_ns = 0;
  // Server usage. cached: usage.prompt_tokens_details.cached_tokens, else llama.cpp
  // timings.cache_n.
  std::optional<int64_t> prompt_tokens, completion_tokens, cached_tokens;
  std::string finish_reason;  // the last non-null finish_reason seen; "" = none
  bool saw_done = false;      // "data: [DONE]" arrived
  int64_t chunks = 0;         // decoded chunk frames (usage and role chunks included)
  int64_t nonempty_chunks = 0;
  // Wall milliseconds between consecutive chunks with text: all a stream's timing needs beyond the
  // fields above (four bytes a chunk, where the chunk itself may be a few hundred). Empty when the
  // decoder kept facts only (StreamDecoder::Keep): the trial reads them back from the evidence.
  std::vector<float> text_gaps_ms;
  int64_t output_utf8_bytes = 0;
  int64_t content_bytes = 0, reasoning_bytes = 0;
  bool output_valid_utf8 = true;
  std::string
      output_sha256;  // lowercase hex of the concatenated text (reasoning and content, in order)
  // That text, when the decoder kept it (StreamDecoder::Keep): the load's recorder does not, and
  // the re-count reads the texts back from the raw evidence after the load.
  std::string output_text;
  // Its delta.content part alone (what a conversation sends back as the assistant's message),
  // kept with output_text.
  std::string content_text;
  std::string content_sha256;  // lowercase hex of the delta.content text alone
  // Every distinct "model" the chunks named, in order of first appearance ("" for a chunk that
  // named none).
  std::vector<std::string> models;
  std::vector<std::string>
      errors;                    // malformed JSON frames, error frames, missing usage... in words
  MonoNs scheduling_lag_ns = 0;  // actual - intended send
  // A body built when it was sent (RawRecord::request_body, a session's later turn): each of its
  // messages as "role:sha256-of-content", in order; empty for a planned body. The body's
  // content is in the evidence; these are what the session_history gate compares.
  std::vector<std::string> sent_messages;
  std::string sent_messages_error;  // the body could not be read as a chat ("" = it could)
};

// Open loop: every latency of `r` counted from when it should have been sent, not when it was
// (coordinated omission, as wrk2 corrects it): start_ns moves back by scheduling_lag_ns and TTFB,
// first event, TTFT and E2E grow by it. scheduling_lag_ns stays, so the lateness stays visible.
void CountFromIntendedSend(RequestResult* r);

// Decodes one stream event by event, so that nothing needs a stream's events held together:
// construct it with the send time, Feed() each event as it arrives, Finish() with the finished
// record (whose `events` it does not read). Thread safety: none; one decoder per stream.
class StreamDecoder {
 public:
  // What it keeps beyond the stream's facts. kAll: its text (output_text) and chunk gaps
  // (text_gaps_ms). kFacts: neither, so that a stream in flight holds a few hundred bytes however
  // long it runs; the text's size, UTF-8 check and SHA-256 are taken as it arrives
  // (text_digest.h), and every other field is the same as with kAll.
  enum class Keep { kAll, kFacts };
  explicit StreamDecoder(MonoNs start_ns, Keep keep = Keep::kAll);
  void Feed(const SseEvent& ev);
  RequestResult Finish(const RawRecord& r);
  // The stream's TTFT so far (relative to the send), once its first text arrived.
  std::optional<int64_t> ttft_ns() const { return out_.ttft_ns; }
  MonoNs first_token_arrival_ns() const { return out_.first_token_arrival_ns; }

 private:
  std::string Where(MonoNs arrival_ns) const;  // "event #3 at +41.000 ms"
  // A plain chunk read in place (chunk_scan.h): false, and nothing taken, when it is not one.
  bool FeedScanned(std::string_view data, int64_t* text_bytes);
  // Any event, parsed generically: false when it is no chunk (malformed, an error frame).
  bool FeedParsed(const SseEvent& ev, MonoNs t, int64_t* text_bytes);
  int64_t FeedChoices(const nlohmann::json& j, MonoNs arrival_ns);
  void FeedUsage(const nlohmann::json& j);
  void NoteModel(std::string_view named);
  void AppendText(std::string_view s, bool content);

  RequestResult out_;
  MonoNs start_ns_;
  MonoNs last_text_ns_ = 0;
  size_t events_ = 0;
  bool usage_seen_ = false;
  Keep keep_;
  TextDigest digest_;
  TextDigest content_digest_;  // delta.content alone
  std::string text_;           // kAll only
  std::string content_;        // kAll only: the delta.content part of text_
  std::vector<std::string> event_errors_;
};

// A whole record at once: a StreamDecoder over r.events.
RequestResult DecodeRecord(const RawRecord& r);

// results.jsonl line: everything above except `text_gaps_ms`, `output_text` and `content_text`.
nlohmann::json RequestResultToJson(const RequestResult& r);

// Lowercase hex SHA-256 of `bytes` (also used for prompt hashes).
std::string Sha256Hex(std::string_view bytes);
// Lowercase hex of raw bytes (a digest): what Sha256Hex returns for the digest it computed.
std::string LowerHex(std::string_view bytes);

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing past U+10FFFF).
bool IsValidUtf8(std::string_view s);

}  // namespace capq

// The correctness validator: proves that token counters represented text (seed, Part III).
// Every gate reports counts and the offending request ids in words; a gate the row switched off is
// reported with enabled = false and the row's reason; a gate that cannot be checked fails closed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/model/row.h"

namespace capq {

// Gate names, in report order.
inline constexpr const char* kGateNames[] = {
    "expected_record_count",   "status_200",      "no_cancellations", "zero_errors",
    "exact_completion_tokens", "finish_reason",   "nonempty_deltas",  "unique_prompts",
    "unique_outputs",          "warmup_disjoint", "verify_cold",      "cache_reuse",
    "session_history",         "text_recount",    "prompt_tokens",    "model_name"};

struct GateResult {
  std::string name;
  bool enabled = true;
  bool passed = false;
  std::string
      evidence;  // "3 of 64 streams ended with finish_reason 'stop' (want 'length'): m17, ..."
  std::vector<std::string> offending_ids;
  // A capacity gate (cache_reuse): its failure says the server could not serve the row as declared
  // at this load (its cache ran out, or was off), not that a stream was broken. It fails the
  // trial's latency side, like an SLO gate, and takes no part in CorrectnessReport::passed().
  bool capacity = false;
};

struct CorrectnessTotals {
  int64_t streams = 0;  // measured results
  int64_t completion_tokens = 0;
  int64_t nonempty_chunks = 0;
  int64_t utf8_bytes = 0;
  int64_t unique_output_hashes = 0;
  int64_t warmup_prompts = 0;
  int64_t measured_prompts = 0;
};

struct CorrectnessReport {
  std::vector<GateResult> gates;  // one per name in kGateNames, in that order
  CorrectnessTotals totals;
  bool passed() const;                                    // every enabled gate passed
  const GateResult* Find(const std::string& name) const;  // nullptr if absent
};

struct ValidationInput {
  const Row* row = nullptr;  // REQUIRES: non-null
  LoadLevel level = 1;
  std::vector<RequestResult> warmup, measured;
  // SHA-256 of each prompt, in plan order: hash i belongs to the request with index i of its phase.
  std::vector<std::string> warmup_prompt_hashes, measured_prompt_hashes;
  int expected_measured = 0;  // row->measured.RequestsAt(level)
  // Cached prompt tokens every prompt may show while cold: the chat template's shared leading
  // tokens, measured per server.
  int64_t cold_prefix_tokens_allowed = 0;
  // The server reports a cache counter at all (per-request usage, or /metrics counters below).
  bool cold_counter_available = false;
  // Cache-hit prompt tokens from the server's /metrics over the measured phase; used when usage
  // carries no per-request counter. Compared against cold_prefix_tokens_allowed × measured count.
  std::optional<int64_t> server_cached_tokens_total;
  // Requests whose prefills that counter covers, when more than the measured ones (the window
  // opened before the warm-up); each may hit the shared template prefix once.
  int64_t server_cached_window_requests = 0;
  // The engine adapter's advice when a flushed server still shows cached prompts (the server flag
  // that makes its flush complete); appended to a verify_cold failure. Empty: none.
  std::string cold_hint;
  // The engine adapter's explanation of requests served fewer cached tokens than declared
  // (Target::MissHint); with one, cache_reuse reports such misses and the hit ratio decides.
  std::string miss_hint;
  // How streams without a cached-token count were read, and the source (shown with verify_cold's
  // evidence); the launch setting that makes the engine report a count (shown when none did).
  std::string counter_note;
  std::string counter_hint;
  // The engine reports no counter and has no flush (engine openai): with no counter anywhere,
  // verify_cold passes on prompt uniqueness and says that is all it rests on.
  bool cold_by_unique_prompts = false;
  // Completion tokens each measured request asked for, by id; when absent for an id the row's
  // workload.output_tokens is the expectation.
  std::map<std::string, int64_t> expected_completion_tokens;

  // text_recount: the server's tokenizer's count of each measured stream's text, by id (absent:
  // not re-counted), how it was counted, or why it could not be ("" when it could).
  std::map<std::string, int64_t> recounted_tokens;
  std::string recount_method;
  std::string recount_unavailable;

  // prompt_tokens: what usage.prompt_tokens must be, by id (planned message tokens + the template
  // overhead measured on the server), and the tolerance in tokens; empty with
  // `prompt_expectation_unavailable` saying why when the overhead could not be measured.
  std::map<std::string, int64_t> expected_prompt_tokens;
  int64_t prompt_tokens_tolerance = 4;
  std::string prompt_expectation_note;  // how the expectation was made, in words
  std::string prompt_expectation_unavailable;

  // model_name: the name every chunk must carry (the row's served_model_name as sent).
  std::string served_model_name;

  // cache_reuse (a row with prefix groups or sessions, row.h reuse()): the cached prompt tokens
  // the row declares for each measured request, by id (a prefix row's prefix, 0 for a unique
  // prompt or a session's first turn, the previous turn's prompt + completion tokens for a later
  // turn), and how far the served ones may stray. verify_cold then judges the unique prompts.
  bool reuse_row = false;
  std::map<std::string, int64_t> declared_cached_tokens;
  ReuseTolerance reuse_tolerance;
  // session_history (session rows): for each later turn, by id, the messages its body must have
  // carried, "role:sha256-of-content" in order: the plan's prompts of its session so far and the
  // text each earlier turn streamed (RequestResult::sent_messages is what it carried).
  bool session_row = false;
  std::map<std::string, std::vector<std::string>> expected_history;
};

CorrectnessReport Validate(const ValidationInput& in);

nlohmann::json CorrectnessToJson(const CorrectnessReport& r);

}  // namespace capq

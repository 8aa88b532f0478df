// The gates where the streamed text proves the server's counters (seed, Part III: "a broken
// endpoint could return usage fields without meaningful streamed deltas"): the server's own
// tokenizer re-counts the text, the prompt the server counted is the one that was planned, and
// the model that answered is the one the row pins.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "validator_internal.h"

namespace capq::validator_internal {

// No lower bound on a stream's chunks is assumed: every engine may put several tokens' text in
// one chunk. SGLang and vLLM do with --stream-interval N and for a speculative step's accepted
// tokens, vLLM's API server merges a request's pending outputs when it falls behind the engine
// (RequestOutputCollector, vllm/v1/engine/output_processor.py), that is under load, and llama.cpp
// holds back an incomplete UTF-8 sequence or a partial stop string (tools/server/
// server-context.cpp). A stream whose usage claims more tokens than its text holds is caught by
// the re-count alone; the chunks' token counts are shown as evidence.
GateResult TextRecount(const ValidationInput& in) {
  GateResult g = NewGate("text_recount");
  if (!in.recount_unavailable.empty()) {
    g.passed = false;
    g.evidence = "not re-counted (fail closed): " + in.recount_unavailable;
    return g;
  }
  const double tol = in.row->correctness.text_recount_tolerance_pct / 100.0;
  std::vector<std::string> off;
  int64_t worst_pct10 = 0;  // largest deviation seen, in tenths of a percent
  double most_per_chunk = 0;
  for (const RequestResult& r : in.measured) {
    if (!r.completion_tokens || *r.completion_tokens <= 0) continue;  // exact_completion_tokens
    const int64_t claimed = *r.completion_tokens;
    if (r.nonempty_chunks > 0) {
      most_per_chunk = std::max(
          most_per_chunk, static_cast<double>(claimed) / static_cast<double>(r.nonempty_chunks));
    }
    auto it = in.recounted_tokens.find(r.id);
    if (it == in.recounted_tokens.end()) {
      g.offending_ids.push_back(r.id);
      off.push_back(r.id + " (not re-counted)");
      continue;
    }
    // Both counts are >= 0, so their difference fits; its per-mille of a claim near 2^63 would
    // not, hence the floating point.
    const int64_t diff = std::llabs(it->second - claimed);
    const double per_mille = static_cast<double>(diff) * 1000.0 / static_cast<double>(claimed);
    worst_pct10 = std::max(worst_pct10, static_cast<int64_t>(std::min(per_mille, 1e15)));
    if (static_cast<double>(diff) > tol * static_cast<double>(claimed)) {
      g.offending_ids.push_back(r.id);
      off.push_back(r.id + " (usage says " + std::to_string(claimed) + ", the text re-counts to " +
                    std::to_string(it->second) + ")");
    }
  }
  char tol_words_buf[32];
  std::snprintf(tol_words_buf, sizeof tol_words_buf, "%g",
                in.row->correctness.text_recount_tolerance_pct);
  const std::string tol_words = tol_words_buf;
  if (!off.empty()) {
    g.passed = false;
    g.evidence = Of(off.size(), in.measured.size(),
                    "streams' text does not hold the tokens usage claims (tolerance ") +
                 tol_words + " %): " + Join(off);
    return g;
  }
  char per_chunk[32];
  std::snprintf(per_chunk, sizeof per_chunk, "%.1f", most_per_chunk);
  g.passed = !in.measured.empty();
  g.evidence = "every stream's text re-counts to its usage.completion_tokens within " + tol_words +
               " % (worst " + std::to_string(worst_pct10 / 10) + "." +
               std::to_string(worst_pct10 % 10) + " %), " + in.recount_method + "; at most " +
               per_chunk + " tokens per chunk with text";
  return g;
}

GateResult PromptTokens(const ValidationInput& in) {
  GateResult g = NewGate("prompt_tokens");
  if (!in.prompt_expectation_unavailable.empty()) {
    g.passed = false;
    g.evidence = "not checked (fail closed): " + in.prompt_expectation_unavailable;
    return g;
  }
  std::vector<std::string> off;
  int64_t lo = 0, hi = 0;
  bool any = false;
  for (const RequestResult& r : in.measured) {
    auto want = in.expected_prompt_tokens.find(r.id);
    // A stream without usage fails exact_completion_tokens and zero_errors already.
    if (want == in.expected_prompt_tokens.end() || !r.prompt_tokens) continue;
    const int64_t d = *r.prompt_tokens - want->second;
    lo = any ? std::min(lo, d) : d;
    hi = any ? std::max(hi, d) : d;
    any = true;
    if (std::llabs(d) > in.prompt_tokens_tolerance) {
      g.offending_ids.push_back(r.id);
      off.push_back(r.id + " (server counted " + std::to_string(*r.prompt_tokens) + ", planned " +
                    std::to_string(want->second) + ")");
    }
  }
  if (!off.empty()) {
    g.passed = false;
    g.evidence = Of(off.size(), in.measured.size(), "prompts were not prefilled as planned (") +
                 "tolerance " + std::to_string(in.prompt_tokens_tolerance) +
                 " tokens; a server that cuts prompts prefills fast): " + Join(off);
    return g;
  }
  g.passed = any;
  g.evidence = any ? "every usage.prompt_tokens is the planned length " +
                         std::string(lo < 0 ? "" : "+") + std::to_string(lo) + ".." +
                         (hi < 0 ? "" : "+") + std::to_string(hi) + " tokens (tolerance " +
                         std::to_string(in.prompt_tokens_tolerance) + "); " +
                         in.prompt_expectation_note
                   : "no measured request reported usage.prompt_tokens";
  return g;
}

GateResult ModelName(const ValidationInput& in) {
  GateResult g = NewGate("model_name");
  std::vector<std::string> off;
  for (const RequestResult& r : in.measured) {
    for (const std::string& m : r.models) {
      if (m == in.served_model_name) continue;
      g.offending_ids.push_back(r.id);
      off.push_back(r.id + " (" + (m.empty() ? std::string("a chunk named no model") : Quote(m)) +
                    ")");
      break;
    }
  }
  if (!off.empty()) {
    g.passed = false;
    g.evidence =
        Of(off.size(), in.measured.size(), "streams were answered by another model than ") +
        Quote(in.served_model_name) + ": " + Join(off);
    return g;
  }
  g.passed = !in.measured.empty();
  g.evidence = "every chunk of " + Of(in.measured.size(), in.measured.size(), "streams") +
               " named " + Quote(in.served_model_name);
  return g;
}

}  // namespace capq::validator_internal

#include "capq/sim/variations.h"

#include "capq/sim/tokenizer.h"

namespace capq::sim {
namespace {

// One independent draw per (seed, request, variation), in [0, n).
uint64_t Draw(uint64_t seed, int64_t index, uint64_t which, uint64_t n) {
  return Mix64(Mix64(seed, static_cast<uint64_t>(index)), which) % n;
}

}  // namespace

Result<VariationMode> ParseVariationMode(const std::string& name) {
  if (name == "dialect") return VariationMode::kDialect;
  if (name == "varied") return VariationMode::kVaried;
  return Status::InvalidArgument("unknown variation mode '" + name +
                                 "' (expected dialect or varied)");
}

StreamVariation DialectVariation(Dialect dialect, const engine::EngineProfile& profile) {
  StreamVariation v;
  v.tokens_per_chunk = profile.stream_interval;
  switch (dialect) {
    case Dialect::kSglang:
      // Every choice carries "matched_stop", no chunk but the last "usage" (recorded Qwen3.8);
      // a cold request's details are null, or always null without the cache report.
      v.merge_when_slow = true;
      v.cached_zero = CachedZero::kNull;
      v.integer_stop = true;
      break;
    case Dialect::kVllm:
      // The details only with --enable-prompt-tokens-details and only when something was cached.
      v.merge_when_slow = true;
      v.cached_zero = CachedZero::kAbsent;
      v.last_text_on_finish = true;
      v.integer_stop = true;
      break;
    case Dialect::kLlamacpp:
      // llama.cpp b9749 sends {"cached_tokens":0} (conformance/llamacpp/14) and one token per
      // chunk for ASCII text; its headers go out at slot start (dialect.h, llamacpp_stream).
      v.cached_zero = CachedZero::kObject;
      break;
  }
  return v;
}

StreamVariation DrawVariation(uint64_t seed, int64_t index) {
  StreamVariation v;
  v.tokens_per_chunk = 1 + static_cast<int>(Draw(seed, index, 1, 4));
  v.merge_when_slow = Draw(seed, index, 2, 2) == 1;
  v.cached_zero = static_cast<CachedZero>(Draw(seed, index, 3, 3));
  v.last_text_on_finish = Draw(seed, index, 4, 2) == 1;
  v.empty_finish_reason = Draw(seed, index, 5, 2) == 1;
  v.empty_id = Draw(seed, index, 6, 4) == 0;
  v.role_every_delta = Draw(seed, index, 7, 2) == 1;
  v.usage_key = static_cast<UsageKey>(Draw(seed, index, 8, 3));
  v.integer_stop = Draw(seed, index, 9, 2) == 1;
  v.keepalive_while_queued = Draw(seed, index, 10, 2) == 1;
  v.role_at_admission = Draw(seed, index, 11, 2) == 1;
  return v;
}

}  // namespace capq::sim

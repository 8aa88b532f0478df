#include <algorithm>

#include "trial_internal.h"

namespace capq::internal {

ColdPrefix EstimateColdPrefix(const TrialPlan& plan, const std::vector<RequestResult>& warmup,
                              const std::vector<RequestResult>& measured) {
  ColdPrefix c;
  std::map<std::string, int64_t> message_tokens;
  bool calibrated = plan.calibration == "tokenize";
  for (const auto* list : {&plan.warmup, &plan.measured}) {
    for (const auto& r : *list) message_tokens[r.id] = r.prompt.message_tokens;
  }
  for (const auto* list : {&warmup, &measured}) {
    for (const auto& r : *list) {
      if (r.cached_tokens) c.counter_available = true;
      if (calibrated && r.prompt_tokens && message_tokens.count(r.id)) {
        int64_t t = *r.prompt_tokens - message_tokens[r.id];
        if (t >= 0) c.template_tokens = c.template_tokens ? std::min(*c.template_tokens, t) : t;
      }
    }
  }
  // Warm-ups after the first: the cache holds at least one other prompt, so each shows exactly
  // the shared prefix when the cache started cold.
  for (const auto& r : warmup) {
    if (r.index == 0 || !r.cached_tokens || r.http_status != 200) continue;
    c.observed_tokens = std::max(c.observed_tokens.value_or(0), *r.cached_tokens);
  }
  if (c.observed_tokens) {
    c.source = "max cached_tokens of warm-up requests after the first";
  } else {
    // Too few warm-ups: the smallest count any measured request shows (distinct prompts share
    // no more than the template).
    for (const auto& r : measured) {
      if (!r.cached_tokens || r.http_status != 200) continue;
      c.observed_tokens = std::min(c.observed_tokens.value_or(*r.cached_tokens), *r.cached_tokens);
    }
    if (c.observed_tokens)
      c.source = "min cached_tokens of measured requests (fewer than 2 warm-ups)";
  }
  c.allowed_tokens = c.observed_tokens.value_or(0);
  if (c.template_tokens && c.allowed_tokens > *c.template_tokens) {
    c.allowed_tokens = *c.template_tokens;
    c.source += "; clamped to the chat template overhead " + std::to_string(*c.template_tokens) +
                " (the warm-up saw more: the cache was not cold)";
  }
  if (!c.counter_available) c.source = "the server reported no cached-token counter";
  return c;
}

nlohmann::json ColdPrefixToJson(const ColdPrefix& c) {
  nlohmann::json j = {{"allowed_tokens", c.allowed_tokens},
                      {"counter_available", c.counter_available},
                      {"source", c.source}};
  j["observed_tokens"] = c.observed_tokens ? nlohmann::json(*c.observed_tokens) : nullptr;
  j["template_tokens"] = c.template_tokens ? nlohmann::json(*c.template_tokens) : nullptr;
  return j;
}

ValidationInput MakeValidationInput(const Row& row, const TrialPlan& plan,
                                    std::vector<RequestResult> warmup,
                                    std::vector<RequestResult> measured, const ColdPrefix& cold,
                                    std::optional<int64_t> server_cached_tokens_total) {
  ValidationInput in;
  in.row = &row;
  in.concurrency = plan.concurrency;
  in.warmup = std::move(warmup);
  in.measured = std::move(measured);
  for (const auto& r : plan.warmup) in.warmup_prompt_hashes.push_back(r.prompt.sha256);
  for (const auto& r : plan.measured) {
    in.measured_prompt_hashes.push_back(r.prompt.sha256);
    in.expected_completion_tokens[r.id] = r.max_tokens;
  }
  in.expected_measured = plan.expected_measured;
  in.cold_prefix_tokens_allowed = cold.allowed_tokens;
  in.cold_counter_available = cold.counter_available || server_cached_tokens_total.has_value();
  in.server_cached_tokens_total = server_cached_tokens_total;
  return in;
}

}  // namespace capq::internal

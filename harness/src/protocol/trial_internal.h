// Pieces of the trial shared by RunTrial() and ValidateTrialDir(), so that `capq validate`
// re-derives the verdict with exactly the code that decided it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/validator.h"
#include "capq/model/plan.h"
#include "capq/model/row.h"

namespace capq::internal {

// The cached prompt tokens a cold server shows anyway: the chat template's shared leading tokens.
// Measured per server from the warm-up (after the first request, distinct prompts can only share
// the template's prefix) and clamped to the template overhead (server prompt_tokens minus the
// calibrated message length), so a cache that still holds old prompts cannot widen it.
struct ColdPrefix {
  int64_t allowed_tokens = 0;
  std::optional<int64_t> observed_tokens;  // from the requests
  std::optional<int64_t> template_tokens;  // prompt_tokens - message tokens (calibrated plans)
  bool counter_available = false;          // some request reported cached tokens
  std::string source;                      // in words
};
ColdPrefix EstimateColdPrefix(const TrialPlan& plan, const std::vector<RequestResult>& warmup,
                              const std::vector<RequestResult>& measured);
nlohmann::json ColdPrefixToJson(const ColdPrefix& c);

// Validator input for a decoded trial.
ValidationInput MakeValidationInput(const Row& row, const TrialPlan& plan,
                                    std::vector<RequestResult> warmup,
                                    std::vector<RequestResult> measured, const ColdPrefix& cold,
                                    std::optional<int64_t> server_cached_tokens_total);

}  // namespace capq::internal

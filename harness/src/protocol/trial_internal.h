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

// The cached prompt tokens a cold server shows anyway: the chat template's shared leading tokens,
// measured on the server itself (Target::MeasureTemplatePrefix, recorded in identity.json) and
// never taken from cache counters: a per-slot cache (llama.cpp) shows 0 on a fresh slot and the
// prefix on a used one, and a cache that still holds old prompts would widen any allowance
// learned from the requests.
struct ColdPrefix {
  int64_t allowed_tokens = 0;
  std::optional<int64_t> template_prefix_tokens;  // measured on the server
  std::optional<int64_t> template_tokens;    // prompt_tokens - message tokens (calibrated plans)
  std::optional<int64_t> max_cached_tokens;  // the most any measured request showed (evidence)
  bool counter_available = false;            // some request reported cached tokens
  std::string source;                        // in words
};
// `template_prefix`: the measured prefix, or nullopt when the server renders no template; then
// the whole template overhead (an upper bound on its shared prefix) is allowed where the plan was
// calibrated, else nothing (fail closed).
ColdPrefix EstimateColdPrefix(const TrialPlan& plan, const std::vector<RequestResult>& warmup,
                              const std::vector<RequestResult>& measured,
                              std::optional<int64_t> template_prefix);
nlohmann::json ColdPrefixToJson(const ColdPrefix& c);

// Validator input for a decoded trial.
ValidationInput MakeValidationInput(const Row& row, const TrialPlan& plan,
                                    std::vector<RequestResult> warmup,
                                    std::vector<RequestResult> measured, const ColdPrefix& cold,
                                    std::optional<int64_t> server_cached_tokens_total,
                                    std::string cold_hint);

// What identity.json recorded about coldness, for re-deriving the verdict from evidence alone.
struct ColdEvidence {
  std::optional<int64_t> template_prefix_tokens;
  std::optional<int64_t> server_cached_tokens_total;
  std::string cold_hint;
};
ColdEvidence ColdEvidenceFromIdentity(const nlohmann::json& identity);

}  // namespace capq::internal

// An early decision re-derived from the evidence alone: what the measured streams say was known at
// the moment the load stopped, asked of the same rule the load asked (early_decision.h). The trial
// and `capq validate` both take the decision only from here.
#include "capq/measurement/early_decision.h"
#include "capq/text.h"
#include "trial_internal.h"

namespace capq::internal {

std::optional<EarlyDecision> RederiveDecision(const Row& row, int level,
                                              const std::vector<RequestResult>& measured,
                                              MonoNs at_ns, MonoNs measured_start_ns,
                                              std::string* problem) {
  EarlyDecisionRules rules = EarlyDecisionRulesFor(row, level, false);
  if (!rules.enabled) {
    *problem =
        "the load stopped on an early decision, but the row allows none (" + rules.off_reason + ")";
    return std::nullopt;
  }
  std::optional<EarlyDecision> d =
      DecideEarly(rules, LiveLatencyAt(measured, at_ns), at_ns, measured_start_ns);
  if (!d) {
    *problem = "the load stopped on an early decision " +
               FormatFixed(NsToS(at_ns - measured_start_ns), 3) +
               " s into the measured phase, but the streams do not show every gate's pass "
               "ruled out by then";
  }
  return d;
}

nlohmann::json EarlyDecisionHeader(const EarlyDecisionRules& rules,
                                   const std::optional<EarlyDecision>& decided) {
  nlohmann::json j = {{"enabled", rules.enabled}, {"decided", nullptr}};
  if (!rules.enabled) j["off_reason"] = rules.off_reason;
  if (decided) j["decided"] = EarlyDecisionToJson(*decided);
  return j;
}

}  // namespace capq::internal

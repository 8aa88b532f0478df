// A gate beside the SLO that failed a trial's latency side, with its figures as data: an open-loop
// row's stability checks (stability.h) and a reuse row's served reuse (cache_reuse, a capacity
// gate: validator.h). The verdict's reasons carry its text; qualification and the report read the
// figures from here, never back out of that text.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "capq/measurement/validator.h"

namespace capq {

struct GateMiss {
  std::string gate;  // "schedule_held", "queue_bounded", "stationary" or "cache_reuse"
  // What the gate measured: "send lateness p99", "client in-flight", "server queue", an SLO gate
  // ("ttft p95") whose latency drifted; empty for cache_reuse.
  std::string subject;
  double value = NAN;  // the last third's figure, or the send lateness p99; NaN: not measured
  double bound = NAN;  // what `value` had to stay within; NaN where the check states none
  bool in_ms = false;  // value and bound are milliseconds (a latency drift, send lateness)
  // cache_reuse: the measured requests served outside their declared reuse, of `judged`.
  int off = 0, judged = 0;
  std::string text;  // the reason as the verdict words it: "queue_bounded: client in-flight ..."
  // The served reuse fails as a capacity gate, the others as stability gates.
  bool capacity() const { return gate == "cache_reuse"; }
};

// A failed capacity gate (GateResult::capacity) as a miss, over `judged` measured requests.
GateMiss CapacityMiss(const GateResult& g, int judged);

nlohmann::json GateMissesToJson(const std::vector<GateMiss>& misses);
// Throws nlohmann::json exceptions on a wrong type; a missing figure reads as NaN.
std::vector<GateMiss> GateMissesFromJson(const nlohmann::json& a);

}  // namespace capq

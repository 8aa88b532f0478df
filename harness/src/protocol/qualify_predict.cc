// Offline Cmax prediction for simulator rows: the locator's first guess, never evidence.
#include <cstdio>

#include "capq/protocol/qualify.h"
#include "capq/sim/predict.h"
#include "capq/sim/profile.h"

namespace capq {

std::optional<int> PredictCmax(const Row& row, int max_concurrency, std::string* note) {
  if (row.identity.engine != Engine::kSim || row.slo.empty() ||
      row.slo.front().metric != SloMetric::kTtft) {
    return std::nullopt;
  }
  Result<sim::EngineProfile> profile = sim::LoadProfile(row.identity.sim_profile);
  if (!profile.ok()) return std::nullopt;
  const SloGate& gate = row.slo.front();
  double last_pass_ms = 0;
  for (int c = 1; c <= max_concurrency; ++c) {
    sim::PredictOptions o;
    o.prompt_tokens = row.workload.input_tokens + profile->chat_template_tokens;
    o.output_tokens = row.workload.output_tokens;
    o.concurrency = c;
    o.measured_requests = row.measured.RequestsAt(c);
    o.warmup_requests = row.warmup.requests;
    o.warmup_concurrency = row.warmup.concurrency;
    Result<sim::PredictedTrial> t = sim::PredictTrial(*profile, o);
    if (!t.ok()) return std::nullopt;
    double ms = sim::TtftPercentileNs(t->measured, gate.percentile) / 1e6;
    if (!(ms < gate.below_ms)) {
      if (c == 1) return std::nullopt;
      if (note) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "engine model: p%g TTFT %.0f ms at C=%d, %.0f ms at C=%d",
                      gate.percentile, last_pass_ms, c - 1, ms, c);
        *note = buf;
      }
      return c - 1;
    }
    last_pass_ms = ms;
  }
  return std::nullopt;
}

}  // namespace capq

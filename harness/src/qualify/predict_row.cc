// A row's boundary through the engine model, from a profile or from a calibrated baseline.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "capq/engine/predict.h"
#include "capq/engine/profile.h"
#include "capq/measurement/metrics.h"
#include "capq/qualify/predict.h"
#include "capq/targets/engine_shape.h"
#include "capq/text.h"

namespace capq {
namespace {

double GateMs(const std::vector<engine::PredictedRequest>& requests, const SloGate& gate,
              PercentileMethod method) {
  std::vector<double> v;
  v.reserve(requests.size());
  for (const auto& r : requests) {
    switch (gate.metric) {
      case SloMetric::kTtft:
        v.push_back(static_cast<double>(r.ttft_ns()) / 1e6);
        break;
      case SloMetric::kItl:
        v.push_back(r.itl_ns() / 1e6);
        break;
      case SloMetric::kE2e:
        v.push_back(static_cast<double>(r.end_ns - r.submit_ns) / 1e6);
        break;
    }
  }
  return Percentile(std::move(v), gate.percentile, method);
}

// The predicted point at concurrency c: the first gate's value, and whether every gate holds.
Result<PredictedPoint> PointAt(const engine::EngineProfile& profile, const Row& row,
                               int64_t prompt_tokens, int c) {
  Result<engine::PredictedTrial> t =
      engine::PredictTrial(profile, RowTrialOptions(row, prompt_tokens, c));
  if (!t.ok()) return t.status();
  PredictedPoint p{c, GateMs(t->measured, row.slo.front(), row.percentile_method), true};
  for (const SloGate& g : row.slo) {
    if (!(GateMs(t->measured, g, row.percentile_method) < g.below_ms)) p.passes = false;
  }
  return p;
}

std::string GateName(const SloGate& g) {
  std::string m = SloMetricName(g.metric);
  for (char& ch : m) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return Fmt("p%g ", g.percentile) + m;
}

}  // namespace

engine::PredictOptions RowTrialOptions(const Row& row, int64_t prompt_tokens, int concurrency) {
  engine::PredictOptions o;
  o.prompt_tokens = prompt_tokens;
  o.output_tokens = row.workload.output_tokens;
  o.concurrency = concurrency;
  o.measured_requests = row.measured.RequestsAt(concurrency);
  o.warmup_requests = row.warmup.requests;
  o.warmup_concurrency = row.warmup.concurrency;
  return o;
}

Result<BoundaryPrediction> PredictBoundary(const engine::EngineProfile& profile, const Row& row,
                                           int64_t prompt_tokens, int max_level) {
  if (row.open_loop() || row.slo.empty()) {
    return Status::InvalidArgument("row " + row.id +
                                   ": the engine model predicts closed-loop rows with an SLO");
  }
  if (row.mix) {
    return Status::InvalidArgument("row " + row.id +
                                   " mixes request classes: the engine model predicts one shape");
  }
  if (row.reuse()) {
    return Status::InvalidArgument("row " + row.id +
                                   " declares cache reuse: the engine model predicts unique "
                                   "prompts, each prefilled whole");
  }
  BoundaryPrediction out;
  out.prompt_tokens = prompt_tokens;
  for (int c = 1; c <= max_level; ++c) {
    Result<PredictedPoint> p = PointAt(profile, row, prompt_tokens, c);
    if (!p.ok()) return p.status();
    out.curve.push_back(*p);
    if (p->passes) continue;
    const std::string gate = GateName(row.slo.front());
    if (c == 1) {
      out.note = "engine model: " + gate + Fmt(" %.0f ms already at C=1", p->gating_ms);
      return out;
    }
    out.cmax = c - 1;
    out.note = "engine model: " + gate + Fmt(" %.0f ms at C=", out.curve[c - 2].gating_ms) +
               std::to_string(c - 1) + Fmt(", %.0f ms at C=", p->gating_ms) + std::to_string(c);
    return out;
  }
  out.note = "engine model: every C up to " + std::to_string(max_level) + " passes";
  return out;
}

Result<BoundaryPrediction> PredictFromProfile(const Row& row, int max_level) {
  if (row.identity.engine != Engine::kSim) {
    return Status::InvalidArgument("row " + row.id + " is not a sim row: it has no engine profile");
  }
  Result<engine::EngineProfile> profile = engine::LoadProfile(row.identity.sim_profile);
  if (!profile.ok()) return profile.status();
  Result<BoundaryPrediction> p = PredictBoundary(
      *profile, row, row.workload.input_tokens + profile->chat_template_tokens, max_level);
  if (p.ok()) p->source = "engine profile " + profile->name;
  return p;
}

std::vector<SurfacePoint> PredictSurface(const Row& row, const RowPredictor& predict,
                                         const std::vector<int64_t>& input_tokens,
                                         const std::vector<int64_t>& output_tokens) {
  std::vector<SurfacePoint> out;
  for (int64_t in : input_tokens) {
    for (int64_t o : output_tokens) {
      Row shape = row;
      shape.workload.input_tokens = in;
      shape.workload.output_tokens = o;
      out.push_back(SurfacePoint{in, o, predict(shape)});
    }
  }
  return out;
}

std::vector<int64_t> GridAround(int64_t tokens, std::vector<double> factors) {
  std::vector<int64_t> out;
  for (double f : factors) {
    const int64_t v = std::max<int64_t>(1, std::llround(static_cast<double>(tokens) * f));
    if (out.empty() || out.back() != v) out.push_back(v);
  }
  return out;
}

}  // namespace capq

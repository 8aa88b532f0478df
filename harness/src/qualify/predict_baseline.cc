// A real server's boundary predicted from its C = 1 baseline: the server's limits give the engine
// model's shape, the baseline its costs (capq/engine/calibrate.h).
#include <string>
#include <vector>

#include "capq/qualify/predict.h"
#include "capq/targets/engine_limits.h"
#include "capq/targets/engine_shape.h"

namespace capq {

Result<MeasuredBaseline> BaselineFromTrial(const TrialSummary& trial, const Row& row) {
  const std::string where = "baseline trial " + (trial.dir.empty() ? "?" : trial.dir);
  if (trial.server_limits.empty()) {
    return Status::InvalidArgument(where + " recorded no server limits (server_info.json)");
  }
  if (!trial.has_metrics || trial.prompt_tokens_max <= 0) {
    return Status::InvalidArgument(where + " has no metrics with the server's prompt tokens");
  }
  MeasuredBaseline b;
  b.source = where;
  b.engine = LimitsEngine(row.identity);
  b.limits = trial.server_limits;
  b.input_tokens = row.workload.input_tokens;
  b.point.prompt_tokens = (trial.prompt_tokens_min + trial.prompt_tokens_max) / 2;
  b.point.output_tokens = row.workload.output_tokens;
  b.point.ttft_p50_ms = trial.ttft_ms.p50;
  b.point.itl_p50_ms = trial.itl_ms.p50;
  b.point.tokens_per_chunk = trial.tokens_per_chunk_mean;
  return b;
}

Result<MeasuredBaseline> BaselineFromRow(const Row& row) {
  const Baseline* e = row.expect.baseline ? &*row.expect.baseline : nullptr;
  if (!e || !e->ttft_p50_ms || !e->itl_p50_ms) {
    return Status::InvalidArgument("row " + row.id +
                                   " publishes no expect.baseline with both ttft_p50_ms and "
                                   "itl_p50_ms");
  }
  MeasuredBaseline b;
  b.source = "expect.baseline of " + row.id;
  b.engine = LimitsEngine(row.identity);
  b.limits = row.identity.server_expect;
  b.input_tokens = row.workload.input_tokens;
  b.point.prompt_tokens = e->prompt_tokens.value_or(row.workload.input_tokens);
  if (!e->prompt_tokens) {
    b.assumed.push_back("server prompt tokens = input_tokens (the baseline gives none)");
  }
  b.point.output_tokens = row.workload.output_tokens;
  b.point.ttft_p50_ms = *e->ttft_p50_ms;
  b.point.itl_p50_ms = *e->itl_p50_ms;
  return b;
}

MeasuredLoad LoadFromTrial(const TrialSummary& probe, const Row& row) {
  MeasuredLoad l;
  l.source = "the probe at C=" + std::to_string(probe.level);
  l.concurrency = probe.level;
  if (!probe.has_metrics) return l;
  auto figure = [](const Distribution& d, double v) { return d.n > 0 && v > 0 ? v : NAN; };
  l.itl_p50_ms = figure(probe.itl_ms, probe.itl_ms.p50);
  if (!probe.decided) l.ttft_p50_ms = figure(probe.ttft_ms, probe.ttft_ms.p50);
  for (const SloGate& g : row.slo) {
    if (g.metric != SloMetric::kTtft) continue;
    l.gate_percentile = g.percentile;
    // Decided early: the requests that finished are the quicker ones, so their TTFT percentiles
    // say nothing of the load; the deciding TTFT gate's bound says how slow it was at least.
    if (probe.decided) {
      const EarlyDecision& d = *probe.decided;
      const bool this_gate = d.gate.metric == SloMetric::kTtft && d.gate.percentile == g.percentile;
      if (this_gate && d.lowest_reachable_ms > 0) {
        l.ttft_gate_ms = d.lowest_reachable_ms;
        l.gate_at_least = true;
      }
      break;
    }
    const Distribution& d = probe.ttft_ms;
    const double v = g.percentile == 50   ? d.p50
                     : g.percentile == 90 ? d.p90
                     : g.percentile == 95 ? d.p95
                     : g.percentile == 99 ? d.p99
                                          : NAN;
    l.ttft_gate_ms = figure(d, v);
    break;
  }
  return l;
}

Result<BoundaryPrediction> PredictFromBaselines(const Row& row,
                                                const std::vector<MeasuredBaseline>& baselines,
                                                int max_level,
                                                const std::vector<MeasuredLoad>& loads) {
  if (baselines.empty()) return Status::InvalidArgument("no baseline to calibrate on");
  const MeasuredBaseline& first = baselines.front();
  if (LimitsEngine(row.identity) != first.engine) {
    return Status::InvalidArgument(std::string("row ") + row.id + " runs on " +
                                   EngineName(LimitsEngine(row.identity)) + ", the baseline on " +
                                   EngineName(first.engine));
  }
  Result<engine::ServerShape> shape = ShapeFromLimits(first.engine, first.limits);
  if (!shape.ok()) return Status::InvalidArgument(first.source + ": " + shape.status().message());
  std::vector<engine::BaselinePoint> points;
  std::string sources;
  for (const MeasuredBaseline& b : baselines) {
    points.push_back(b.point);
    sources += (sources.empty() ? "" : " and ") + b.source;
  }
  Result<engine::Calibration> cal = engine::Calibrate(*shape, points);
  if (!cal.ok()) return Status::InvalidArgument(sources + ": " + cal.status().message());
  const int64_t overhead = std::max<int64_t>(0, first.point.prompt_tokens - first.input_tokens);
  const int64_t prompt = row.workload.input_tokens + overhead;
  if (!loads.empty() && baselines.size() == 1) {
    std::vector<engine::LoadPoint> points;
    std::string names;
    for (const MeasuredLoad& l : loads) {
      points.push_back({RowTrialOptions(row, prompt, l.concurrency), l.itl_p50_ms, l.ttft_p50_ms,
                        l.ttft_gate_ms, l.gate_percentile, l.gate_at_least});
      names += (names.empty() ? "" : ", ") + l.source;
    }
    cal = engine::FitLoad(*cal, first.point, points);
    if (!cal.ok()) return Status::InvalidArgument(names + ": " + cal.status().message());
    sources += " and the TTFT and ITL of " + names;
  }
  Result<BoundaryPrediction> p = PredictBoundary(cal->profile, row, prompt, max_level);
  if (!p.ok()) return p;
  p->source = "baseline calibration on " + sources;
  p->note = "calibrated " + p->note;
  p->parameters = std::move(cal->parameters);
  for (const MeasuredBaseline& b : baselines) {
    for (const std::string& a : b.assumed) {
      p->parameters.push_back({"prompt_tokens", static_cast<double>(b.point.prompt_tokens),
                               engine::Basis::kAssumed, a});
    }
  }
  return p;
}

TrialPredictors PredictFromBaselineTrial(const Row& row, int max_level) {
  TrialPredictors p;
  p.predict = [row, max_level](const TrialSummary& t) -> Result<BoundaryPrediction> {
    Result<MeasuredBaseline> b = BaselineFromTrial(t, row);
    if (!b.ok()) return b.status();
    return PredictFromBaselines(row, {*b}, max_level);
  };
  p.refine = [row, max_level](
                 const TrialSummary& t,
                 const std::vector<const TrialSummary*>& probes) -> Result<BoundaryPrediction> {
    Result<MeasuredBaseline> b = BaselineFromTrial(t, row);
    if (!b.ok()) return b.status();
    std::vector<MeasuredLoad> loads;
    for (const TrialSummary* probe : probes) loads.push_back(LoadFromTrial(*probe, row));
    return PredictFromBaselines(row, {*b}, max_level, loads);
  };
  return p;
}

}  // namespace capq

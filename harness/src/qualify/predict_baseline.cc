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

Result<BoundaryPrediction> PredictFromBaselines(const Row& row,
                                                const std::vector<MeasuredBaseline>& baselines,
                                                int max_level,
                                                const std::optional<MeasuredLoad>& load) {
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
  if (load && baselines.size() == 1) {
    cal = engine::RefineWithLoad(*cal, first.point, RowTrialOptions(row, prompt, load->concurrency),
                                 load->itl_p50_ms);
    if (!cal.ok()) return Status::InvalidArgument(load->source + ": " + cal.status().message());
    sources += " and the ITL of " + load->source;
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
  p.refine = [row, max_level](const TrialSummary& t,
                              const TrialSummary& probe) -> Result<BoundaryPrediction> {
    Result<MeasuredBaseline> b = BaselineFromTrial(t, row);
    if (!b.ok()) return b.status();
    MeasuredLoad load{"the probe at C=" + std::to_string(probe.level), probe.level,
                      probe.itl_ms.p50};
    return PredictFromBaselines(row, {*b}, max_level, load);
  };
  return p;
}

}  // namespace capq

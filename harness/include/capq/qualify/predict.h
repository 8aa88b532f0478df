// A row's boundary predicted through the engine model (capq/engine/predict.h): from a sim row's own
// profile, or from a profile calibrated on a real server's C = 1 baseline (capq/engine/
// calibrate.h). A prediction is navigation, never evidence: it chooses where to probe first and
// is printed beside what the trials then measured.
#pragma once

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "capq/engine/calibrate.h"
#include "capq/engine/predict.h"
#include "capq/model/row.h"
#include "capq/record/capacity_data.h"

namespace capq {

struct BoundaryPrediction {
  std::string source;       // "engine profile small" | "baseline calibration (...)"
  std::optional<int> cmax;  // nullopt: C = 1 already fails, or nothing fails up to the cap
  std::vector<PredictedPoint> curve;  // C = 1 up to the first failing C, the first gate's value
  std::string note;                   // "engine model: p95 TTFT 858 ms at C=6, 2222 ms at C=7"
  std::vector<engine::Parameter> parameters;  // calibrated predictions: how each was obtained
  int64_t prompt_tokens = 0;                  // the server prompt length predicted for
};

// The engine model's run of `row`'s closed loop at `concurrency`: its output tokens, warm-ups and
// measured requests, with prompts of `prompt_tokens` server tokens.
engine::PredictOptions RowTrialOptions(const Row& row, int64_t prompt_tokens, int concurrency);

// Runs the row's closed loop (its output, warm-up and measured counts) through `profile` for
// C = 1, 2, ... until one of the row's SLO gates is no longer met (or max_level passes), with
// prompts of `prompt_tokens` server tokens. InvalidArgument for a rate row, a mixed row or a row
// without gates, or when the profile rejects the shape.
Result<BoundaryPrediction> PredictBoundary(const engine::EngineProfile& profile, const Row& row,
                                           int64_t prompt_tokens, int max_level);

// PredictBoundary through a sim row's own engine profile (its prompt: input_tokens plus the
// profile's chat template), source "engine profile NAME".
Result<BoundaryPrediction> PredictFromProfile(const Row& row, int max_level);

// One C = 1 baseline of a real (or simulated) server, as calibration takes it.
struct MeasuredBaseline {
  std::string source;                         // "baseline trial DIR", "expect.baseline of ROW"
  Engine engine = Engine::kSglang;            // whose names `limits` uses
  std::map<std::string, std::string> limits;  // what the server reported (or the row pins)
  int64_t input_tokens = 0;                   // the row's user tokens behind point.prompt_tokens
  engine::BaselinePoint point;
  std::vector<std::string> assumed;  // what the source did not say, in words
};

// From a baseline trial (ReadTrialDir: the server's limits, prompt tokens, TTFT and ITL p50,
// tokens per chunk) of `row`.
Result<MeasuredBaseline> BaselineFromTrial(const TrialSummary& trial, const Row& row);
// From a row's published expect.baseline and its identity.server_expect; the server's prompt
// tokens are expect.baseline.prompt_tokens when given, else input_tokens (assumed).
Result<MeasuredBaseline> BaselineFromRow(const Row& row);

// A trial of the row under load: its ITL p50 and TTFT percentiles show what a decode row costs
// (engine::FitLoad). A figure the trial did not measure (decided early) is NaN.
struct MeasuredLoad {
  std::string source;  // "the probe at C=14"
  int concurrency = 0;
  double itl_p50_ms = NAN;
  double ttft_p50_ms = NAN;
  double ttft_gate_ms = NAN;  // the row's TTFT gate percentile
  double gate_percentile = 95;
  bool gate_at_least = false;  // decided early on that gate: ttft_gate_ms is a lower bound
};
// A probe of `row` as a load point: its ITL p50, TTFT p50 and the TTFT percentile the row gates.
// A probe decided early gives the ITL p50 of the streams it finished and, when its TTFT gate
// decided it, that gate's bound as a lower bound; its TTFT p50 (of the quicker requests) none.
MeasuredLoad LoadFromTrial(const TrialSummary& probe, const Row& row);

// Calibrates on `baselines` (one, or two prompt lengths of one identity) and predicts `row`'s
// boundary. The row's server prompt is its input_tokens plus the template overhead the first
// baseline showed (its prompt tokens minus its input tokens). With `loads` (closed-loop trials of
// `row` itself) a one-length calibration's b3 is fitted to all of them together (engine::FitLoad).
Result<BoundaryPrediction> PredictFromBaselines(const Row& row,
                                                const std::vector<MeasuredBaseline>& baselines,
                                                int max_level,
                                                const std::vector<MeasuredLoad>& loads = {});

// The capacity surface (the seed's Figure 3) before paying for it: `row`'s identity at other
// shapes. Each point is `row` with input_tokens x output_tokens, predicted by `predict`.
struct SurfacePoint {
  int64_t input_tokens = 0, output_tokens = 0;
  Result<BoundaryPrediction> prediction = Status::Internal("not predicted");
};
using RowPredictor = std::function<Result<BoundaryPrediction>(const Row& row)>;
std::vector<SurfacePoint> PredictSurface(const Row& row, const RowPredictor& predict,
                                         const std::vector<int64_t>& input_tokens,
                                         const std::vector<int64_t>& output_tokens);
// The default grid around a shape: inputs /4, x1, x2 and outputs /2, x1, x2.
std::vector<int64_t> GridAround(int64_t tokens, std::vector<double> factors);

// QualifyOptions::predict_from_baseline and refine_prediction for `row`: calibrate on the
// baseline trial, and again with a probe's ITL.
struct TrialPredictors {
  std::function<Result<BoundaryPrediction>(const TrialSummary& baseline)> predict;
  std::function<Result<BoundaryPrediction>(const TrialSummary& baseline,
                                           const std::vector<const TrialSummary*>& probes)>
      refine;
};
TrialPredictors PredictFromBaselineTrial(const Row& row, int max_level);

}  // namespace capq

// Fitting the engine model to a real server: its reported limits give the shape (running limit,
// token pool, chunk size, scheduling policy, speculative steps) and a C = 1 baseline gives the step
// costs. Pure: the same inputs always give the same profile. Every parameter of the result says
// whether the server reported it, the baseline measured it, or the fit assumed it, and how.
//
// The cost model is EngineProfile's: step = b0 + b1*prefill_tokens + b2*sum(chunk^2) +
// b3*decode_rows + b4*decode_kv_tokens (+ overhead, folded into b0 here). At C = 1:
//   TTFT = n_chunks * b0 + b1 * P                       (P server prompt tokens, n_chunks its
//   steps) decode step = ITL * tokens_per_step = b0 + b3 + b4 * (P + O / 2)
// One prompt length gives two equations for four unknowns, so b4 is assumed 0 (the attention over
// the baseline's context stays inside the fixed cost) and b3 is assumed to be the prefill's cost
// of the tokens a decode row computes (1 + speculative draft tokens): a batched decode row does the
// same matrix work per token as a prompt token. Two baselines at different prompt lengths measure
// b0 and b1 from the two TTFTs, and b4 and b3 from the two decode steps.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "capq/engine/predict.h"
#include "capq/engine/profile.h"
#include "capq/status.h"

namespace capq::engine {

enum class Basis { kReported, kMeasured, kAssumed };
const char* BasisName(Basis b);  // "reported" | "measured" | "assumed"

struct Parameter {
  std::string name;  // an EngineProfile field name
  double value = 0;
  Basis basis = Basis::kAssumed;
  std::string how;  // the source or the arithmetic, in words
};

// What the server says about itself, in the model's terms: `profile` holds the limits, policy,
// cache model and speculative steps (costs are ignored), `facts` one Parameter per field set, with
// the server's own name for it in `how`. Made per engine by the targets layer (engine_shape.h).
struct ServerShape {
  EngineProfile profile;
  std::vector<Parameter> facts;
};

struct BaselinePoint {
  int64_t prompt_tokens = 0;  // the server's count, chat template included
  int64_t output_tokens = 0;  // completion tokens per request (ignore_eos)
  double ttft_p50_ms = 0;
  double itl_p50_ms = 0;
  double tokens_per_chunk = 0;  // completion tokens per content chunk; 0 = not measured
};

struct Calibration {
  EngineProfile profile;
  std::vector<Parameter> parameters;  // the shape's facts, then the fitted costs
};

// Speculative acceptance assumed when the baseline carries no chunk counts: 2.2 accepted drafts
// per verify step, a typical EAGLE chain figure (rows/sim/profiles/b70_twin.yaml).
inline constexpr double kAssumedSpecAcceptMean = 2.2;

// Fits the costs from one or two baseline points (two must differ in prompt length by at least
// 10%). InvalidArgument, naming the figures, when the baseline cannot be fitted (a TTFT shorter
// than its steps' fixed cost, non-positive figures).
Result<Calibration> Calibrate(const ServerShape& shape, const std::vector<BaselinePoint>& points);

// No C = 1 trial shows what one more decode row costs: at C = 1 the row and the step's fixed cost
// are one figure. A trial under load does (its ITL is the decode step of many rows, prefill
// interference included). Refits b3, keeping b0 + b3 (the C = 1 decode step) and the C = 1 TTFT
// of `base` as they were measured, so that the model's ITL p50 over `load` matches `itl_p50_ms`
// (bisection through the engine model). The b3 parameter then says it was measured.
// REQUIRES: `cal` came from a one-length Calibrate of `base`.
Result<Calibration> RefineWithLoad(const Calibration& cal, const BaselinePoint& base,
                                   const PredictOptions& load, double itl_p50_ms);

// A trial of the row under load as FitLoad takes it; a figure it did not measure is NaN.
struct LoadPoint {
  PredictOptions load;
  double itl_p50_ms = NAN;
  double ttft_p50_ms = NAN;
  double ttft_gate_ms = NAN;  // the row's gating TTFT percentile, measured
  double gate_percentile = 95;
  // The load was decided early on that gate: ttft_gate_ms is the least the percentile could end
  // at, and only a model below it misfits.
  bool gate_at_least = false;
};

// Like RefineWithLoad, but on every load point together: b3 is chosen (keeping the C = 1 decode
// step and TTFT of `base`) to minimise the sum of squared log ratios of the model's ITL p50, TTFT
// p50 and gating TTFT percentile to the measured ones, the gating percentile counted twice (a
// grid over [0, the C = 1 step], then a golden-section search around the best). Deterministic.
// InvalidArgument when no point carries a usable figure.
Result<Calibration> FitLoad(const Calibration& cal, const BaselinePoint& base,
                            const std::vector<LoadPoint>& points);

}  // namespace capq::engine

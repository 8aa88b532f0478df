#include "capq/engine/calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace capq::engine {
namespace {

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

int64_t Chunks(const EngineProfile& p, int64_t prompt_tokens) {
  const int64_t chunk = std::max<int64_t>(1, p.chunked_prefill_size);
  return (prompt_tokens + chunk - 1) / chunk;
}

// Tokens one decode step emits at C = 1, and the acceptance it implies, in `cal`.
double TokensPerStep(const BaselinePoint& b, Calibration* cal) {
  EngineProfile& p = cal->profile;
  if (p.spec_draft_tokens <= 0) {
    p.spec_accept_mean = 0;
    return 1;
  }
  const double k = p.spec_draft_tokens;
  if (b.tokens_per_chunk > 1) {
    p.spec_accept_mean = std::clamp(b.tokens_per_chunk - 1, 0.0, k);
    cal->parameters.push_back({"spec_accept_mean", p.spec_accept_mean, Basis::kMeasured,
                               Fmt("%.3f completion tokens per chunk at C=1 (one chunk per "
                                   "verify step) - 1",
                                   b.tokens_per_chunk)});
  } else {
    p.spec_accept_mean = std::min(kAssumedSpecAcceptMean, k);
    cal->parameters.push_back({"spec_accept_mean", p.spec_accept_mean, Basis::kAssumed,
                               "a typical EAGLE chain acceptance; the baseline has no chunk "
                               "counts"});
  }
  return 1 + p.spec_accept_mean;
}

double DecodeStepS(const BaselinePoint& b, double tokens_per_step) {
  return b.itl_p50_ms / 1000 * tokens_per_step;
}

double ContextTokens(const BaselinePoint& b) {
  return static_cast<double>(b.prompt_tokens) + static_cast<double>(b.output_tokens) / 2;
}

Status CheckPoint(const BaselinePoint& b) {
  if (b.prompt_tokens < 1 || b.output_tokens < 2 || !(b.ttft_p50_ms > 0) || !(b.itl_p50_ms > 0)) {
    return Status::InvalidArgument(
        Fmt("a baseline needs prompt tokens >= 1, output tokens >= 2 and positive TTFT and ITL "
            "(got %.0f prompt, %.0f output tokens, TTFT p50 %g ms, ITL p50 %g ms)",
            static_cast<double>(b.prompt_tokens), static_cast<double>(b.output_tokens),
            b.ttft_p50_ms, b.itl_p50_ms));
  }
  return Status::Ok();
}

// One length: b4 = 0 and b3 = (1 + k) * b1 assumed; b0 and b1 from TTFT and the decode step.
Status FitOne(const BaselinePoint& b, double tps, Calibration* cal) {
  EngineProfile& p = cal->profile;
  const double rows_tokens = 1.0 + std::max(0, p.spec_draft_tokens);
  const double n = static_cast<double>(Chunks(p, b.prompt_tokens));
  const double step_s = DecodeStepS(b, tps), ttft_s = b.ttft_p50_ms / 1000;
  const double denom = static_cast<double>(b.prompt_tokens) - n * rows_tokens;
  const double b1 = denom > 0 ? (ttft_s - n * step_s) / denom : -1;
  const double b0 = step_s - rows_tokens * b1;
  if (!(b1 > 0) || !(b0 > 0)) {
    return Status::InvalidArgument(Fmt(
        "baseline TTFT p50 %.1f ms over %.0f prefill steps cannot be fitted with a decode step of "
        "%.2f ms: it leaves no positive per-token or fixed cost",
        b.ttft_p50_ms, n, step_s * 1000));
  }
  p.b0_s = b0;
  p.b1_s_per_prefill_token = b1;
  p.b3_s_per_decode_row = rows_tokens * b1;
  p.b4_s_per_decode_kv_token = 0;
  const std::string step = Fmt("decode step %.2f ms = ITL p50 %.3f ms x %.2f tokens per step",
                               step_s * 1000, b.itl_p50_ms, tps);
  cal->parameters.push_back(
      {"b1_s_per_prefill_token", b1, Basis::kMeasured,
       Fmt("(TTFT p50 %.1f ms - %.0f steps x decode step) / (%.0f prompt tokens - ", b.ttft_p50_ms,
           n, static_cast<double>(b.prompt_tokens)) +
           Fmt("%.0f x %.0f row tokens); ", n, rows_tokens) + step});
  cal->parameters.push_back({"b0_s", b0, Basis::kMeasured,
                             "decode step - b3 (scheduler overhead included; overhead_s = 0)"});
  cal->parameters.push_back(
      {"b3_s_per_decode_row", p.b3_s_per_decode_row, Basis::kAssumed,
       Fmt("%.0f tokens a decode row computes x b1: the prompt's per-token cost", rows_tokens)});
  cal->parameters.push_back({"b4_s_per_decode_kv_token", 0, Basis::kAssumed,
                             "one prompt length cannot separate it from b0 (a second baseline at "
                             "another length measures it)"});
  return Status::Ok();
}

// Two lengths: b0 and b1 from the TTFTs, b4 and b3 from the decode steps.
Status FitTwo(const BaselinePoint& a, const BaselinePoint& b, double tps, Calibration* cal) {
  EngineProfile& p = cal->profile;
  const double na = static_cast<double>(Chunks(p, a.prompt_tokens));
  const double nb = static_cast<double>(Chunks(p, b.prompt_tokens));
  const double pa = static_cast<double>(a.prompt_tokens), pb = static_cast<double>(b.prompt_tokens);
  const double ta = a.ttft_p50_ms / 1000, tb = b.ttft_p50_ms / 1000;
  const double det = na * pb - nb * pa;
  const double b0 = det != 0 ? (ta * pb - tb * pa) / det : -1;
  const double b1 = det != 0 ? (na * tb - nb * ta) / det : -1;
  if (!(b0 > 0) || !(b1 > 0)) {
    return Status::InvalidArgument(
        Fmt("baselines TTFT p50 %.1f ms at %.0f and %.1f ms at %.0f prompt tokens give no positive "
            "fixed and per-token cost",
            a.ttft_p50_ms, pa, b.ttft_p50_ms, pb));
  }
  const double sa = DecodeStepS(a, tps), sb = DecodeStepS(b, tps);
  const double b4 = std::max(0.0, (sa - sb) / (ContextTokens(a) - ContextTokens(b)));
  const double b3 =
      std::max(0.0, ((sa - b0 - b4 * ContextTokens(a)) + (sb - b0 - b4 * ContextTokens(b))) / 2);
  p.b0_s = b0;
  p.b1_s_per_prefill_token = b1;
  p.b3_s_per_decode_row = b3;
  p.b4_s_per_decode_kv_token = b4;
  const std::string ttfts = Fmt("TTFT p50 %.1f ms at %.0f and %.1f ms at %.0f prompt tokens",
                                a.ttft_p50_ms, pa, b.ttft_p50_ms, pb);
  const std::string steps = Fmt("decode steps %.2f ms and %.2f ms", sa * 1000, sb * 1000);
  cal->parameters.push_back({"b0_s", b0, Basis::kMeasured, "from " + ttfts});
  cal->parameters.push_back({"b1_s_per_prefill_token", b1, Basis::kMeasured, "from " + ttfts});
  cal->parameters.push_back({"b4_s_per_decode_kv_token", b4, Basis::kMeasured,
                             "the difference of " + steps + " over their context (>= 0)"});
  cal->parameters.push_back(
      {"b3_s_per_decode_row", b3, Basis::kMeasured, steps + " - b0 - b4 x context (>= 0)"});
  return Status::Ok();
}

// b0, b1 and b3 for a chosen b3, keeping the C = 1 decode step and TTFT.
bool SetRowCost(const BaselinePoint& b, double tps, double b3, EngineProfile* p) {
  const double n = static_cast<double>(Chunks(*p, b.prompt_tokens));
  const double b0 = DecodeStepS(b, tps) - b3 - p->b4_s_per_decode_kv_token * ContextTokens(b);
  const double b1 = (b.ttft_p50_ms / 1000 - n * b0) / static_cast<double>(b.prompt_tokens);
  if (!(b0 > 0) || !(b1 > 0)) return false;
  p->b0_s = b0;
  p->b1_s_per_prefill_token = b1;
  p->b3_s_per_decode_row = b3;
  return true;
}

// The model's ITL p50 over `load` in ms; NaN when the trial cannot run.
double ModelItlMs(const EngineProfile& p, const PredictOptions& load) {
  Result<PredictedTrial> t = PredictTrial(p, load);
  if (!t.ok() || t->measured.empty()) return NAN;
  std::vector<double> itl;
  for (const auto& r : t->measured) itl.push_back(r.itl_ns() / 1e6);
  std::nth_element(itl.begin(), itl.begin() + static_cast<long>(itl.size() / 2), itl.end());
  return itl[itl.size() / 2];
}

void ReplaceParameter(Parameter p, std::vector<Parameter>* list) {
  for (Parameter& q : *list) {
    if (q.name == p.name) {
      q = std::move(p);
      return;
    }
  }
  list->push_back(std::move(p));
}

// The model's misfit to `points` with b3 = `b3`: the sum of squared log ratios of its ITL p50,
// TTFT p50 and (twice) gating TTFT percentile to the measured ones; +inf when b3 does not fit.
double LoadMisfit(const EngineProfile& p, const BaselinePoint& base, double tps, double b3,
                  const std::vector<LoadPoint>& points) {
  EngineProfile trial = p;
  if (!SetRowCost(base, tps, b3, &trial)) return INFINITY;
  double sum = 0;
  auto add = [&sum](double model, double measured, double weight) {
    if (!(measured > 0)) return;
    sum += model > 0 ? weight * std::pow(std::log(model / measured), 2) : INFINITY;
  };
  for (const LoadPoint& lp : points) {
    Result<PredictedTrial> t = PredictTrial(trial, lp.load);
    if (!t.ok() || t->measured.empty()) return INFINITY;
    std::vector<double> itl;
    for (const auto& r : t->measured) itl.push_back(r.itl_ns() / 1e6);
    std::nth_element(itl.begin(), itl.begin() + static_cast<long>(itl.size() / 2), itl.end());
    add(itl[itl.size() / 2], lp.itl_p50_ms, 1);
    add(TtftPercentileNs(t->measured, 50) / 1e6, lp.ttft_p50_ms, 1);
    const double gate_ms = TtftPercentileNs(t->measured, lp.gate_percentile) / 1e6;
    if (!lp.gate_at_least || gate_ms < lp.ttft_gate_ms) add(gate_ms, lp.ttft_gate_ms, 2);
  }
  return sum;
}

// The b3 in [0, hi] that minimises `f`: a 17-point grid, then golden sections around the best.
template <typename F>
double MinimiseOn(double hi, F f) {
  constexpr int kGrid = 16;
  int best = 0;
  double best_f = INFINITY;
  for (int i = 0; i <= kGrid; ++i) {
    const double v = f(hi * i / kGrid);
    if (v < best_f) best_f = v, best = i;
  }
  double a = hi * std::max(0, best - 1) / kGrid, b = hi * std::min(kGrid, best + 1) / kGrid;
  const double g = (std::sqrt(5.0) - 1) / 2;
  double x1 = b - g * (b - a), x2 = a + g * (b - a), f1 = f(x1), f2 = f(x2);
  for (int i = 0; i < 14; ++i) {
    if (f1 <= f2) {
      b = x2, x2 = x1, f2 = f1, x1 = b - g * (b - a), f1 = f(x1);
    } else {
      a = x1, x1 = x2, f1 = f2, x2 = a + g * (b - a), f2 = f(x2);
    }
  }
  const double x = f1 <= f2 ? x1 : x2;
  return std::min(f1, f2) <= best_f ? x : hi * best / kGrid;
}

}  // namespace

Result<Calibration> RefineWithLoad(const Calibration& cal, const BaselinePoint& base,
                                   const PredictOptions& load, double itl_p50_ms) {
  if (!(itl_p50_ms > 0) || load.concurrency < 2) {
    return Status::InvalidArgument("a load point needs C >= 2 and a positive ITL p50");
  }
  const double tps = 1 + cal.profile.spec_accept_mean;
  const double step_s = DecodeStepS(base, tps);
  EngineProfile p = cal.profile;
  // ITL under load grows with b3: bisect on [0, the whole C = 1 step].
  double lo = 0, hi = step_s;
  for (int i = 0; i < 40; ++i) {
    const double mid = (lo + hi) / 2;
    EngineProfile trial = p;
    const bool fits = SetRowCost(base, tps, mid, &trial);
    if (!fits || ModelItlMs(trial, load) > itl_p50_ms) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  if (!SetRowCost(base, tps, lo, &p)) {
    return Status::InvalidArgument(Fmt("ITL p50 %.3f ms at C=%.0f leaves no positive step cost",
                                       itl_p50_ms, load.concurrency));
  }
  Calibration out = cal;
  out.profile = p;
  ReplaceParameter({"b3_s_per_decode_row", p.b3_s_per_decode_row, Basis::kMeasured,
                    Fmt("the model's ITL p50 matched to %.3f ms measured at C=%.0f (model %.3f ms)",
                        itl_p50_ms, load.concurrency, ModelItlMs(p, load))},
                   &out.parameters);
  ReplaceParameter({"b0_s", p.b0_s, Basis::kMeasured, "C=1 decode step - b3"}, &out.parameters);
  ReplaceParameter({"b1_s_per_prefill_token", p.b1_s_per_prefill_token, Basis::kMeasured,
                    Fmt("(TTFT p50 %.1f ms - prefill steps x b0) / %.0f prompt tokens",
                        base.ttft_p50_ms, static_cast<double>(base.prompt_tokens))},
                   &out.parameters);
  return out;
}

Result<Calibration> FitLoad(const Calibration& cal, const BaselinePoint& base,
                            const std::vector<LoadPoint>& points) {
  std::string figures;
  for (const LoadPoint& lp : points) {
    if (lp.load.concurrency < 2) continue;
    if (lp.itl_p50_ms > 0 || lp.ttft_p50_ms > 0 || lp.ttft_gate_ms > 0) {
      figures += Fmt(figures.empty() ? "C=%.0f" : ", C=%.0f", lp.load.concurrency);
    }
  }
  if (figures.empty()) {
    return Status::InvalidArgument("no load point at C >= 2 with a measured TTFT or ITL");
  }
  const double tps = 1 + cal.profile.spec_accept_mean;
  EngineProfile p = cal.profile;
  auto misfit = [&](double b3) { return LoadMisfit(p, base, tps, b3, points); };
  const double b3 = MinimiseOn(DecodeStepS(base, tps), misfit);
  const double rms = std::sqrt(misfit(b3));
  if (!std::isfinite(rms) || !SetRowCost(base, tps, b3, &p)) {
    return Status::InvalidArgument("the load points at " + figures +
                                   " leave no positive step cost");
  }
  Calibration out = cal;
  out.profile = p;
  ReplaceParameter({"b3_s_per_decode_row", b3, Basis::kMeasured,
                    "least squares over the TTFT p50, gating TTFT percentile and ITL p50 "
                    "measured at " +
                        figures + Fmt(" (root of the summed squared log ratios %.3f)", rms)},
                   &out.parameters);
  ReplaceParameter({"b0_s", p.b0_s, Basis::kMeasured, "C=1 decode step - b3"}, &out.parameters);
  ReplaceParameter({"b1_s_per_prefill_token", p.b1_s_per_prefill_token, Basis::kMeasured,
                    Fmt("(TTFT p50 %.1f ms - prefill steps x b0) / %.0f prompt tokens",
                        base.ttft_p50_ms, static_cast<double>(base.prompt_tokens))},
                   &out.parameters);
  return out;
}

const char* BasisName(Basis b) {
  switch (b) {
    case Basis::kReported:
      return "reported";
    case Basis::kMeasured:
      return "measured";
    case Basis::kAssumed:
      return "assumed";
  }
  return "?";
}

Result<Calibration> Calibrate(const ServerShape& shape, const std::vector<BaselinePoint>& points) {
  if (points.empty() || points.size() > 2) {
    return Status::InvalidArgument("calibration takes one or two baseline points");
  }
  for (const BaselinePoint& b : points) CAPQ_RETURN_IF_ERROR(CheckPoint(b));
  Calibration cal;
  cal.profile = shape.profile;
  cal.parameters = shape.facts;
  cal.profile.overhead_s = 0;
  cal.profile.b2_s_per_chunk_token_sq = 0;
  cal.profile.step_jitter = 0;
  cal.profile.epoch_jitter = 0;
  const double tps = TokensPerStep(points[0], &cal);
  const BaselinePoint* a = &points[0];
  const BaselinePoint* b = points.size() == 2 ? &points[1] : nullptr;
  if (b && a->prompt_tokens < b->prompt_tokens) std::swap(a, b);
  if (b && a->prompt_tokens < b->prompt_tokens * 11 / 10) {
    return Status::InvalidArgument(
        Fmt("two baselines must differ in prompt length by at least 10%% (%.0f and %.0f tokens)",
            static_cast<double>(a->prompt_tokens), static_cast<double>(b->prompt_tokens)));
  }
  CAPQ_RETURN_IF_ERROR(b ? FitTwo(*a, *b, tps, &cal) : FitOne(*a, tps, &cal));
  cal.parameters.push_back({"b2_s_per_chunk_token_sq", 0, Basis::kAssumed,
                            "a quadratic prefill term needs more than two prompt lengths"});
  CAPQ_RETURN_IF_ERROR(ValidateProfile(cal.profile));
  return cal;
}

}  // namespace capq::engine

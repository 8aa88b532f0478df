// Offline prediction: one closed-loop concurrency-burst trial run through the engine model alone,
// in virtual time, with no sockets. Pure: the same profile and options always give the same answer.
// qualify uses it to predict where a boundary lies before spending real trials on it.
#pragma once

#include <cstdint>
#include <vector>

#include "capq/engine/engine.h"
#include "capq/engine/profile.h"
#include "capq/status.h"

namespace capq::engine {

struct PredictOptions {
  int64_t prompt_tokens = 0;  // server-side prompt length, chat template included
  int64_t output_tokens = 0;  // max_tokens with ignore_eos: every request runs to it
  int concurrency = 1;  // closed loop: a completion is replaced at once, after the next step began
  int measured_requests = 64;
  int warmup_requests = 0;  // run first, at warmup_concurrency, excluded from `measured`
  int warmup_concurrency = 1;
  // Prompts are unique after the first shared_prefix_tokens (-1: the profile's
  // template_prefix_tokens, which every real chat prompt shares); prompt_seed picks the corpus.
  int shared_prefix_tokens = -1;
  uint64_t prompt_seed = 1;
  bool flush_before = true;  // cold cache, as a trial starts
};

struct PredictedRequest {
  int index = 0;  // order of submission within its phase
  VirtNs submit_ns = 0;
  VirtNs first_token_ns = 0;
  VirtNs end_ns = 0;
  int64_t output_tokens = 0;
  int64_t cached_tokens = 0;
  VirtNs ttft_ns() const { return first_token_ns - submit_ns; }
  // Mean spacing after the first token, as AIPerf's inter_token_latency: (e2e - ttft) / (n - 1).
  double itl_ns() const {
    return output_tokens > 1 ? static_cast<double>(end_ns - first_token_ns) /
                                   static_cast<double>(output_tokens - 1)
                             : 0;
  }
};

struct PredictedTrial {
  std::vector<PredictedRequest> warmup;
  std::vector<PredictedRequest> measured;  // in submission order
  VirtNs measured_start_ns = 0;
  VirtNs measured_end_ns = 0;
};

// Runs the trial on a fresh engine built from `profile`.
Result<PredictedTrial> PredictTrial(const EngineProfile& profile, const PredictOptions& options);
// Runs it on an existing engine (a long-lived server: epoch jitter and cache carry over) starting
// at virtual time `start_ns`. REQUIRES: the engine is idle and start_ns is not before its past.
Result<PredictedTrial> PredictTrialOn(Engine* engine, VirtNs start_ns,
                                      const PredictOptions& options);

// Linear-interpolation percentile (q in [0, 100]) of TTFT over `requests`, in ns; 0 when empty.
double TtftPercentileNs(const std::vector<PredictedRequest>& requests, double q);

}  // namespace capq::engine

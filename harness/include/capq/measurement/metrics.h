// Trial metrics: percentiles with a named method, throughputs, and the value each SLO gate
// compares. Pure functions of decoded results; no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/model/row.h"

namespace capq {

// p in [0, 100]. kLinear = numpy.percentile's default ("linear": rank (n-1)·p/100, interpolated);
// kNearestRank = the smallest value with at least p% of values <= it (rank ceil(p/100·n), p=0 ->
// min). Empty input -> NaN.
double Percentile(std::vector<double> values, double p, PercentileMethod m);

struct Distribution {
  size_t n = 0;  // when 0 every other field is NaN (written as null)
  double min = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0, mean = 0;
};
// NaNs are left out. Takes its values by value and sorts them in place: std::move a large set in.
Distribution Summarize(std::vector<double> values, PercentileMethod m);

struct TrialMetrics {
  double time_scale = 1;  // every duration below is wall × time_scale (virtual time on sim rows)
  PercentileMethod method = PercentileMethod::kLinear;
  size_t requests = 0;  // measured results given
  Distribution ttft_ms, ttfb_ms, first_event_ms;
  Distribution itl_ms;        // per request (E2E - TTFT) / (completion_tokens - 1), server-counted
  Distribution chunk_gap_ms;  // gaps between consecutive non-empty chunks, all requests pooled
  Distribution e2e_ms, scheduling_lag_ms;
  double tokens_per_chunk_mean =
      0;                    // server completion tokens / non-empty chunks, over all requests
  double output_tok_s = 0;  // completion tokens / duration_s
  double request_per_s = 0;
  double duration_s = 0;  // first measured send -> last measured end
  int64_t completion_tokens_total = 0;
  int64_t prompt_tokens_min = 0, prompt_tokens_max = 0;  // 0 when the server reported none
  std::vector<double> ttft_ms_by_arrival;  // measured requests in send order (NaN = no TTFT)
  double ttft_p95_steady_ms = 0;           // p95 over requests after the first C (burst excluded)
  // Per-request values in send order, kept so any SLO percentile can be computed (SloValueMs).
  std::vector<double> ttft_values_ms, itl_values_ms, e2e_values_ms;
};

// `measured` in any order (sorted by start_ns inside). Requests without a TTFT (failures) are left
// out of the TTFT distribution; the validator fails such trials separately.
TrialMetrics ComputeMetrics(const std::vector<RequestResult>& measured, int concurrency,
                            double time_scale, PercentileMethod m);
TrialMetrics ComputeMetricsOf(const std::vector<const RequestResult*>& measured, int concurrency,
                              double time_scale, PercentileMethod m);

// The measured value an SLO gate compares: the gate's percentile of ttft / itl / e2e, in ms, with
// the metrics' method. NaN when there are no values (a gate must treat NaN as failed).
double SloValueMs(const TrialMetrics& t, const SloGate& gate);
// The per-request values a gate on `metric` takes its percentile over (in send order).
const std::vector<double>& SloValues(const TrialMetrics& t, SloMetric metric);

// metrics.json's writer and its one reader, side by side. The reader throws nlohmann::json
// exceptions on a wrong type; a missing figure reads as NaN (a missing distribution: n = 0, NaN).
// The per-request value lists are not in the file, so they read back empty.
nlohmann::json DistributionToJson(const Distribution& d);
Distribution DistributionFromJson(const nlohmann::json& j);
nlohmann::json MetricsToJson(const TrialMetrics& t);
TrialMetrics MetricsFromJson(const nlohmann::json& j);

}  // namespace capq

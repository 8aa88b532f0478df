#include "capq/measurement/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "capq/measurement/json_figure.h"

namespace capq {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The percentile of values already sorted, NaN-free and non-empty, each read as at(i).
template <typename At>
double SortedPercentile(size_t n, const At& at, double p, PercentileMethod m) {
  p = std::clamp(p, 0.0, 100.0);
  if (m == PercentileMethod::kNearestRank) {
    // Rank ceil(p·n/100); the tolerance keeps 95·20/100 = 19 from becoming 20 through rounding.
    const double x = p * static_cast<double>(n) / 100.0;
    double k = std::ceil(x - 1e-9 * std::max(1.0, x));
    if (k < 1) k = 1;
    if (k > static_cast<double>(n)) k = static_cast<double>(n);
    return at(static_cast<size_t>(k) - 1);
  }
  // numpy "linear": virtual index (n-1)·p/100 between the two neighbours.
  const double rank = static_cast<double>(n - 1) * p / 100.0;
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, n - 1);
  const double frac = rank - static_cast<double>(lo);
  return at(lo) + (at(hi) - at(lo)) * frac;
}

template <typename T>
void DropNaNAndSort(std::vector<T>* values) {
  values->erase(std::remove_if(values->begin(), values->end(), [](T v) { return std::isnan(v); }),
                values->end());
  std::sort(values->begin(), values->end());
}

// The distribution of values sorted in place, each read as double(v) * scale: a positive scale
// keeps their order, so every figure is the one the scaled doubles would give.
template <typename T>
Distribution SummarizeScaled(std::vector<T>* values, double scale, PercentileMethod m) {
  DropNaNAndSort(values);
  const std::vector<T>& v = *values;
  const auto at = [&v, scale](size_t i) { return static_cast<double>(v[i]) * scale; };
  Distribution d;
  d.n = v.size();
  if (v.empty()) {
    d.min = d.p50 = d.p90 = d.p95 = d.p99 = d.max = d.mean = kNaN;
    return d;
  }
  d.min = at(0);
  d.max = at(v.size() - 1);
  double sum = 0.0;
  for (size_t i = 0; i < v.size(); ++i) sum += at(i);
  d.mean = sum / static_cast<double>(v.size());
  d.p50 = SortedPercentile(v.size(), at, 50, m);
  d.p90 = SortedPercentile(v.size(), at, 90, m);
  d.p95 = SortedPercentile(v.size(), at, 95, m);
  d.p99 = SortedPercentile(v.size(), at, 99, m);
  return d;
}

}  // namespace

double Percentile(std::vector<double> values, double p, PercentileMethod m) {
  DropNaNAndSort(&values);
  if (values.empty() || std::isnan(p)) return kNaN;
  return SortedPercentile(
      values.size(), [&values](size_t i) { return values[i]; }, p, m);
}

Distribution Summarize(std::vector<double> values, PercentileMethod m) {
  return SummarizeScaled(&values, 1.0, m);
}

TrialMetrics ComputeMetrics(const std::vector<RequestResult>& measured, int concurrency,
                            double time_scale, PercentileMethod m) {
  std::vector<const RequestResult*> all;
  all.reserve(measured.size());
  for (const RequestResult& r : measured) all.push_back(&r);
  return ComputeMetricsOf(all, concurrency, time_scale, m);
}

namespace {

// Send order; never-sent requests (start 0) go last, in their index order.
std::vector<const RequestResult*> SendOrder(const std::vector<const RequestResult*>& measured) {
  std::vector<const RequestResult*> order = measured;
  std::stable_sort(order.begin(), order.end(), [](const RequestResult* a, const RequestResult* b) {
    const bool sa = a->start_ns != 0, sb = b->start_ns != 0;
    if (sa != sb) return sa;
    if (a->start_ns != b->start_ns) return a->start_ns < b->start_ns;
    return a->index < b->index;
  });
  return order;
}

// What the requests pool before it is summarized, beside the values TrialMetrics keeps itself.
struct Pooled {
  std::vector<double> ttfb, first_event, lag;
  // Millions at thousands of long streams: pooled as the floats they are, sized once.
  std::vector<float> gaps;
  int64_t chunks_total = 0, tokens_for_chunks = 0;
  MonoNs first_start = 0, last_end = 0;
  size_t completed = 0;
  bool have_prompt = false;
};

// Nanoseconds of the run as milliseconds of the server it stands for (time_scale `k`).
double Ms(int64_t ns, double k) { return static_cast<double>(ns) / 1e6 * k; }

// One request's token counts: the totals, the tokens per chunk and the prompt sizes.
void PoolTokens(const RequestResult& r, TrialMetrics* t, Pooled* p) {
  if (r.completion_tokens) {
    t->completion_tokens_total += *r.completion_tokens;
    if (r.nonempty_chunks > 0) {
      p->tokens_for_chunks += *r.completion_tokens;
      p->chunks_total += r.nonempty_chunks;
    }
  }
  if (r.prompt_tokens) {
    if (!p->have_prompt || *r.prompt_tokens < t->prompt_tokens_min)
      t->prompt_tokens_min = *r.prompt_tokens;
    if (!p->have_prompt || *r.prompt_tokens > t->prompt_tokens_max)
      t->prompt_tokens_max = *r.prompt_tokens;
    p->have_prompt = true;
  }
}

// One sent request's times, gaps and tokens.
void PoolSent(const RequestResult& r, double k, TrialMetrics* t, Pooled* p) {
  if (p->first_start == 0 || r.start_ns < p->first_start) p->first_start = r.start_ns;
  if (r.end_ns > p->last_end) p->last_end = r.end_ns;
  p->lag.push_back(Ms(r.scheduling_lag_ns, k));
  if (r.ttft_ns) t->ttft_values_ms.push_back(Ms(*r.ttft_ns, k));
  if (r.ttfb_ns) p->ttfb.push_back(Ms(*r.ttfb_ns, k));
  if (r.first_event_ns) p->first_event.push_back(Ms(*r.first_event_ns, k));
  const bool complete = !r.cancelled && r.http_status == 200;
  if (complete) ++p->completed;
  if (complete && r.e2e_ns) t->e2e_values_ms.push_back(Ms(*r.e2e_ns, k));
  if (complete && r.e2e_ns && r.ttft_ns && r.completion_tokens && *r.completion_tokens > 1) {
    t->itl_values_ms.push_back(Ms(*r.e2e_ns - *r.ttft_ns, k) /
                               static_cast<double>(*r.completion_tokens - 1));
  }
  p->gaps.insert(p->gaps.end(), r.text_gaps_ms.begin(), r.text_gaps_ms.end());
  PoolTokens(r, t, p);
}

// The distributions, rates and duration of what was pooled.
void SummarizePooled(Pooled* p, double k, PercentileMethod m, TrialMetrics* t) {
  t->ttft_ms = Summarize(t->ttft_values_ms, m);
  t->ttfb_ms = Summarize(p->ttfb, m);
  t->first_event_ms = Summarize(p->first_event, m);
  t->itl_ms = Summarize(t->itl_values_ms, m);
  t->chunk_gap_ms = SummarizeScaled(&p->gaps, k, m);
  t->e2e_ms = Summarize(t->e2e_values_ms, m);
  t->scheduling_lag_ms = Summarize(p->lag, m);
  t->tokens_per_chunk_mean = p->chunks_total > 0 ? static_cast<double>(p->tokens_for_chunks) /
                                                       static_cast<double>(p->chunks_total)
                                                 : kNaN;
  t->duration_s = p->last_end > p->first_start ? Ms(p->last_end - p->first_start, k) / 1e3 : 0;
  t->output_tok_s =
      t->duration_s > 0 ? static_cast<double>(t->completion_tokens_total) / t->duration_s : kNaN;
  t->request_per_s = t->duration_s > 0 ? static_cast<double>(p->completed) / t->duration_s : kNaN;
}

// The TTFT p95 past the first `concurrency` requests in send order: the steady state.
double SteadyTtftP95(const TrialMetrics& t, int concurrency, PercentileMethod m) {
  std::vector<double> steady;
  for (size_t i = static_cast<size_t>(std::max(concurrency, 0)); i < t.ttft_ms_by_arrival.size();
       ++i) {
    steady.push_back(t.ttft_ms_by_arrival[i]);
  }
  return Percentile(steady, 95, m);
}

}  // namespace

TrialMetrics ComputeMetricsOf(const std::vector<const RequestResult*>& measured, int concurrency,
                              double time_scale, PercentileMethod m) {
  TrialMetrics t;
  t.time_scale = time_scale;
  t.method = m;
  t.requests = measured.size();
  const std::vector<const RequestResult*> order = SendOrder(measured);
  const double k = time_scale;
  Pooled p;
  size_t gap_count = 0;
  for (const RequestResult* r : order) gap_count += r->text_gaps_ms.size();
  p.gaps.reserve(gap_count);
  for (const RequestResult* r : order) {
    t.ttft_ms_by_arrival.push_back(r->ttft_ns ? Ms(*r->ttft_ns, k) : kNaN);
    if (r->start_ns == 0) continue;
    PoolSent(*r, k, &t, &p);
  }
  SummarizePooled(&p, k, m, &t);
  t.ttft_p95_steady_ms = SteadyTtftP95(t, concurrency, m);
  return t;
}

const std::vector<double>& SloValues(const TrialMetrics& t, SloMetric metric) {
  switch (metric) {
    case SloMetric::kItl:
      return t.itl_values_ms;
    case SloMetric::kE2e:
      return t.e2e_values_ms;
    case SloMetric::kTtft:
      break;
  }
  return t.ttft_values_ms;
}

double SloValueMs(const TrialMetrics& t, const SloGate& gate) {
  return Percentile(SloValues(t, gate.metric), gate.percentile, t.method);
}

nlohmann::json DistributionToJson(const Distribution& d) {
  return nlohmann::json{{"n", d.n},
                        {"min", FigureToJson(d.min)},
                        {"p50", FigureToJson(d.p50)},
                        {"p90", FigureToJson(d.p90)},
                        {"p95", FigureToJson(d.p95)},
                        {"p99", FigureToJson(d.p99)},
                        {"max", FigureToJson(d.max)},
                        {"mean", FigureToJson(d.mean)}};
}

Distribution DistributionFromJson(const nlohmann::json& j) {
  Distribution d;
  if (!j.is_object()) {
    d.min = d.p50 = d.p90 = d.p95 = d.p99 = d.max = d.mean = kNaN;
    return d;
  }
  d.n = j.value("n", size_t{0});
  d.min = FigureAt(j, "min");
  d.p50 = FigureAt(j, "p50");
  d.p90 = FigureAt(j, "p90");
  d.p95 = FigureAt(j, "p95");
  d.p99 = FigureAt(j, "p99");
  d.max = FigureAt(j, "max");
  d.mean = FigureAt(j, "mean");
  return d;
}

TrialMetrics MetricsFromJson(const nlohmann::json& j) {
  TrialMetrics t;
  t.time_scale = j.value("time_scale", 1.0);
  t.method = j.value("percentile_method", "") == "nearest_rank" ? PercentileMethod::kNearestRank
                                                                : PercentileMethod::kLinear;
  t.requests = j.value("requests", size_t{0});
  const auto dist = [&j](const char* key) {
    return DistributionFromJson(j.value(key, nlohmann::json()));
  };
  t.ttft_ms = dist("ttft_ms");
  t.ttfb_ms = dist("ttfb_ms");
  t.first_event_ms = dist("first_event_ms");
  t.itl_ms = dist("itl_ms");
  t.chunk_gap_ms = dist("chunk_gap_ms");
  t.e2e_ms = dist("e2e_ms");
  t.scheduling_lag_ms = dist("scheduling_lag_ms");
  t.tokens_per_chunk_mean = FigureAt(j, "tokens_per_chunk_mean");
  t.output_tok_s = FigureAt(j, "output_tok_s");
  t.request_per_s = FigureAt(j, "request_per_s");
  t.duration_s = FigureAt(j, "duration_s");
  t.completion_tokens_total = j.value("completion_tokens_total", int64_t{0});
  t.prompt_tokens_min = j.value("prompt_tokens_min", int64_t{0});
  t.prompt_tokens_max = j.value("prompt_tokens_max", int64_t{0});
  for (const auto& v : j.value("ttft_ms_by_arrival", nlohmann::json::array())) {
    t.ttft_ms_by_arrival.push_back(v.is_number() ? v.get<double>() : kNaN);
  }
  t.ttft_p95_steady_ms = FigureAt(j, "ttft_p95_steady_ms");
  return t;
}

nlohmann::json MetricsToJson(const TrialMetrics& t) {
  nlohmann::json j;
  j["time_scale"] = t.time_scale;
  j["percentile_method"] = PercentileMethodName(t.method);
  j["requests"] = t.requests;
  j["ttft_ms"] = DistributionToJson(t.ttft_ms);
  j["ttfb_ms"] = DistributionToJson(t.ttfb_ms);
  j["first_event_ms"] = DistributionToJson(t.first_event_ms);
  j["itl_ms"] = DistributionToJson(t.itl_ms);
  j["chunk_gap_ms"] = DistributionToJson(t.chunk_gap_ms);
  j["e2e_ms"] = DistributionToJson(t.e2e_ms);
  j["scheduling_lag_ms"] = DistributionToJson(t.scheduling_lag_ms);
  j["tokens_per_chunk_mean"] = FigureToJson(t.tokens_per_chunk_mean);
  j["output_tok_s"] = FigureToJson(t.output_tok_s);
  j["request_per_s"] = FigureToJson(t.request_per_s);
  j["duration_s"] = FigureToJson(t.duration_s);
  j["completion_tokens_total"] = t.completion_tokens_total;
  j["prompt_tokens_min"] = t.prompt_tokens_min;
  j["prompt_tokens_max"] = t.prompt_tokens_max;
  nlohmann::json arr = nlohmann::json::array();
  for (double v : t.ttft_ms_by_arrival) arr.push_back(FigureToJson(v));
  j["ttft_ms_by_arrival"] = std::move(arr);
  j["ttft_p95_steady_ms"] = FigureToJson(t.ttft_p95_steady_ms);
  return j;
}

}  // namespace capq

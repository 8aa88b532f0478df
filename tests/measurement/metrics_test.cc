#include "capq/measurement/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace capq {
namespace {

std::vector<double> OneToN(int n) {
  std::vector<double> v;
  for (int i = n; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  return v;
}

// Expected values are numpy.percentile(x, p) (method "linear"), worked by hand:
// rank = (n-1)·p/100, interpolate between the neighbours.
TEST(Percentile, LinearMatchesNumpy) {
  const auto v = OneToN(10);
  EXPECT_DOUBLE_EQ(Percentile(v, 95, PercentileMethod::kLinear), 9.55);  // rank 8.55
  EXPECT_DOUBLE_EQ(Percentile(v, 50, PercentileMethod::kLinear), 5.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 99, PercentileMethod::kLinear), 9.91);
  EXPECT_DOUBLE_EQ(Percentile(v, 90, PercentileMethod::kLinear), 9.1);
  EXPECT_DOUBLE_EQ(Percentile(v, 0, PercentileMethod::kLinear), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100, PercentileMethod::kLinear), 10);
  EXPECT_DOUBLE_EQ(Percentile({15, 20, 35, 40, 50}, 40, PercentileMethod::kLinear),
                   29);  // rank 1.6
  EXPECT_DOUBLE_EQ(Percentile({7}, 95, PercentileMethod::kLinear), 7);
}

TEST(Percentile, NearestRank) {
  const auto v = OneToN(10);
  EXPECT_DOUBLE_EQ(Percentile(v, 95, PercentileMethod::kNearestRank), 10);  // ceil(9.5) = 10
  EXPECT_DOUBLE_EQ(Percentile(v, 90, PercentileMethod::kNearestRank), 9);   // ceil(9) = 9
  EXPECT_DOUBLE_EQ(Percentile(v, 50, PercentileMethod::kNearestRank), 5);
  EXPECT_DOUBLE_EQ(Percentile(v, 0, PercentileMethod::kNearestRank), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 100, PercentileMethod::kNearestRank), 10);
  // 95·20/100 = 19 exactly: rounding must not push the rank to 20.
  EXPECT_DOUBLE_EQ(Percentile(OneToN(20), 95, PercentileMethod::kNearestRank), 19);
  // 64 requests at p95: rank ceil(60.8) = 61, i.e. the 4th slowest decides.
  EXPECT_DOUBLE_EQ(Percentile(OneToN(64), 95, PercentileMethod::kNearestRank), 61);
}

TEST(Percentile, EmptyAndNaN) {
  EXPECT_TRUE(std::isnan(Percentile({}, 50, PercentileMethod::kLinear)));
  EXPECT_DOUBLE_EQ(Percentile({NAN, 1, 3}, 50, PercentileMethod::kLinear), 2);  // NaN ignored
}

TEST(Summarize, Fields) {
  Distribution d = Summarize(OneToN(10), PercentileMethod::kLinear);
  EXPECT_EQ(d.n, 10u);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 10);
  EXPECT_DOUBLE_EQ(d.mean, 5.5);
  EXPECT_DOUBLE_EQ(d.p50, 5.5);
  EXPECT_DOUBLE_EQ(d.p95, 9.55);
  Distribution e = Summarize({}, PercentileMethod::kLinear);
  EXPECT_EQ(e.n, 0u);
  EXPECT_TRUE(std::isnan(e.p95));
  EXPECT_TRUE(DistributionToJson(e)["p95"].is_null());
}

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kBaseNs = 5'000'000'000;

// One request: sent at start_ms, TTFT ttft_ms, E2E e2e_ms, `tokens` completion tokens in `chunks`
// non-empty chunks spread evenly from TTFT to E2E.
RequestResult Req(const std::string& id, int index, int64_t start_ms, int64_t ttft_ms,
                  int64_t e2e_ms, int64_t tokens, int chunks) {
  RequestResult r;
  r.id = id;
  r.index = index;
  r.http_status = 200;
  r.start_ns = kBaseNs + start_ms * kMs;  // 0 means "never sent"
  r.end_ns = r.start_ns + e2e_ms * kMs;
  r.ttft_ns = ttft_ms * kMs;
  r.ttfb_ns = ttft_ms * kMs / 2;
  r.first_event_ns = ttft_ms * kMs;
  r.e2e_ns = e2e_ms * kMs;
  r.completion_tokens = tokens;
  r.prompt_tokens = 100 + index;
  r.scheduling_lag_ns = 1000;
  int64_t prev_at = ttft_ms;
  for (int c = 1; c < chunks; ++c) {
    const int64_t at = ttft_ms + (e2e_ms - ttft_ms) * c / (chunks - 1);
    r.text_gaps_ms.push_back(static_cast<float>(at - prev_at));
    prev_at = at;
  }
  r.chunks = chunks;
  r.nonempty_chunks = chunks;
  return r;
}

// The pooled chunk gaps are summarized as the floats they are, scaled as read: every figure is the
// one the scaled doubles give.
TEST(ComputeMetrics, ChunkGapsAreThoseOfTheScaledDoubles) {
  std::mt19937 rng(3);
  std::lognormal_distribution<float> gap(1.5f, 1.0f);
  std::vector<RequestResult> rs = {Req("m0", 0, 0, 100, 1000, 10, 2),
                                   Req("m1", 1, 5, 100, 1000, 10, 2)};
  std::vector<double> want;
  for (RequestResult& r : rs) {
    r.text_gaps_ms.clear();
    for (int i = 0; i < 1001; ++i) r.text_gaps_ms.push_back(gap(rng));
  }
  for (double scale : {1.0, 10.0, 0.3}) {
    want.clear();
    for (const RequestResult& r : rs) {
      for (float g : r.text_gaps_ms) want.push_back(static_cast<double>(g) * scale);
    }
    for (PercentileMethod m : {PercentileMethod::kLinear, PercentileMethod::kNearestRank}) {
      const Distribution got = ComputeMetrics(rs, 2, scale, m).chunk_gap_ms;
      const Distribution ref = Summarize(want, m);
      EXPECT_EQ(got.n, 2002u);
      EXPECT_EQ(got.min, ref.min);
      EXPECT_EQ(got.max, ref.max);
      EXPECT_EQ(got.mean, ref.mean);
      EXPECT_EQ(got.p50, ref.p50);
      EXPECT_EQ(got.p90, ref.p90);
      EXPECT_EQ(got.p95, ref.p95);
      EXPECT_EQ(got.p99, ref.p99);
      EXPECT_EQ(ref.p50, Percentile(want, 50, m));
      std::vector<double> sorted = want;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(got.mean, std::accumulate(sorted.begin(), sorted.end(), 0.0) / 2002.0);
    }
  }
}

TEST(ComputeMetrics, WallTimesScaledToVirtualTime) {
  // Two requests back to back on one slot, 10 tokens each; time_scale 10 (sim: virtual = wall ×
  // 10).
  std::vector<RequestResult> rs = {Req("m1", 1, 1000, 300, 1200, 10, 4),
                                   Req("m0", 0, 0, 100, 1000, 10, 10)};
  TrialMetrics t =
      ComputeMetrics(rs, /*concurrency=*/1, /*time_scale=*/10, PercentileMethod::kLinear);
  EXPECT_EQ(t.requests, 2u);
  EXPECT_DOUBLE_EQ(t.ttft_ms.min, 1000);  // 100 ms wall
  EXPECT_DOUBLE_EQ(t.ttft_ms.max, 3000);
  EXPECT_DOUBLE_EQ(t.ttft_ms.p50, 2000);
  // ITL = (E2E - TTFT) / (tokens - 1): m0 900/9 = 100 ms wall, m1 900/9 = 100 ms -> 1000 virtual.
  EXPECT_DOUBLE_EQ(t.itl_ms.p50, 1000);
  EXPECT_DOUBLE_EQ(t.e2e_ms.max, 12000);
  // m0's 10 chunks over 900 ms: 9 gaps of 100 ms; m1's 4 chunks over 900 ms: 3 gaps of 300 ms.
  EXPECT_EQ(t.chunk_gap_ms.n, 12u);
  EXPECT_DOUBLE_EQ(t.chunk_gap_ms.min, 1000);
  EXPECT_DOUBLE_EQ(t.chunk_gap_ms.max, 3000);
  EXPECT_DOUBLE_EQ(t.tokens_per_chunk_mean, 20.0 / 14.0);
  // Duration 0 -> 2200 ms wall = 22 s virtual; 20 tokens.
  EXPECT_DOUBLE_EQ(t.duration_s, 22);
  EXPECT_DOUBLE_EQ(t.output_tok_s, 20.0 / 22);
  EXPECT_DOUBLE_EQ(t.request_per_s, 2.0 / 22);
  EXPECT_EQ(t.completion_tokens_total, 20);
  EXPECT_EQ(t.prompt_tokens_min, 100);
  EXPECT_EQ(t.prompt_tokens_max, 101);
  ASSERT_EQ(t.ttft_ms_by_arrival.size(), 2u);
  EXPECT_DOUBLE_EQ(t.ttft_ms_by_arrival[0], 1000);  // send order, not input order
  EXPECT_DOUBLE_EQ(t.ttft_ms_by_arrival[1], 3000);
  EXPECT_DOUBLE_EQ(t.scheduling_lag_ms.max, 0.01);  // 1 µs × 10
  EXPECT_DOUBLE_EQ(t.ttft_p95_steady_ms, 3000);     // only the request after the first C = 1
  nlohmann::json j = MetricsToJson(t);
  EXPECT_EQ(j["percentile_method"], "linear");
  EXPECT_DOUBLE_EQ(j["time_scale"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(j["ttft_ms"]["max"].get<double>(), 3000);
  // metrics.json's one reader gives back every figure the writer wrote.
  const TrialMetrics back = MetricsFromJson(j);
  EXPECT_EQ(MetricsToJson(back), j);
  EXPECT_EQ(back.method, PercentileMethod::kLinear);
  EXPECT_DOUBLE_EQ(back.ttft_ms_by_arrival[1], 3000);
}

TEST(MetricsFromJson, NullFiguresAndAMissingDistributionReadAsNotMeasured) {
  const TrialMetrics t =
      MetricsFromJson(nlohmann::json::parse(R"({"percentile_method": "nearest_rank", "requests": 3,
        "ttft_ms": {"n": 0, "min": null, "p50": null}, "output_tok_s": null,
        "ttft_ms_by_arrival": [12.5, null]})"));
  EXPECT_EQ(t.method, PercentileMethod::kNearestRank);
  EXPECT_EQ(t.requests, 3u);
  EXPECT_TRUE(std::isnan(t.ttft_ms.p50));
  EXPECT_TRUE(std::isnan(t.itl_ms.p95));  // absent
  EXPECT_TRUE(std::isnan(t.output_tok_s));
  ASSERT_EQ(t.ttft_ms_by_arrival.size(), 2u);
  EXPECT_TRUE(std::isnan(t.ttft_ms_by_arrival[1]));
  EXPECT_THROW(MetricsFromJson(nlohmann::json::parse(R"({"requests": "three"})")),
               nlohmann::json::exception);
}

TEST(ComputeMetrics, FailedRequestsLeaveLatencyButNotE2eOrItl) {
  std::vector<RequestResult> rs = {Req("m0", 0, 0, 100, 1000, 10, 10),
                                   Req("m1", 1, 0, 200, 400, 10, 2)};
  rs[1].cancelled = true;
  TrialMetrics t = ComputeMetrics(rs, 2, 1, PercentileMethod::kNearestRank);
  EXPECT_EQ(t.ttft_ms.n, 2u);
  EXPECT_EQ(t.e2e_ms.n, 1u);
  EXPECT_EQ(t.itl_ms.n, 1u);
  EXPECT_DOUBLE_EQ(t.request_per_s, 1.0);         // one completed in 1 s
  EXPECT_TRUE(std::isnan(t.ttft_p95_steady_ms));  // no request after the opening burst of 2
}

TEST(SloValueMs, UsesTheGatePercentileAndMethod) {
  std::vector<RequestResult> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(Req("m" + std::to_string(i), i, i, i + 1, 100, 10, 2));
  TrialMetrics lin = ComputeMetrics(rs, 1, 1, PercentileMethod::kLinear);
  TrialMetrics nr = ComputeMetrics(rs, 1, 1, PercentileMethod::kNearestRank);
  SloGate g{SloMetric::kTtft, 95, 10};
  EXPECT_DOUBLE_EQ(SloValueMs(lin, g), 9.55);
  EXPECT_DOUBLE_EQ(SloValueMs(nr, g), 10);
  g.percentile = 99;
  EXPECT_DOUBLE_EQ(SloValueMs(lin, g), 9.91);
  g.metric = SloMetric::kE2e;
  EXPECT_DOUBLE_EQ(SloValueMs(lin, g), 100);
  g.metric = SloMetric::kItl;
  EXPECT_DOUBLE_EQ(SloValueMs(nr, SloGate{SloMetric::kItl, 50, 1}),
                   (100.0 - 6) / 9);  // ITLs (100 - ttft)/9 for ttft 1..10: 5th smallest has ttft 6
  TrialMetrics empty = ComputeMetrics({}, 1, 1, PercentileMethod::kLinear);
  EXPECT_TRUE(std::isnan(SloValueMs(empty, g)));
}

}  // namespace
}  // namespace capq

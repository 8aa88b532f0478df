#include "capq/measurement/stability.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace capq {
namespace {

using ::testing::HasSubstr;

constexpr MonoNs kS = 1'000'000'000;

// A request intended at `at` seconds, sent `lag_ms` late, first token after `ttft_s` and ending
// after `e2e_s` (both from its actual send).
RequestResult Req(double at, double ttft_s, double e2e_s, double lag_ms = 0) {
  RequestResult r;
  r.http_status = 200;
  r.scheduling_lag_ns = static_cast<MonoNs>(lag_ms * 1e6);
  r.start_ns = static_cast<MonoNs>(at * kS) + r.scheduling_lag_ns + 1;
  r.ttft_ns = static_cast<int64_t>(ttft_s * kS);
  r.e2e_ns = static_cast<int64_t>(e2e_s * kS);
  r.end_ns = r.start_ns + *r.e2e_ns;
  r.completion_tokens = 10;
  return r;
}

struct Trace {
  std::vector<RequestResult> all;
  std::vector<ServerLoadSample> server;
  StabilityVerdict Judge(Stability rule = {}) const {
    StabilityInputs in;
    for (const RequestResult& r : all) in.scheduled.push_back(&r);
    in.measured = in.scheduled;
    in.server = server;
    in.interval_start_ns = 0;
    in.interval_end_ns = 30 * kS;
    in.rule = rule;
    in.slo = {SloGate{SloMetric::kTtft, 95, 2000}};
    return JudgeStability(in);
  }
};

// One request a second, each 1 s long: a steady single stream.
Trace Steady() {
  Trace run;
  for (int i = 0; i < 30; ++i) run.all.push_back(Req(i, 0.2, 1.0));
  return run;
}

// Arrivals faster than service: each request waits longer than the one before.
Trace Growing() {
  Trace run;
  for (int i = 0; i < 30; ++i) run.all.push_back(Req(i, 0.2 + 0.5 * i, 1.0 + 0.5 * i));
  return run;
}

TEST(JudgeStability, ASteadyStreamIsBoundedStationaryAndOnSchedule) {
  const StabilityVerdict v = Steady().Judge();
  EXPECT_TRUE(v.queue_bounded());
  EXPECT_TRUE(v.stationary());
  EXPECT_TRUE(v.schedule_held);
  EXPECT_NEAR(v.client_in_flight.first, 1.0, 0.01);
  EXPECT_NEAR(v.client_in_flight.last, 1.0, 0.01);
  EXPECT_FALSE(v.server_queue.known);  // no samples: the client's count decides alone
  EXPECT_TRUE(v.Failures().empty());
}

TEST(JudgeStability, AGrowingQueueAndDriftingLatencyFailWithTheirNumbers) {
  const StabilityVerdict v = Growing().Judge();
  EXPECT_FALSE(v.queue_bounded());
  EXPECT_FALSE(v.stationary());
  EXPECT_TRUE(v.schedule_held);
  EXPECT_GT(v.client_in_flight.last, v.client_in_flight.bound);
  ASSERT_EQ(v.latency.size(), 1u);
  EXPECT_EQ(v.latency[0].name, "ttft p95");
  const auto failures = v.Failures();
  ASSERT_EQ(failures.size(), 2u);
  EXPECT_THAT(failures[0], HasSubstr("queue_bounded: client in-flight last third"));
  EXPECT_THAT(failures[1], HasSubstr("stationary: ttft p95 last third"));
  // The picture: no server samples, so 60 even steps of the client's count, rising.
  ASSERT_EQ(v.series.size(), 60u);
  EXPECT_LT(v.series.front().in_flight, v.series.back().in_flight);
  EXPECT_EQ(v.series.front().server_waiting, -1);
  // The misses carry the figures their texts show.
  const std::vector<GateMiss> misses = v.Misses();
  ASSERT_EQ(misses.size(), 2u);
  EXPECT_EQ(misses[0].subject, "client in-flight");
  EXPECT_DOUBLE_EQ(misses[0].value, v.client_in_flight.last);
  EXPECT_DOUBLE_EQ(misses[0].bound, v.client_in_flight.bound);
  EXPECT_EQ(misses[1].gate, "stationary");
  EXPECT_TRUE(misses[1].in_ms);
  EXPECT_EQ(misses[1].text, failures[1]);
  // verdict.json's stability section reads back to the same verdict.
  const StabilityVerdict back = StabilityFromJson(StabilityToJson(v));
  EXPECT_EQ(StabilityToJson(back), StabilityToJson(v));
  EXPECT_EQ(back.Failures(), failures);
}

TEST(JudgeStability, TheServerQueueGaugeCanFailABoundedClientCount) {
  Trace run = Steady();
  for (int i = 0; i < 30; ++i) run.server.push_back({i * kS + 1, 1, i < 10 ? 0.0 : 8.0});
  const StabilityVerdict v = run.Judge();
  EXPECT_TRUE(v.client_in_flight.passed);
  EXPECT_TRUE(v.server_queue.known);
  EXPECT_DOUBLE_EQ(v.server_queue.first, 0);
  EXPECT_DOUBLE_EQ(v.server_queue.last, 8);
  EXPECT_DOUBLE_EQ(v.server_queue.bound, 2);  // 0 x 1.25 + 2
  EXPECT_FALSE(v.queue_bounded());
  EXPECT_THAT(v.Failures()[0], HasSubstr("server queue last third 8 > 2"));
  ASSERT_EQ(v.series.size(), 30u);  // one point a server sample
  EXPECT_EQ(v.series.back().server_waiting, 8);
  EXPECT_EQ(v.series.back().in_flight, 1);
}

TEST(JudgeStability, ALateClientDidNotHoldTheSchedule) {
  Trace run = Steady();
  for (size_t i = 0; i < run.all.size(); i += 10)
    run.all[i] = Req(static_cast<double>(i), 0.2, 1.0, 5);
  Stability rule;
  rule.max_send_lateness_ms = 2;
  const StabilityVerdict v = run.Judge(rule);
  EXPECT_FALSE(v.schedule_held);
  EXPECT_GT(v.send_lateness_p99_ms, 2);
  EXPECT_NEAR(v.send_lateness_max_ms, 5, 1e-6);
  EXPECT_THAT(v.Failures()[0], HasSubstr("schedule_held: the client fell behind"));
  rule.max_send_lateness_ms = 6;
  EXPECT_TRUE(run.Judge(rule).schedule_held);
}

TEST(JudgeStability, AnEmptyThirdIsNotStationary) {
  Trace run;
  for (int i = 0; i < 10; ++i) run.all.push_back(Req(i, 0.2, 1.0));  // the first third only
  const StabilityVerdict v = run.Judge();
  EXPECT_FALSE(v.stationary());
  EXPECT_THAT(v.Failures().back(), HasSubstr("no value in the first or last third"));
}

TEST(MeanInFlight, IsTimeWeighted) {
  const RequestResult a = Req(0, 0.1, 2.0), b = Req(1, 0.1, 1.0);
  // [0, 2): a covers 2 s, b covers 1 s -> 1.5 on average.
  EXPECT_NEAR(MeanInFlight({&a, &b}, 0, 2 * kS), 1.5, 1e-6);
}

TEST(CountFromIntendedSend, LatencyGrowsByTheLateness) {
  RequestResult r = Req(1, 0.2, 1.0, 30);
  const MonoNs sent = r.start_ns;
  CountFromIntendedSend(&r);
  EXPECT_EQ(r.start_ns, sent - 30'000'000);
  EXPECT_EQ(*r.ttft_ns, 230'000'000);
  EXPECT_EQ(*r.e2e_ns, 1'030'000'000);
  EXPECT_EQ(r.scheduling_lag_ns, 30'000'000);
}

}  // namespace
}  // namespace capq

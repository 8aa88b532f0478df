// What a mixed row's trial records as sent (metrics.json "sent"): its measured requests in the
// plan's order, the ramp left out, times in the server's seconds after the first send, and on a
// replay the trace sample its first measured request sent.
#include <gtest/gtest.h>

#include <cmath>

#include "../../harness/src/trial/trial_internal.h"
#include "capq/model/plan.h"

namespace capq {
namespace {

PlanRequest Planned(const std::string& id, bool ramp) {
  PlanRequest p;
  p.id = id;
  p.ramp = ramp;
  return p;
}

RequestResult Sent(const std::string& id, MonoNs start_ns, int64_t in, int64_t out) {
  RequestResult r;
  r.id = id;
  r.start_ns = start_ns;
  r.prompt_tokens = in;
  r.completion_tokens = out;
  return r;
}

TEST(MeasureSent, MeasuredRequestsInPlanOrderWithTheirServerCountsAndSendTimes) {
  TrialPlan plan;
  plan.arrival = ArrivalKind::kReplay;
  plan.ramp_requests = 2;
  plan.measured = {Planned("r0", true), Planned("r1", true), Planned("m0", false),
                   Planned("m1", false), Planned("m2", false)};
  // Results in completion order; m1 never went out.
  const std::vector<RequestResult> results = {Sent("m2", 3'000'000'000, 90, 9),
                                              Sent("r0", 500'000'000, 10, 1),
                                              Sent("m0", 1'000'000'000, 70, 7)};
  const SentRequests s = internal::MeasureSent(plan, results, 10);
  EXPECT_EQ(s.first_trace_index, 2);
  ASSERT_EQ(s.requests.size(), 3u);
  EXPECT_EQ(s.requests[0].input_tokens, 70);
  EXPECT_DOUBLE_EQ(s.requests[0].send_s, 0);
  EXPECT_EQ(s.requests[1].input_tokens, -1);
  EXPECT_TRUE(std::isnan(s.requests[1].send_s));
  EXPECT_EQ(s.requests[2].output_tokens, 9);
  EXPECT_DOUBLE_EQ(s.requests[2].send_s, 20);  // 2 s of wall time at time scale 10
  plan.arrival = ArrivalKind::kClosedLoop;
  EXPECT_EQ(internal::MeasureSent(plan, results, 10).first_trace_index, -1);
}

}  // namespace
}  // namespace capq

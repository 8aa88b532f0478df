// Load generator tests against a loopback HTTP/1.1 server (loopback_server.h): failures are
// per-request data. HTTP errors, streams cut or ended by a close, timeouts, refused connections,
// the cancel flag, a completion check that stops the run, and the stall bound.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "loopback_server.h"

namespace capq {
namespace {

using loopback::Describe;
using loopback::LoopbackServer;
using loopback::Plan;
using loopback::Spec;
using ::testing::Contains;
using ::testing::HasSubstr;

TEST(RunLoad, HttpErrorIsDataNotFailure) {
  LoopbackServer server;
  Result<LoadResult> res = RunLoad(Spec(server, 0, 2, 1, R"({"mode":"status500"})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 500);
    EXPECT_EQ(r.body, R"({"object":"error","message":"boom"})");
    EXPECT_TRUE(r.events.empty());
    EXPECT_FALSE(r.cancelled);
    EXPECT_EQ(r.transport_error, "");
    EXPECT_THAT(DecodeRecord(r).errors.at(0), HasSubstr("HTTP status 500: {\"object\":\"error\""));
  }
}

TEST(RunLoad, CutStreamKeepsWhatArrivedAndIsCancelled) {
  LoopbackServer server;
  Result<LoadResult> res = RunLoad(Spec(server, 0, 2, 1, R"({"mode":"cut","n":6})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200);
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.timed_out);
    EXPECT_NE(r.transport_error, "");
    EXPECT_EQ(r.events.size(), 5u);  // role + 4 tokens before the cut
    RequestResult d = DecodeRecord(r);
    EXPECT_EQ(d.nonempty_chunks, 4);
    EXPECT_FALSE(d.saw_done);
    EXPECT_THAT(d.errors.at(0), HasSubstr("transport error"));
  }
}

// A body with neither chunked framing nor a length ends when the server closes the connection
// (RFC 9112 section 6.3, rule 8). Complete, it reads as a clean stream; cut short, it ends just as
// cleanly for libcurl, and only the missing [DONE] tells.
TEST(RunLoad, CloseDelimitedBodyEndsAtTheClose) {
  LoopbackServer server;
  Result<LoadResult> res =
      RunLoad(Spec(server, 0, 2, 1, R"({"mode":"sse","n":4,"framing":"close"})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled);
    EXPECT_FALSE(r.reused_connection);  // the close ended the previous body, so a new connection
    EXPECT_THAT(r.response_headers, Contains("Connection: close"));
    ASSERT_EQ(r.events.size(), 8u) << Describe(r);
    EXPECT_EQ(r.events.back().data, "[DONE]");
    RequestResult d = DecodeRecord(r);
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
  }
  EXPECT_EQ(server.connections.load(), 2);

  LoopbackServer cut;
  res = RunLoad(Spec(cut, 0, 1, 1, R"({"mode":"cut","n":6,"framing":"close"})"));
  ASSERT_TRUE(res.ok());
  const RawRecord& r = res->records.at(0);
  EXPECT_EQ(r.transport_error, "") << Describe(r);
  EXPECT_FALSE(r.cancelled);
  EXPECT_EQ(r.events.size(), 5u);  // role + 4 tokens before the close
  RequestResult d = DecodeRecord(r);
  EXPECT_FALSE(d.saw_done);
  EXPECT_THAT(d.errors, Contains(HasSubstr("the stream ended without data: [DONE]")));
}

TEST(RunLoad, RequestTimeoutCancelsAHungRequest) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 2, 2, R"({"mode":"hang"})");
  spec.request_timeout_s = 0.3;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_TRUE(r.timed_out) << Describe(r);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.http_status, 0);
    EXPECT_THAT(r.transport_error, HasSubstr("timed out"));
    EXPECT_GE(r.end_ns - r.actual_send_ns, 300'000'000);
  }
}

TEST(RunLoad, CancelFlagCutsInFlightAndSkipsTheRest) {
  LoopbackServer server;
  std::atomic<bool> cancel{false};
  LoadSpec spec = Spec(server, 0, 5, 2, R"({"mode":"forever","gap_ms":5})");
  spec.cancel = &cancel;
  std::thread canceller([&] {
    server.WaitFirstEvents(2);
    cancel = true;
  });
  Result<LoadResult> res = RunLoad(spec);
  canceller.join();
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->interrupted);
  ASSERT_EQ(res->records.size(), 5u);
  for (int i = 0; i < 2; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_TRUE(r.cancelled);
    EXPECT_NE(r.actual_send_ns, 0);
    EXPECT_GE(r.events.size(), 2u) << Describe(r);  // what it had is kept
    EXPECT_EQ(r.transport_error, "cancelled: run interrupted");
  }
  for (int i = 2; i < 5; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(r.actual_send_ns, 0);
    EXPECT_EQ(r.transport_error, "not sent: run interrupted");
  }
}

TEST(RunLoad, CompletionCheckStopsTheRunWithoutInterrupting) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 6, 2, R"({"mode":"forever","gap_ms":5})");
  spec.measured[0].body = R"({"mode":"sse","n":2})";
  std::mutex mu;
  std::vector<std::string> checked;
  spec.on_complete_check = [&](const RawRecord& r,
                               const RequestResult&) -> std::optional<std::string> {
    std::lock_guard<std::mutex> l(mu);
    checked.push_back(r.id);
    return r.id == "m0" ? std::optional<std::string>("m0 is broken") : std::nullopt;
  };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_FALSE(res->interrupted);
  EXPECT_EQ(res->stopped_by, "m0");
  EXPECT_EQ(res->stop_reason, "m0 is broken");
  EXPECT_EQ(checked, std::vector<std::string>{"m0"});  // cut streams are not asked about
  const RawRecord& m0 = res->records[0];
  EXPECT_FALSE(m0.cancelled) << Describe(m0);
  EXPECT_EQ(m0.cancelled_by_harness, "");
  // m1 was in flight at the stop; m2 may have taken m0's slot while the check ran. Both are cut,
  // the rest never sent.
  EXPECT_NE(res->records[1].actual_send_ns, 0);
  for (int i = 1; i < 6; ++i) {
    const RawRecord& r = res->records[i];
    EXPECT_TRUE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.cancelled_by_harness, "fail_fast after m0");
    EXPECT_EQ(r.transport_error, r.actual_send_ns == 0
                                     ? "not sent: fail_fast after m0"
                                     : "cancelled by the harness: fail_fast after m0");
    if (i >= 3) {
      EXPECT_EQ(r.actual_send_ns, 0) << Describe(r);
    }
  }
  EXPECT_LE(server.requests.load(), 3);
}

TEST(RunLoad, StallBoundCutsASilentStreamLongBeforeTheRequestTimeout) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 4, 2, R"({"mode":"stall","n":2})");
  spec.request_timeout_s = 60;
  spec.stall_timeout_s = 0.3;
  const MonoNs start = NowNs();
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_LT(NsToS(NowNs() - start), 5.0);
  EXPECT_FALSE(res->interrupted);
  int stalled = 0;
  for (const RawRecord& r : res->records) {
    if (!r.stalled) continue;
    ++stalled;
    EXPECT_EQ(res->stopped_by, r.id);
    EXPECT_TRUE(r.cancelled);
    EXPECT_FALSE(r.timed_out);
    EXPECT_EQ(r.cancelled_by_harness, "") << "a stall is the server's failure";
    EXPECT_EQ(r.events.size(), 3u) << "what arrived before the silence is kept";
    EXPECT_THAT(r.transport_error, HasSubstr("stalled: no byte for 0."));
    EXPECT_GE(r.end_ns - r.last_byte_ns, 300'000'000);
  }
  EXPECT_EQ(stalled, 1);
  EXPECT_THAT(res->stop_reason, HasSubstr("stalled"));
  EXPECT_EQ(res->records[3].cancelled_by_harness, "fail_fast after " + res->stopped_by);
}

// Before the first body byte the wait is the request's TTFT (a queue, a long prefill): an SLO
// matter for the request timeout, not a stall.
TEST(RunLoad, StallBoundWaitsForTheStreamToBegin) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 1, 1, R"({"mode":"hang"})");
  spec.request_timeout_s = 0.8;
  spec.stall_timeout_s = 0.2;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->stopped_by, "");
  EXPECT_FALSE(res->records[0].stalled);
  EXPECT_TRUE(res->records[0].timed_out) << Describe(res->records[0]);
}

TEST(RunLoad, CancelledBeforeStartSendsNothing) {
  LoopbackServer server;
  std::atomic<bool> cancel{true};
  LoadSpec spec = Spec(server, 1, 2, 1, R"({"n":1})");
  spec.cancel = &cancel;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  EXPECT_TRUE(res->interrupted);
  EXPECT_EQ(server.requests.load(), 0);
  for (const RawRecord& r : res->records) EXPECT_EQ(r.actual_send_ns, 0);
}

TEST(RunLoad, ConnectionRefusedIsPerRequestData) {
  int port;
  {
    LoopbackServer gone;
    port = std::stoi(gone.Url().substr(17));  // "http://127.0.0.1:" is 17 characters
  }
  LoadSpec spec;
  spec.url = "http://127.0.0.1:" + std::to_string(port) + "/v1/chat/completions";
  spec.measured = Plan(Phase::kMeasured, 2, "{}");
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 0);
    EXPECT_TRUE(r.cancelled);
    EXPECT_NE(r.transport_error, "");
  }
}

}  // namespace
}  // namespace capq

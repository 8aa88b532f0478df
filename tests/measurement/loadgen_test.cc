// Load generator tests against a loopback HTTP/1.1 server (loopback_server.h): what is sent and
// when (the closed loop, schedules, the in-flight cap, an arrival model that runs dry), the
// request's headers and content coding, the connection pool and its reuse across server closes,
// and setup errors.
#include "capq/measurement/loadgen.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "loopback_server.h"

namespace capq {
namespace {

using loopback::Describe;
using loopback::LoopbackServer;
using loopback::Plan;
using loopback::Spec;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(RunLoad, ClosedLoopBurstWarmupFirstAndCleanStreams) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 2, 6, 2, R"({"mode":"sse","n":5,"gap_ms":10})");
  std::vector<LoadProgress> progress;
  spec.on_progress = [&](const LoadProgress& p) { progress.push_back(p); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const LoadResult& lr = *res;
  ASSERT_EQ(lr.records.size(), 8u);
  EXPECT_FALSE(lr.interrupted);
  size_t events = 0, kernel_stamped = 0;
  for (const RawRecord& r : lr.records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.content_type, "text/event-stream");
    ASSERT_EQ(r.events.size(), 9u) << Describe(r);  // role, 5 tokens, finish, usage, [DONE]
    EXPECT_EQ(r.events.back().data, "[DONE]");
    EXPECT_EQ(r.sse_comments, 1);
    EXPECT_LE(r.intended_send_ns, r.actual_send_ns);
    EXPECT_LT(r.actual_send_ns, r.first_byte_ns);
    EXPECT_LE(r.first_byte_ns, r.first_body_ns);
    EXPECT_LE(r.first_body_ns, r.events.front().arrival_ns);
    EXPECT_LE(r.events.back().arrival_ns, r.end_ns);
    // The kernel's receive stamp, where the loop proved it: after the send, never after the read.
    for (const SseEvent& ev : r.events) {
      kernel_stamped += ev.kernel_ns > 0;
      if (ev.kernel_ns == 0) continue;
      EXPECT_GT(ev.kernel_ns, r.actual_send_ns) << Describe(r);
      EXPECT_LE(ev.kernel_ns, ev.arrival_ns) << Describe(r);
      EXPECT_EQ(ev.stamp_ns(), ev.kernel_ns);
    }
    events += r.events.size();
    RequestResult d = DecodeRecord(r);
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
    EXPECT_EQ(d.completion_tokens, 5);
    EXPECT_EQ(d.nonempty_chunks, 5);
  }
  // Warm-up first, at concurrency 1, each send after the previous completion.
  EXPECT_EQ(lr.records[0].phase, Phase::kWarmup);
  EXPECT_EQ(lr.records[1].phase, Phase::kWarmup);
  EXPECT_GE(lr.records[1].actual_send_ns, lr.records[0].end_ns);
  EXPECT_EQ(lr.records[1].intended_send_ns, lr.records[0].end_ns);
  EXPECT_LE(lr.records[1].end_ns, lr.measured_start_ns);
  // Measured burst: the first C share the burst start; each later one was intended at a completion.
  const RawRecord* m = &lr.records[2];
  EXPECT_EQ(m[0].phase, Phase::kMeasured);
  EXPECT_EQ(m[0].intended_send_ns, m[1].intended_send_ns);
  EXPECT_GE(m[0].intended_send_ns, lr.measured_start_ns);
  for (int i = 2; i < 6; ++i) {
    bool matches_a_completion = false;
    for (int j = 0; j < i; ++j) matches_a_completion |= m[i].intended_send_ns == m[j].end_ns;
    EXPECT_TRUE(matches_a_completion) << m[i].id;
  }
  // The server paces its chunks 10 ms apart, so a read rarely races a new chunk. A connection's
  // first packets may go unstamped: the kernel turns its receive stamps on a moment after the first
  // socket asks.
  EXPECT_GE(kernel_stamped * 2, events) << kernel_stamped << " of " << events;
  EXPECT_LE(server.max_in_flight.load(), 2);  // never more than C in flight
  EXPECT_EQ(server.requests.load(), 8);
  // Keep-alive: 8 requests over at most C connections (the warm-up connection is reused).
  EXPECT_LE(server.connections.load(), 2);
  EXPECT_TRUE(m[5].reused_connection);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().phase, Phase::kMeasured);
  EXPECT_EQ(progress.back().completed, 6);
  EXPECT_EQ(progress.back().failed, 0);
  // Different request texts: outputs differ per request (the server tags them).
  std::set<std::string> outs;
  for (const RawRecord& r : lr.records) outs.insert(DecodeRecord(r).output_sha256);
  EXPECT_EQ(outs.size(), 8u);
}

// Open loop: each request leaves at its scheduled time whatever is in flight, so more streams are
// open at once than any closed loop of C = 1 would allow.
TEST(RunLoad, ScheduledArrivalsSendOnTimeWhateverIsInFlight) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 1, 6, 1, R"({"mode":"sse","n":4,"gap_ms":40})");
  const std::vector<MonoNs> offsets = {0,          20'000'000, 40'000'000,
                                       60'000'000, 80'000'000, 100'000'000};
  spec.measured_arrivals = [&] { return ScheduledArrivals(offsets); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const RawRecord* m = &res->records[1];
  const MonoNs start = m[0].intended_send_ns;
  EXPECT_GE(start, res->measured_start_ns);
  for (size_t i = 0; i < offsets.size(); ++i) {
    EXPECT_EQ(m[i].http_status, 200) << Describe(m[i]);
    EXPECT_EQ(m[i].intended_send_ns - start, offsets[i]) << m[i].id;
    EXPECT_GE(m[i].actual_send_ns, m[i].intended_send_ns) << m[i].id;
  }
  // Each stream lasts ~160 ms while one starts every 20 ms: several are open together.
  EXPECT_GE(server.max_in_flight.load(), 3);
  // The warm-up still ran first, alone.
  EXPECT_LE(res->records[0].end_ns, res->measured_start_ns);
}

// Past 64 streams the connection pool is kept in shards (loadgen_loop.cc, ShardConnections): a
// closed loop's freed slot still reuses its own connection, so C slots never need more than C of
// them.
TEST(RunLoad, ShardedConnectionPoolKeepsClosedLoopReuse) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 600, 150, R"({"mode":"sse","n":2,"gap_ms":5})");
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  int reused = 0;
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    reused += r.reused_connection;
  }
  EXPECT_LE(server.connections.load(), 150);
  EXPECT_EQ(reused, 600 - server.connections.load());
}

// An open loop over shards: a release takes an idle connection of whichever shard has one, so a
// burst after a warm-up of as many streams connects nothing new.
TEST(RunLoad, ShardedConnectionPoolReusesIdleConnectionsOpenLoop) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 40, 40, 200, R"({"mode":"sse","n":2,"gap_ms":5})");
  spec.warmup_concurrency = 40;
  spec.measured_arrivals = [] { return ScheduledArrivals(std::vector<MonoNs>(40, 0)); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  for (const RawRecord& r : res->records) EXPECT_EQ(r.http_status, 200) << Describe(r);
  for (size_t i = 40; i < 80; ++i) EXPECT_TRUE(res->records[i].reused_connection) << i;
  EXPECT_EQ(server.connections.load(), 40);
}

// The in-flight cap holds a due release back until a completion; the release keeps its intended
// time, so the wait shows as lateness, never as a shorter latency.
TEST(RunLoad, InFlightCapDelaysReleasesAndKeepsTheirIntendedTime) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 3, 1, R"({"mode":"sse","n":3,"gap_ms":30})");
  spec.measured_arrivals = [] { return ScheduledArrivals({0, 0, 0}); };
  spec.max_in_flight = 1;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  const std::vector<RawRecord>& m = res->records;
  EXPECT_LE(server.max_in_flight.load(), 1);
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_EQ(m[i].intended_send_ns, m[0].intended_send_ns) << m[i].id;
    EXPECT_GE(m[i].actual_send_ns, m[i - 1].end_ns) << m[i].id;
  }
}

// A schedule shorter than its phase cannot release the rest: the run stops and says so, and the
// requests left are marked unsent, not silently dropped.
TEST(RunLoad, ArrivalModelThatRunsDryStopsTheRun) {
  LoopbackServer server;
  LoadSpec spec = Spec(server, 0, 3, 1, R"({"mode":"sse","n":1,"gap_ms":1})");
  spec.measured_arrivals = [] { return ScheduledArrivals({0}); };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  EXPECT_THAT(res->stop_reason, HasSubstr("released nothing more"));
  EXPECT_EQ(res->records[0].http_status, 200);
  EXPECT_EQ(res->records[2].actual_send_ns, 0);
  EXPECT_TRUE(res->records[2].cancelled);
}

TEST(RunLoad, HeadersAndApiKeyGoOnlyInTheRequest) {
  LoopbackServer server;
  LoadSpec spec =
      Spec(server, 0, 1, 1, R"({"mode":"sse","n":1,"pad":")" + std::string(100000, 'p') + "\"}");
  spec.api_key = "sk-secret-test-key";
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(server.Heads().size(), 1u);
  const std::string head = server.Heads()[0];
  EXPECT_THAT(head, HasSubstr("Authorization: Bearer sk-secret-test-key"));
  EXPECT_THAT(head, HasSubstr("Content-Type: application/json"));
  EXPECT_THAT(head, HasSubstr("Accept: text/event-stream"));
  EXPECT_THAT(head, Not(HasSubstr("Expect:")));  // no 100-continue round trip on large prompts
  EXPECT_THAT(head, HasSubstr("body-bytes: " + std::to_string(spec.measured[0].body.size())));
  EXPECT_EQ(res->records[0].http_status, 200);
  EXPECT_THAT(RawRecordToJson(res->records[0]).dump(), Not(HasSubstr("sk-secret")));

  LoopbackServer bare;
  ASSERT_TRUE(RunLoad(Spec(bare, 0, 1, 1, R"({"n":1})")).ok());
  EXPECT_THAT(bare.Heads().at(0), Not(HasSubstr("Authorization")));
}

// capq asks for no content coding, and still reads a gzip stream that a server sends anyway:
// libcurl inflates each sync-flushed piece as it arrives, and the record keeps the server's
// Content-Encoding. Without CURLOPT_ACCEPT_ENCODING libcurl would hand over the gzip bytes.
TEST(RunLoad, AsksForIdentityAndDecodesAGzipStreamAsItArrives) {
  LoopbackServer server;
  Result<LoadResult> res =
      RunLoad(Spec(server, 0, 2, 1, R"({"mode":"sse","n":4,"gap_ms":50,"coding":"gzip"})"));
  ASSERT_TRUE(res.ok());
  ASSERT_EQ(server.Heads().size(), 2u);
  EXPECT_THAT(server.Heads()[0], HasSubstr("Accept-Encoding: identity"));
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_THAT(r.response_headers, Contains("Content-Encoding: gzip"));
    ASSERT_EQ(r.events.size(), 8u) << Describe(r);  // role, 4 tokens, finish, usage, [DONE]
    EXPECT_EQ(r.events.back().data, "[DONE]");
    // The first token's event came when its piece did, 150 ms before the last token's.
    EXPECT_LT(r.events[1].arrival_ns, r.events[4].arrival_ns);
    RequestResult d = DecodeRecord(r);
    EXPECT_TRUE(d.errors.empty()) << d.errors.front();
    EXPECT_EQ(d.nonempty_chunks, 4);
  }
}

// Servers close keep-alive connections right after a response (or when idle): the next request
// must go out on a fresh connection without an error.
TEST(RunLoad, ServerClosingKeptAliveConnectionsIsNotAnError) {
  LoopbackServer server(LoopbackServer::Options{.close_after_response = true});
  Result<LoadResult> res = RunLoad(Spec(server, 2, 8, 2, R"({"n":2})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled);
  }
  EXPECT_EQ(server.requests.load(), 10);
}

TEST(RunLoad, ReusedConnectionClosedUnderTheRequestIsRetriedCleanly) {
  LoopbackServer server(LoopbackServer::Options{.drop_reused_requests = true});
  Result<LoadResult> res = RunLoad(Spec(server, 0, 4, 1, R"({"n":2})"));
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
    EXPECT_FALSE(r.cancelled) << Describe(r);
    EXPECT_EQ(r.events.size(), 6u) << Describe(r);
  }
  EXPECT_EQ(server.dropped.load(), 3);  // requests 2..4 each met a closing connection first
  EXPECT_EQ(server.requests.load(), 4);
}

TEST(RunLoad, IdleKeepAliveClosedBetweenPhasesReconnects) {
  LoopbackServer server(LoopbackServer::Options{.idle_close_ms = 30});
  LoadSpec spec = Spec(server, 1, 2, 1, R"({"n":2})");
  // Hold the loop after the warm-up so the server closes the idle connection first.
  spec.on_progress = [](const LoadProgress& p) {
    if (p.phase == Phase::kWarmup && p.completed == p.total) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  };
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok());
  for (const RawRecord& r : res->records) {
    EXPECT_EQ(r.http_status, 200) << Describe(r);
    EXPECT_EQ(r.transport_error, "") << Describe(r);
  }
  EXPECT_FALSE(res->records[1].reused_connection);
  EXPECT_EQ(server.connections.load(), 2);
}

TEST(RunLoad, SetupErrors) {
  LoadSpec spec;
  EXPECT_EQ(RunLoad(spec).status().code(), Status::Code::kInvalidArgument);
  spec.url = "ftp://127.0.0.1/x";
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("http:// or https://"));
  spec.url = "http://127.0.0.1:1/x";
  spec.concurrency = 0;
  EXPECT_THAT(RunLoad(spec).status().message(), HasSubstr("concurrency"));
}

TEST(RunLoad, TlsVerificationIsOnByDefault) {
  // A plain-HTTP loopback port spoken to as https fails the handshake; what matters here is that
  // the default spec does not turn verification off.
  LoadSpec spec;
  EXPECT_FALSE(spec.insecure_tls);
}

}  // namespace
}  // namespace capq

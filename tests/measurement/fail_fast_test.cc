// Which failure of one stream breaks which gate, for fail fast: every kind the issue names, the
// row's switches, and the streams the harness itself cut (which break nothing).
#include "capq/measurement/fail_fast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace capq {
namespace {

using ::testing::HasSubstr;

const char* kChunk =
    R"({"id":"c","object":"chat.completion.chunk","model":"sim-small","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]})";
const char* kFinish =
    R"({"id":"c","model":"sim-small","choices":[{"index":0,"delta":{},"finish_reason":"length"}]})";
const char* kUsage =
    R"({"id":"c","model":"sim-small","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":1}})";

// A clean finished measured stream at +1 ms per event.
RawRecord Clean(const std::string& id = "m3") {
  RawRecord r;
  r.id = id;
  r.phase = id[0] == 'w' ? Phase::kWarmup : Phase::kMeasured;
  r.actual_send_ns = r.intended_send_ns = 1'000'000'000;
  r.first_byte_ns = r.first_body_ns = 1'001'000'000;
  r.http_status = 200;
  r.content_type = "text/event-stream";
  MonoNs t = r.first_body_ns;
  for (const char* data : {kChunk, kFinish, kUsage, "[DONE]"}) {
    r.events.push_back(SseEvent{t, data, false});
    t += 1'000'000;
  }
  r.end_ns = r.last_byte_ns = t;
  return r;
}

FailFastRules Rules() {
  Row row;
  row.identity.time_scale = 100;
  row.correctness.stall_timeout_s = 60;
  return FailFastRulesFor(row, "sim-small");
}

TEST(FindStreamBreak, ACleanStreamBreaksNothing) {
  EXPECT_FALSE(FindStreamBreak(Clean(), Rules()));
  EXPECT_DOUBLE_EQ(Rules().stall_timeout_wall_s, 0.6);
}

TEST(FindStreamBreak, ErrorStatusBreaksStatus200) {
  RawRecord r = Clean();
  r.http_status = 503;
  r.events.clear();
  r.body = R"({"error":"overloaded"})";
  auto b = FindStreamBreak(r, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "status_200");
  EXPECT_EQ(b->request_id, "m3");
  EXPECT_THAT(b->Reason(), HasSubstr("stopped at the first broken stream: status_200 on m3: "
                                     "HTTP status 503: {\"error\":\"overloaded\"}"));
}

TEST(FindStreamBreak, ErrorAndMalformedFramesBreakZeroErrors) {
  RawRecord r = Clean();
  r.events[1].data = R"({"error":{"message":"KV cache exhausted"}})";
  auto b = FindStreamBreak(r, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "zero_errors");
  EXPECT_THAT(b->evidence, HasSubstr("error frame: KV cache exhausted"));

  RawRecord m = Clean();
  m.events[0].data = R"({"id":"c","choices":[{"delta":{"content":"h)";
  b = FindStreamBreak(m, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "zero_errors");
  EXPECT_THAT(b->evidence, HasSubstr("malformed JSON"));
}

TEST(FindStreamBreak, ACutConnectionBreaksNoCancellations) {
  RawRecord r = Clean();
  r.events.resize(1);
  r.cancelled = true;
  r.transport_error = "transfer closed with outstanding read data remaining";
  auto b = FindStreamBreak(r, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "no_cancellations");
  EXPECT_THAT(b->evidence, HasSubstr("cut: transfer closed"));
}

TEST(FindStreamBreak, AStallIsNamedInTheServersSeconds) {
  RawRecord r = Clean();
  r.events.resize(1);
  r.last_byte_ns = r.events[0].arrival_ns;
  r.end_ns = r.last_byte_ns + 610'000'000;  // 0.61 wall s = 61 virtual s at x100
  r.stalled = r.cancelled = true;
  r.transport_error = "stalled: no byte for 0.61 wall seconds (the bound is 0.6)";
  auto b = FindStreamBreak(r, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "no_cancellations");
  EXPECT_EQ(b->evidence, "stalled 61.0 s with no byte (the bound is 60.0 s)");
}

TEST(FindStreamBreak, AnotherModelsChunkBreaksModelName) {
  RawRecord r = Clean();
  r.events[0].data = R"({"id":"c","model":"other-7b","choices":[{"delta":{"content":"hi"}}]})";
  auto b = FindStreamBreak(r, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "model_name");
  EXPECT_EQ(b->evidence, "a chunk names model 'other-7b', the row serves 'sim-small'");
}

TEST(FindStreamBreak, AWarmUpFailureIsAnErrorNamedAsAWarmUp) {
  RawRecord r = Clean("w1");
  r.http_status = 500;
  r.events.clear();
  auto b = FindStreamBreak(r, Rules());
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "zero_errors");  // status_200 judges measured streams only
  EXPECT_TRUE(b->warmup);
  EXPECT_THAT(b->Reason(), HasSubstr("zero_errors on w1 (warm-up): HTTP status 500"));
}

TEST(FindStreamBreak, StreamsTheHarnessCutBreakNothing) {
  RawRecord r = Clean();
  r.events.resize(1);
  r.cancelled = true;
  r.cancelled_by_harness = "fail_fast after m2";
  r.transport_error = "cancelled by the harness: fail_fast after m2";
  EXPECT_FALSE(FindStreamBreak(r, Rules()));
  RawRecord unsent;
  unsent.id = "m9";
  unsent.cancelled = true;
  EXPECT_FALSE(FindStreamBreak(unsent, Rules()));
}

TEST(FindStreamBreak, TheRowsSwitchesAreHonoured) {
  Row row;
  row.correctness.fail_fast.enabled = false;
  RawRecord r = Clean();
  r.http_status = 500;
  EXPECT_FALSE(FindStreamBreak(r, FailFastRulesFor(row, "sim-small")));

  // A gate the row switched off does not stop the trial by its own name; zero_errors, which
  // sees every failure, still does.
  Row lenient;
  lenient.correctness.status_200.enabled = false;
  lenient.correctness.model_name.enabled = false;
  auto b = FindStreamBreak(r, FailFastRulesFor(lenient, "sim-small"));
  ASSERT_TRUE(b);
  EXPECT_EQ(b->gate, "zero_errors");
  RawRecord other = Clean();
  other.events[0].data = R"({"model":"other-7b","choices":[{"delta":{"content":"hi"}}]})";
  EXPECT_FALSE(FindStreamBreak(other, FailFastRulesFor(lenient, "sim-small")));
}

}  // namespace
}  // namespace capq

// The real load generator (libcurl) against recorded llama.cpp bytes, served verbatim by the
// replay server. The decoder tests build RawRecords from the recordings by modelling what the load
// generator does (wire_replay.h); this checks that model against the load generator itself: the
// same events, comments, decode and, for the stream cut by SIGTERM (97), the same transport error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "../targets/replay_server.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "wire_replay.h"

namespace capq {
namespace {

const std::string kDir = std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/llamacpp";

// All reads at one instant: only the bytes matter here.
RawRecord Modelled(const replay::RecordedExchange& e) {
  const std::vector<wire::Read> reads = {{2, 0, e.response.size()}};
  return wire::ReplayWire(e.name, e.response, reads, 1, 3).raw;
}

TEST(LoadgenOnRecordedBytes, CurlDeliversWhatTheWireModelAssumes) {
  const std::vector<std::string> names = {"14-chat-stream-max_tokens",
                                          "16-chat-stream-no-stream_options",
                                          "61-immediate-eos-logit_bias-stream",
                                          "51-error-prompt-exceeds-ctx-stream",
                                          "52-prompt-plus-max_tokens-exceeds-ctx-stream",
                                          "97-kill-midstream-sigterm"};
  std::vector<replay::RecordedExchange> ex;
  for (const auto& n : names) ex.push_back(replay::LoadExchange(kDir, n));
  replay::ReplayServer srv(ex);  // all POST /v1/chat/completions: answered in this order

  LoadSpec spec;
  spec.url = srv.url() + "/v1/chat/completions";
  for (size_t i = 0; i < ex.size(); ++i) {
    spec.measured.push_back(PlannedRequest{"m" + std::to_string(i), Phase::kMeasured,
                                           static_cast<int>(i),
                                           replay::RecordedRequestBody(ex[i])});
  }
  spec.concurrency = 1;  // one at a time, so the i-th request gets the i-th recording
  spec.request_timeout_s = 20;
  Result<LoadResult> res = RunLoad(spec);
  ASSERT_TRUE(res.ok()) << res.status().ToString();
  ASSERT_EQ(res->records.size(), ex.size());

  for (size_t i = 0; i < ex.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const RawRecord& got = res->records[i];
    const RawRecord want = Modelled(ex[i]);
    EXPECT_EQ(got.http_status, want.http_status);
    EXPECT_EQ(got.content_type, want.content_type);
    ASSERT_EQ(got.events.size(), want.events.size());
    for (size_t k = 0; k < got.events.size(); ++k) {
      EXPECT_EQ(got.events[k].data, want.events[k].data) << "event " << k;
    }
    EXPECT_EQ(got.body, want.body);
    EXPECT_EQ(got.body_bytes, want.body_bytes);
    EXPECT_EQ(got.sse_comments, want.sse_comments);
    EXPECT_EQ(got.sse_unterminated, want.sse_unterminated);
    EXPECT_EQ(got.cancelled, want.cancelled);
    EXPECT_EQ(got.transport_error, want.transport_error);

    const RequestResult a = DecodeRecord(got), b = DecodeRecord(want);
    EXPECT_EQ(a.nonempty_chunks, b.nonempty_chunks);
    EXPECT_EQ(a.finish_reason, b.finish_reason);
    EXPECT_EQ(a.completion_tokens, b.completion_tokens);
    EXPECT_EQ(a.cached_tokens, b.cached_tokens);
    EXPECT_EQ(a.saw_done, b.saw_done);
    EXPECT_EQ(a.output_sha256, b.output_sha256);
    EXPECT_EQ(a.errors.size(), b.errors.size());
  }
  EXPECT_THAT(srv.unmatched(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace capq

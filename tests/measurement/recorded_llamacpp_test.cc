// The SSE framer and decoder held to real llama.cpp exchanges (tests/data/conformance/llamacpp,
// build b9749): every recorded stream is replayed into the framer exactly as it arrived, one
// Feed() per recorded recv(), de-chunked the way libcurl hands the body to the load generator,
// stamped with the recorded arrival times. The expectations come from MANIFEST.jsonl, which the
// recorder derived from the same bytes, so a drift in capq's framing or decoding fails here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/metrics.h"
#include "capq/measurement/sse.h"
#include "wire_replay.h"

namespace capq {
namespace {

using ::testing::HasSubstr;

const std::string kDir = std::string(CAPQ_SOURCE_DIR) + "/tests/data/conformance/llamacpp/";
constexpr MonoNs kStart = 5'000'000'000;  // the request's send; recorded t_ms count from it

MonoNs At(double t_ms) { return kStart + static_cast<MonoNs>(std::llround(t_ms * 1e6)); }

struct Replayed {
  nlohmann::json manifest;
  std::string request;  // the recorded .req bytes
  RawRecord raw;
  bool framing_complete = false;
};

std::vector<nlohmann::json> Manifest() {
  std::vector<nlohmann::json> out;
  std::ifstream in(kDir + "MANIFEST.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

nlohmann::json ManifestEntry(const std::string& name) {
  for (auto& m : Manifest()) {
    if (m["name"] == name) return m;
  }
  ADD_FAILURE() << "no MANIFEST entry " << name;
  return nlohmann::json::object();
}

bool HasTimes(const nlohmann::json& m) {
  for (const auto& f : m["files"]) {
    if (f.get<std::string>().ends_with(".times.jsonl")) return true;
  }
  return false;
}

// The RawRecord the load generator would have built from the recorded reads (wire_replay.h).
// `split` > 0 re-splits the bytes into reads of that size, each at the recorded time of the read
// it came from.
Replayed Replay(const std::string& name, size_t split = 0) {
  Replayed out;
  out.manifest = ManifestEntry(name);
  out.request = wire::ReadFile(kDir + name + ".req");
  const std::string resp = wire::ReadFile(kDir + name + ".resp");
  std::vector<wire::Read> reads;
  if (HasTimes(out.manifest)) {
    std::ifstream in(kDir + name + ".times.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      auto j = nlohmann::json::parse(line);
      reads.push_back(
          {At(j["t_ms"].get<double>()), j["off"].get<size_t>(), j["len"].get<size_t>()});
    }
  } else {
    // Unstreamed answers were read in one recv() (MANIFEST recv_calls 1).
    reads.push_back({At(out.manifest["t_first_byte_ms"].get<double>()), 0, resp.size()});
  }
  if (split > 0) reads = wire::Resplit(reads, split);
  wire::Replayed w =
      wire::ReplayWire(name, resp, reads, kStart, At(out.manifest["t_end_ms"].get<double>()));
  out.raw = std::move(w.raw);
  out.framing_complete = w.framing_complete;
  return out;
}

std::string AllErrors(const RequestResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

bool AnyError(const RequestResult& r, const std::string& needle) {
  for (const auto& e : r.errors) {
    if (e.find(needle) != std::string::npos) return true;
  }
  return false;
}

std::vector<std::string> StreamNames() {
  std::vector<std::string> names;
  for (const auto& m : Manifest()) {
    if (HasTimes(m)) names.push_back(m["name"]);
  }
  return names;
}

// The corpus has 39 streams; a shrunken copy would make every loop below vacuous.
TEST(RecordedLlamacppStreams, CorpusIsPresent) {
  EXPECT_EQ(StreamNames().size(), 39u);
  EXPECT_EQ(Manifest().size(), 99u);
}

TEST(RecordedLlamacppStreams, EveryStreamDecodesAsTheManifestSays) {
  for (const std::string& name : StreamNames()) {
    SCOPED_TRACE(name);
    const Replayed rep = Replay(name);
    const nlohmann::json& m = rep.manifest;
    const RequestResult r = DecodeRecord(rep.raw);
    EXPECT_EQ(rep.framing_complete, m["framing_complete"].get<bool>());
    EXPECT_EQ(r.http_status, m["status"].get<long>());
    // The recorder counted every SSE block: data events ([DONE] included) and comment blocks.
    EXPECT_EQ(static_cast<int64_t>(rep.raw.events.size()) + rep.raw.sse_comments,
              m["sse_events"].get<int64_t>());
    EXPECT_EQ(rep.raw.sse_comments, m["sse_comments"].get<int64_t>());
    EXPECT_FALSE(rep.raw.sse_overflow);
    EXPECT_EQ(rep.raw.sse_unterminated, 0);
    EXPECT_EQ(r.nonempty_chunks, m["content_deltas"].get<int64_t>());
    const auto& fr = m["finish_reason"];
    EXPECT_EQ(r.finish_reason, fr.empty() ? "" : fr.back().get<std::string>());
    EXPECT_EQ(r.saw_done, m["done_marker"].get<bool>());
    ASSERT_TRUE(r.ttfb_ns.has_value());
    EXPECT_EQ(*r.ttfb_ns, At(m["t_headers_ms"].get<double>()) - kStart);
    if (m["t_first_content_delta_ms"].is_null()) {
      EXPECT_FALSE(r.ttft_ns.has_value());
    } else {
      ASSERT_TRUE(r.ttft_ns.has_value());
      EXPECT_EQ(*r.ttft_ns, At(m["t_first_content_delta_ms"].get<double>()) - kStart);
    }
    // Usage is in a complete stream exactly when the request asked for it
    // (stream_options.include_usage); a cut stream (97) never got that far.
    const bool asked_usage = rep.request.find("\"include_usage\": true") != std::string::npos;
    EXPECT_EQ(asked_usage && m["end"] == "complete", !m["usage"].is_null());
    if (m["usage"].is_null()) {
      EXPECT_FALSE(r.completion_tokens.has_value());
      EXPECT_FALSE(r.prompt_tokens.has_value());
      EXPECT_TRUE(AnyError(r, "no usage object")) << AllErrors(r);
    } else {
      const auto& u = m["usage"];
      EXPECT_EQ(r.completion_tokens, u["completion_tokens"].get<int64_t>());
      EXPECT_EQ(r.prompt_tokens, u["prompt_tokens"].get<int64_t>());
      EXPECT_EQ(r.cached_tokens, u["prompt_tokens_details"]["cached_tokens"].get<int64_t>());
    }
    if (m["end"] == "complete" && !m["usage"].is_null()) {
      EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
    }
    EXPECT_TRUE(r.output_valid_utf8);
  }
}

// The role chunk (delta.role, content null) is not text, and llama.cpp sends it in the same HTTP
// chunk as the first content delta, so the first event and the first content share a read.
TEST(RecordedLlamacppStreams, RoleChunkArrivesWithTheFirstContent) {
  for (const std::string& name : StreamNames()) {
    SCOPED_TRACE(name);
    const Replayed rep = Replay(name);
    const RequestResult r = DecodeRecord(rep.raw);
    ASSERT_FALSE(rep.raw.events.empty());
    EXPECT_THAT(rep.raw.events.front().data,
                HasSubstr(R"("delta":{"role":"assistant","content":null})"));
    ASSERT_GT(r.chunks, 0);
    EXPECT_GT(r.chunks, r.nonempty_chunks);  // the role chunk carries no text
    if (r.ttft_ns) {
      EXPECT_EQ(*r.first_event_ns, *r.ttft_ns);
    }
  }
}

// Without stream_options llama.cpp sends no usage at all (16); its timings ride on the finish
// chunk, so the cache counter is still known while the token counts are not.
TEST(RecordedLlamacppStreams, NoStreamOptionsMeansNoUsage) {
  const RequestResult r = DecodeRecord(Replay("16-chat-stream-no-stream_options").raw);
  EXPECT_FALSE(r.completion_tokens.has_value());
  EXPECT_FALSE(r.prompt_tokens.has_value());
  EXPECT_EQ(r.cached_tokens, 299);  // timings.cache_n on the finish chunk
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.nonempty_chunks, 64);
  EXPECT_TRUE(r.saw_done);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("no usage object"));
}

// EOS sampled first (61): role chunk, finish "stop", usage with completion_tokens 1 (the EOS) and
// not one content delta. TTFT has no value, and nothing counts as a content token.
TEST(RecordedLlamacppStreams, ImmediateEosHasNoTtftAndNoContent) {
  const Replayed rep = Replay("61-immediate-eos-logit_bias-stream");
  const RequestResult r = DecodeRecord(rep.raw);
  EXPECT_FALSE(r.ttft_ns.has_value());
  ASSERT_TRUE(r.first_event_ns.has_value());
  EXPECT_EQ(r.nonempty_chunks, 0);
  EXPECT_EQ(r.output_utf8_bytes, 0);
  EXPECT_EQ(r.content_bytes, 0);
  EXPECT_EQ(r.output_text, "");
  EXPECT_EQ(r.output_sha256, Sha256Hex(""));
  EXPECT_EQ(r.finish_reason, "stop");
  EXPECT_EQ(r.completion_tokens, 1);
  EXPECT_EQ(r.prompt_tokens, 51);
  EXPECT_EQ(r.cached_tokens, 50);
  EXPECT_TRUE(r.saw_done);
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(r.chunks, 3);  // role, finish, usage
  EXPECT_NO_THROW((void)RequestResultToJson(r).dump());
}

// The same request among others: it stays out of the TTFT distribution and out of the
// tokens-per-chunk ratio (it has completion_tokens 1 over no chunk), without a division by zero.
TEST(RecordedLlamacppStreams, ImmediateEosStaysOutOfTtftAndChunkMetrics) {
  const RequestResult none = DecodeRecord(Replay("61-immediate-eos-logit_bias-stream").raw);
  const RequestResult some = DecodeRecord(Replay("60-natural-stop-eos-logit_bias-stream").raw);
  const TrialMetrics t = ComputeMetrics({none, some}, 1, 1.0, PercentileMethod::kLinear);
  EXPECT_EQ(t.ttft_ms.n, 1u);
  ASSERT_EQ(t.ttft_ms_by_arrival.size(), 2u);
  EXPECT_EQ(std::count_if(t.ttft_ms_by_arrival.begin(), t.ttft_ms_by_arrival.end(),
                          [](double v) { return std::isnan(v); }),
            1);
  EXPECT_EQ(t.completion_tokens_total, 25);
  EXPECT_DOUBLE_EQ(t.tokens_per_chunk_mean, 24.0 / 23.0);  // 60 alone: EOS counted, not streamed
}

// SIGTERM mid-stream (97): 30 s of silence, one ":" ping in its own HTTP chunk, then EOF with no
// finish chunk, no usage, no [DONE] and no terminating 0-chunk. The decoder must call it cut.
TEST(RecordedLlamacppStreams, KilledMidStreamIsReportedIncomplete) {
  const Replayed rep = Replay("97-kill-midstream-sigterm");
  EXPECT_FALSE(rep.framing_complete);
  EXPECT_EQ(rep.raw.sse_comments, 1);
  EXPECT_EQ(rep.raw.sse_unterminated, 0);  // the cut fell between events
  const RequestResult r = DecodeRecord(rep.raw);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_FALSE(r.saw_done);
  EXPECT_EQ(r.finish_reason, "");
  EXPECT_EQ(r.nonempty_chunks, 158);
  EXPECT_FALSE(r.completion_tokens.has_value());
  EXPECT_TRUE(r.cancelled);
  EXPECT_TRUE(AnyError(r, "transport error: transfer closed")) << AllErrors(r);
  EXPECT_TRUE(AnyError(r, "without data: [DONE]")) << AllErrors(r);
  EXPECT_TRUE(AnyError(r, "no usage object")) << AllErrors(r);
  // The end is the EOF 30 s later, not the last token.
  ASSERT_TRUE(r.e2e_ns.has_value());
  EXPECT_GT(*r.e2e_ns, 30'000'000'000);

  // Even if the transport had reported no error, the missing [DONE] alone marks the cut.
  RawRecord quiet = rep.raw;
  quiet.transport_error.clear();
  quiet.cancelled = false;
  const RequestResult q = DecodeRecord(quiet);
  EXPECT_TRUE(AnyError(q, "without data: [DONE]")) << AllErrors(q);
  EXPECT_FALSE(q.errors.empty());
}

// A prompt over the slot context with stream:true gets a plain JSON 400, not SSE (51).
TEST(RecordedLlamacppStreams, OverContext400IsAnErrorWithItsMessage) {
  const Replayed rep = Replay("51-error-prompt-exceeds-ctx-stream");
  EXPECT_EQ(rep.raw.content_type, "application/json; charset=utf-8");
  EXPECT_TRUE(rep.raw.events.empty());
  const RequestResult r = DecodeRecord(rep.raw);
  EXPECT_EQ(r.http_status, 400);
  EXPECT_FALSE(r.ttft_ns.has_value());
  EXPECT_FALSE(r.saw_done);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0], HasSubstr("HTTP status 400"));
  EXPECT_THAT(r.errors[0],
              HasSubstr(rep.manifest["error_body"]["message"].get<std::string>()));  // whole text
  EXPECT_THAT(r.errors[0], HasSubstr("exceed_context_size_error"));
}

// A truncated JSON body gets HTTP 500 server_error with nlohmann's parse error text (50).
TEST(RecordedLlamacppStreams, InvalidJson500IsAnErrorWithItsMessage) {
  const Replayed rep = Replay("50-error-invalid-json");
  const RequestResult r = DecodeRecord(rep.raw);
  EXPECT_EQ(r.http_status, 500);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0], HasSubstr("HTTP status 500"));
  EXPECT_THAT(r.errors[0], HasSubstr(rep.manifest["error_body"]["message"].get<std::string>()));
}

// max_tokens -5 is refused before streaming starts: a 400 invalid_request_error (55).
TEST(RecordedLlamacppStreams, NegativeMaxTokens400IsAnError) {
  const RequestResult r = DecodeRecord(Replay("55-max_tokens-negative-stream").raw);
  EXPECT_EQ(r.http_status, 400);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0], HasSubstr("Field 'max_tokens'"));
}

// The framer must not depend on where reads split: byte-at-a-time and 7-byte reads of the same
// recordings give the same events and the same decode as the recorded reads.
TEST(RecordedLlamacppStreams, ReadSplitsDoNotChangeTheDecode) {
  for (const char* name : {"61-immediate-eos-logit_bias-stream", "17-chat-stream-logprobs-on",
                           "97-kill-midstream-sigterm"}) {
    SCOPED_TRACE(name);
    const Replayed ref = Replay(name);
    const RequestResult want = DecodeRecord(ref.raw);
    for (size_t split : {1, 7}) {
      const Replayed rep = Replay(name, split);
      ASSERT_EQ(rep.raw.events.size(), ref.raw.events.size());
      for (size_t i = 0; i < rep.raw.events.size(); ++i) {
        EXPECT_EQ(rep.raw.events[i].data, ref.raw.events[i].data);
      }
      const RequestResult got = DecodeRecord(rep.raw);
      EXPECT_EQ(got.output_sha256, want.output_sha256);
      EXPECT_EQ(got.nonempty_chunks, want.nonempty_chunks);
      EXPECT_EQ(got.completion_tokens, want.completion_tokens);
      EXPECT_EQ(got.saw_done, want.saw_done);
      EXPECT_EQ(got.errors.size(), want.errors.size());
      EXPECT_EQ(rep.raw.sse_comments, ref.raw.sse_comments);
    }
  }
}

}  // namespace
}  // namespace capq

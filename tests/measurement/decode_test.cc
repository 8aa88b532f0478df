#include "capq/measurement/decode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capq/measurement/loadgen.h"

namespace capq {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr MonoNs kStart = 1'000'000'000;
constexpr MonoNs kMs = 1'000'000;

// A 200 SSE record whose events arrive 10 ms apart starting at +100 ms.
RawRecord Stream(const std::vector<std::string>& datas) {
  RawRecord r;
  r.id = "m0";
  r.phase = Phase::kMeasured;
  r.index = 0;
  r.intended_send_ns = kStart - 2000;
  r.actual_send_ns = kStart;
  r.first_byte_ns = kStart + 50 * kMs;
  r.first_body_ns = kStart + 100 * kMs;
  r.http_status = 200;
  r.content_type = "text/event-stream; charset=utf-8";
  MonoNs t = kStart + 100 * kMs;
  for (const auto& d : datas) {
    r.events.push_back(SseEvent{t, d, false});
    t += 10 * kMs;
  }
  r.end_ns = t;
  return r;
}

std::string AllErrors(const RequestResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += e + "\n";
  return s;
}

// server-apis.md section 4: SGLang's chunk shapes.
TEST(DecodeRecord, SglangStream) {
  RawRecord raw = Stream(
      {R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,"finish_reason":null,"matched_stop":null}]})",
       R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"reasoning_content":null,"role":null,"content":"Hello"},"logprobs":null,"finish_reason":null,"matched_stop":null}]})",
       R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null,"matched_stop":null}]})",
       R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","matched_stop":null}]})",
       R"({"id":"a","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2},"reasoning_tokens":0}})",
       "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  ASSERT_TRUE(r.ttft_ns.has_value());
  EXPECT_EQ(*r.ttft_ns, 110 * kMs);  // the "Hello" chunk, not the empty role chunk
  EXPECT_EQ(*r.first_event_ns, 100 * kMs);
  EXPECT_EQ(*r.ttfb_ns, 50 * kMs);
  EXPECT_EQ(*r.e2e_ns, 160 * kMs);
  EXPECT_EQ(r.scheduling_lag_ns, 2000);
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_EQ(r.completion_tokens, 3);
  EXPECT_EQ(r.cached_tokens, 2);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_TRUE(r.saw_done);
  EXPECT_EQ(r.nonempty_chunks, 2);
  EXPECT_EQ(r.chunks, 5);
  EXPECT_EQ(r.output_text, "Hello world");
  EXPECT_EQ(r.output_utf8_bytes, 11);
  EXPECT_EQ(r.output_sha256, Sha256Hex("Hello world"));
  EXPECT_TRUE(r.output_valid_utf8);
}

// The kernel's receive stamp, where the load generator proved it, is the arrival the metrics
// count; one later than the read's own clock cannot be a receive stamp and is not used.
TEST(DecodeRecord, KernelStampIsTheArrivalWhereProven) {
  RawRecord raw =
      Stream({R"({"model":"m","choices":[{"index":0,"delta":{"content":"a"}}]})",
              R"({"model":"m","choices":[{"index":0,"delta":{"content":"b"}}]})",
              R"({"model":"m","choices":[{"index":0,"delta":{"content":"c"}}]})", "[DONE]"});
  raw.events[0].kernel_ns = raw.events[0].arrival_ns - 3 * kMs;  // read 3 ms after it landed
  raw.events[1].kernel_ns = raw.events[1].arrival_ns + 1 * kMs;  // impossible: ignored
  RequestResult r = DecodeRecord(raw);
  ASSERT_TRUE(r.ttft_ns.has_value());
  EXPECT_EQ(*r.ttft_ns, 97 * kMs);
  EXPECT_EQ(*r.first_event_ns, 97 * kMs);
  ASSERT_EQ(r.text_gaps_ms.size(), 2u);
  EXPECT_FLOAT_EQ(r.text_gaps_ms[0], 13.0f);  // 110 (the read's own) - 97 (the kernel's)
  EXPECT_FLOAT_EQ(r.text_gaps_ms[1], 10.0f);
}

// The load's recorder keeps a stream's facts only: no text, no chunk gaps, everything else the
// same, the text's size, UTF-8 check and SHA-256 taken as it arrived.
TEST(StreamDecoder, KeepingFactsOnlyDropsTheTextAndGapsAndNothingElse) {
  RawRecord raw = Stream(
      {R"({"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
       R"({"model":"m","choices":[{"index":0,"delta":{"content":"caf\u00c3"}}]})",
       R"({"model":"m","choices":[{"index":0,"delta":{"content":"\u00a9 \u20ac"}}]})",
       R"({"model":"m","choices":[{"index":0,"delta":{"reasoning":"hm"},"finish_reason":"length"}]})",
       R"({"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}})",
       "[DONE]"});
  const RequestResult all = DecodeRecord(raw);
  StreamDecoder d(raw.actual_send_ns, StreamDecoder::Keep::kFacts);
  for (const SseEvent& ev : raw.events) d.Feed(ev);
  const RequestResult facts = d.Finish(raw);
  EXPECT_EQ(all.text_gaps_ms.size(), 2u);
  EXPECT_FALSE(all.output_text.empty());
  EXPECT_TRUE(facts.text_gaps_ms.empty());
  EXPECT_TRUE(facts.output_text.empty());
  RequestResult same = all;
  same.text_gaps_ms.clear();
  same.output_text.clear();
  EXPECT_EQ(RequestResultToJson(facts), RequestResultToJson(same));
  EXPECT_EQ(facts.output_sha256, Sha256Hex(all.output_text));
  EXPECT_EQ(facts.output_utf8_bytes, static_cast<int64_t>(all.output_text.size()));
  EXPECT_EQ(facts.output_valid_utf8, IsValidUtf8(all.output_text));
}

// vLLM: unset keys are absent; newer versions stream `reasoning`, older `reasoning_content`.
TEST(DecodeRecord, VllmReasoningCountsAsText) {
  RawRecord raw = Stream(
      {R"({"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
       R"({"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning":"think"}}]})",
       R"({"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"more"}}]})",
       R"({"id":"b","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"answer"},"finish_reason":"length"}]})",
       R"({"id":"b","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,"total_tokens":8,"completion_tokens":3}})",
       "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(*r.ttft_ns, 110 * kMs);  // reasoning text is generated text
  EXPECT_EQ(r.reasoning_bytes, 9);
  EXPECT_EQ(r.content_bytes, 6);
  EXPECT_EQ(r.nonempty_chunks, 3);
  EXPECT_EQ(r.output_text, "thinkmoreanswer");
  EXPECT_EQ(r.content_text, "answer");        // what a conversation sends back
  EXPECT_FALSE(r.cached_tokens.has_value());  // vLLM reported no counter here
  EXPECT_EQ(r.finish_reason, "length");
}

// llama.cpp: role chunk with content null; cached prompt tokens in timings.cache_n.
TEST(DecodeRecord, LlamacppTimingsCacheN) {
  RawRecord raw = Stream(
      {R"({"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1,"id":"c","model":"x","object":"chat.completion.chunk"})",
       R"({"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hi"}}],"object":"chat.completion.chunk"})",
       R"({"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":"chat.completion.chunk"})",
       R"({"choices":[],"object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":9,"total_tokens":10},"timings":{"cache_n":1,"prompt_n":8,"prompt_ms":3.1,"predicted_n":1,"predicted_ms":2.0}})",
       "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);
  EXPECT_EQ(r.cached_tokens, 1);
  EXPECT_EQ(r.completion_tokens, 1);
  EXPECT_EQ(r.nonempty_chunks, 1);
}

TEST(DecodeRecord, UsageDetailsWinOverTimings) {
  RawRecord raw = Stream(
      {R"({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]})",
       R"({"choices":[],"usage":{"completion_tokens":1,"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":4}},"timings":{"cache_n":7}})",
       "[DONE]"});
  EXPECT_EQ(DecodeRecord(raw).cached_tokens, 4);
}

TEST(DecodeRecord, ErrorFrameIsReportedWithItsMessage) {
  RawRecord raw = Stream(
      {R"({"choices":[{"index":0,"delta":{"content":"x"}}]})",
       R"({"error":{"object":"error","message":"KV cache exhausted","type":"InternalServerError","param":null,"code":500}})",
       "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0], HasSubstr("event #2"));
  EXPECT_THAT(r.errors[0], HasSubstr("error frame: KV cache exhausted"));
  EXPECT_THAT(AllErrors(r), HasSubstr("no usage object"));
}

TEST(DecodeRecord, MalformedJsonFrame) {
  RawRecord raw =
      Stream({R"({"choices":[{"index":0,"delta":{"content":"x"}}]})", R"({"choices":[{"ind)",
              R"({"choices":[],"usage":{"completion_tokens":1}})", "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("event #2 at +110.000 ms: malformed JSON (17 bytes)"));
  EXPECT_EQ(r.nonempty_chunks, 1);
}

TEST(DecodeRecord, MissingUsageAndMissingDone) {
  RawRecord raw =
      Stream({R"({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]})"});
  RequestResult r = DecodeRecord(raw);
  EXPECT_THAT(AllErrors(r), HasSubstr("no usage object in the stream"));
  EXPECT_THAT(AllErrors(r), HasSubstr("without data: [DONE]"));
  EXPECT_FALSE(r.completion_tokens.has_value());
  EXPECT_FALSE(r.saw_done);
}

// Without a length or chunked framing the server's close ends the body, so a cut is no transport
// error: the missing [DONE] says which framing the stream had, for the reader of the evidence.
TEST(DecodeRecord, MissingDoneNamesACloseDelimitedBody) {
  RawRecord raw = Stream({R"({"choices":[{"index":0,"delta":{"content":"cut"}}]})"});
  raw.response_headers = {"HTTP/1.0 200 OK", "Content-Type: text/event-stream",
                          "Connection: close"};
  EXPECT_THAT(AllErrors(DecodeRecord(raw)),
              HasSubstr("without data: [DONE] (a body with neither length nor chunked framing"));
  raw.response_headers = {"HTTP/1.1 200 OK", "transfer-encoding: chunked"};
  EXPECT_THAT(AllErrors(DecodeRecord(raw)), Not(HasSubstr("chunked framing")));
}

TEST(DecodeRecord, InvalidUtf8InAFrameIsAnError) {
  RawRecord raw = Stream({"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\xfe\"}}]}",
                          R"({"choices":[],"usage":{"completion_tokens":1}})", "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("malformed JSON"));
  EXPECT_THAT(r.errors[0], HasSubstr("\\xff\\xfe"));  // the excerpt shows the bytes, escaped
}

TEST(DecodeRecord, EmptyDeltasGiveNoTtft) {
  RawRecord raw = Stream({R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})",
                          R"({"choices":[{"index":0,"delta":{"content":""}}]})",
                          R"({"choices":[{"index":0,"delta":{},"finish_reason":"length"}]})",
                          R"({"choices":[],"usage":{"completion_tokens":2}})", "[DONE]"});
  RequestResult r = DecodeRecord(raw);
  EXPECT_TRUE(r.errors.empty()) << AllErrors(r);  // the validator's nonempty_deltas gate fails it
  EXPECT_FALSE(r.ttft_ns.has_value());
  EXPECT_EQ(r.nonempty_chunks, 0);
  EXPECT_EQ(r.output_utf8_bytes, 0);
  EXPECT_EQ(r.completion_tokens, 2);
}

TEST(DecodeRecord, HttpErrorBody) {
  RawRecord raw = Stream({});
  raw.http_status = 400;
  raw.content_type = "application/json";
  raw.body = R"({"object":"error","message":"prompt too long"})";
  RequestResult r = DecodeRecord(raw);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_THAT(r.errors[0],
              HasSubstr("HTTP status 400: {\"object\":\"error\",\"message\":\"prompt too long\"}"));
}

TEST(DecodeRecord, NonStreaming200IsAnError) {
  RawRecord raw = Stream({});
  raw.content_type = "application/json";
  raw.body = "{}";
  raw.body_bytes = 2;
  RequestResult r = DecodeRecord(raw);
  EXPECT_THAT(AllErrors(r),
              HasSubstr("response is not an SSE stream (content-type 'application/json'"));
}

TEST(DecodeRecord, DataAfterDone) {
  RawRecord raw =
      Stream({R"({"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]})",
              R"({"choices":[],"usage":{"completion_tokens":1}})", "[DONE]",
              R"({"choices":[{"index":0,"delta":{"content":"late"}}]})"});
  RequestResult r = DecodeRecord(raw);
  ASSERT_EQ(r.errors.size(), 1u) << AllErrors(r);
  EXPECT_THAT(r.errors[0], HasSubstr("data after [DONE]"));
  EXPECT_EQ(r.output_text, "x");
}

TEST(DecodeRecord, TimedOutAndNeverSent) {
  RawRecord raw = Stream({R"({"choices":[{"index":0,"delta":{"content":"x"}}]})"});
  raw.timed_out = raw.cancelled = true;
  raw.transport_error = "Operation timed out after 1000 milliseconds";
  RequestResult r = DecodeRecord(raw);
  EXPECT_TRUE(r.timed_out);
  EXPECT_THAT(r.errors.at(0), HasSubstr("timed out: Operation timed out"));

  RawRecord unsent;
  unsent.id = "m9";
  unsent.cancelled = true;
  unsent.transport_error = "not sent: run interrupted";
  RequestResult u = DecodeRecord(unsent);
  EXPECT_EQ(u.start_ns, 0);
  EXPECT_FALSE(u.e2e_ns.has_value());
  EXPECT_THAT(u.errors.at(0), HasSubstr("never sent"));
}

TEST(DecodeRecord, TruncatedAndUnterminatedFramesAreErrors) {
  RawRecord raw = Stream({R"({"choices":[{"index":0,"delta":{"content":"x"}}]})"});
  raw.events[0].truncated = true;
  raw.sse_overflow = true;
  raw.sse_unterminated = 1;
  std::string errs = AllErrors(DecodeRecord(raw));
  EXPECT_THAT(errs, HasSubstr("truncated at"));
  EXPECT_THAT(errs, HasSubstr("size cap"));
  EXPECT_THAT(errs, HasSubstr("ended inside an SSE event"));
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_FALSE(IsValidUtf8("\xc3"));                                 // truncated
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));                             // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));                         // surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));                     // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(Sha256, KnownVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(RawRecordJson, RoundTripKeepsEveryByte) {
  RawRecord raw = Stream({"{\"ok\":1}", std::string("bad \xff\xfe bytes\0zero", 18), "[DONE]"});
  raw.events[1].truncated = true;
  raw.body = "\x80\x81";
  raw.response_headers = {"HTTP/1.1 200 OK", "Content-Type: text/event-stream"};
  raw.transport_error = "x";
  raw.timed_out = true;
  raw.sse_comments = 4;
  raw.reused_connection = true;
  nlohmann::json j = RawRecordToJson(raw);
  const std::string line = j.dump();  // must not throw on the invalid bytes
  Result<RawRecord> back = RawRecordFromJson(nlohmann::json::parse(line));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->events.size(), 3u);
  EXPECT_EQ(back->events[1].data, raw.events[1].data);
  EXPECT_TRUE(back->events[1].truncated);
  EXPECT_EQ(back->events[2].arrival_ns, raw.events[2].arrival_ns);
  EXPECT_EQ(back->body, raw.body);
  EXPECT_EQ(back->response_headers, raw.response_headers);
  EXPECT_EQ(back->content_type, raw.content_type);
  EXPECT_EQ(back->intended_send_ns, raw.intended_send_ns);
  EXPECT_EQ(back->first_body_ns, raw.first_body_ns);
  EXPECT_TRUE(back->timed_out);
  EXPECT_EQ(back->sse_comments, 4);
  EXPECT_TRUE(back->reused_connection);
  EXPECT_EQ(RawRecordToJson(*back).dump(), line);
}

// A body built at release is written and read back; a planned one (empty here) is not written.
TEST(RawRecordJson, RequestBodyOnlyWhenBuiltAtRelease) {
  RawRecord raw = Stream({"[DONE]"});
  EXPECT_FALSE(RawRecordToJson(raw).contains("request_body"));
  raw.request_body = R"({"messages":[{"role":"user","content":"hi \u00e9"}]})";
  Result<RawRecord> back = RawRecordFromJson(nlohmann::json::parse(RawRecordToJson(raw).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->request_body, raw.request_body);
  raw.request_body = std::string("not utf-8 \xff", 11);
  back = RawRecordFromJson(nlohmann::json::parse(RawRecordToJson(raw).dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->request_body, raw.request_body);
}

TEST(RawRecordJson, MissingKeyIsNamed) {
  nlohmann::json j = RawRecordToJson(Stream({"[DONE]"}));
  j.erase("end_ns");
  Result<RawRecord> back = RawRecordFromJson(j);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("missing key 'end_ns'"));
  j = RawRecordToJson(Stream({"[DONE]"}));
  j["events"][0][1] = nlohmann::json{{"b64", "!!"}};
  back = RawRecordFromJson(j);
  ASSERT_FALSE(back.ok());
  EXPECT_THAT(back.status().message(), HasSubstr("'events'"));
}

}  // namespace
}  // namespace capq

// The raw evidence's event lines read in place: what RawEventLine writes comes back as the
// generic parse reads it, any other line is left to the generic parse, and a whole evidence file
// reads back to the texts, digests and errors its streams had, or to the error naming the file and
// the line that does not read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/evidence_log.h"
#include "capq/measurement/raw_evidence.h"
#include "damage.h"

namespace capq {
namespace {

std::string TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path().string() + "/capq-event-line-" +
         std::to_string(::getpid()) + "-" + name;
}

// What the generic parse gives for an event line: the id and the event, or false.
bool ReadGenerically(const std::string& line, std::string* id, SseEvent* ev) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ev") || !j["ev"].is_string()) {
    return false;
  }
  Result<SseEvent> e = RawEventFromJson(j);
  if (!e.ok()) return false;
  *id = j["ev"];
  *ev = *e;
  return true;
}

void ExpectSame(const SseEvent& a, const SseEvent& b, const std::string& line) {
  EXPECT_EQ(a.arrival_ns, b.arrival_ns) << line;
  EXPECT_EQ(a.wake_ns, b.wake_ns) << line;
  EXPECT_EQ(a.kernel_ns, b.kernel_ns) << line;
  EXPECT_EQ(a.data, b.data) << line;
  EXPECT_EQ(a.truncated, b.truncated) << line;
}

std::vector<SseEvent> Events() {
  std::vector<SseEvent> out;
  const std::vector<std::string> datas = {
      R"({"id":"x","model":"m","choices":[{"index":0,"delta":{"content":"say \"hi\"\\n"}}]})",
      "é漢😀 and a raw \x01\x1f control",
      "",
      "[DONE]",
      "quote \" backslash \\ slash / tab \t newline \n",
      std::string(5000, 'x'),
  };
  MonoNs t = 9'955'321'680'268;
  for (size_t i = 0; i < datas.size(); ++i) {
    SseEvent ev{t += 1000, datas[i], false, t - 500};
    if (i % 2 == 0) ev.kernel_ns = t - 200;
    out.push_back(ev);
  }
  out.push_back(SseEvent{0, "truncated", true, 0});
  out.push_back(SseEvent{-5, "negative stamps", false, -7});
  return out;
}

TEST(ParseRawEventLine, ReadsBackWhatRawEventLineWrote) {
  for (const std::string& id : {std::string("m17"), std::string("w\"0\\é")}) {
    for (const SseEvent& ev : Events()) {
      const std::string line = RawEventLine(id, ev);
      std::string got_id = "stale", want_id;
      SseEvent got{1, "stale", true, 2, 3}, want;
      ASSERT_TRUE(ParseRawEventLine(line, &got_id, &got)) << line;
      ASSERT_TRUE(ReadGenerically(line, &want_id, &want)) << line;
      EXPECT_EQ(got_id, id);
      EXPECT_EQ(got_id, want_id);
      ExpectSame(got, ev, line);
      ExpectSame(got, want, line);
    }
  }
}

TEST(ParseRawEventLine, LeavesEveryOtherLayoutToTheGenericParse) {
  const std::vector<std::string> lines = {
      RawEventLine("m0", SseEvent{1, "\xff not utf-8", false, 1}),  // data as {"b64": ...}
      RawEventLine("\xff", SseEvent{1, "x", false, 1}),             // the id as {"b64": ...}
      R"({"ev":"m0","t":1,"data":"x"})",                            // no wake stamp
      R"({"ev": "m0","t":1,"w":1,"data":"x"})",
      R"({"t":1,"ev":"m0","w":1,"data":"x"})",
      R"({"ev":"m0","t":1.0,"w":1,"data":"x"})",
      R"({"ev":"m0","t":1e3,"w":1,"data":"x"})",
      R"({"ev":"m0","t":01,"w":1,"data":"x"})",
      R"({"ev":"m0","t":1234567890123456789,"w":1,"data":"x"})",
      R"({"ev":"m0","t":1,"w":1,"data":"x","truncated":false})",
      R"({"ev":"m0","t":1,"w":1,"data":"x","extra":1})",
      R"({"ev":"m0","t":1,"w":1,"data":"x"} )",
      R"({"ev":"m0","t":1,"w":1,"data":"x")",
      R"({"ev":"m0","t":1,"w":1,"data":"\x"})",
      R"({"ev":"m0","t":1,"w":1,"data":"\udc00"})",
      "{\"ev\":\"m0\",\"t\":1,\"w\":1,\"data\":\"raw \x01\"}",
      "{\"ev\":\"m0\",\"t\":1,\"w\":1,\"data\":\"half \xC3\"}",
      R"({"ev":"m0","t":"1","w":1,"data":"x"})",
      R"({"sent":"m0","t":1})",
  };
  for (const std::string& line : lines) {
    std::string id;
    SseEvent ev;
    EXPECT_FALSE(ParseRawEventLine(line, &id, &ev)) << line;
  }
}

// Lines the writer wrote, then damaged: whatever the reader accepts, the generic parse reads the
// same way.
TEST(ParseRawEventLine, AgreesWithTheGenericParseOnDamagedLines) {
  std::vector<std::string> lines;
  for (const SseEvent& ev : Events()) {
    if (ev.data.size() < 1000) lines.push_back(RawEventLine("m3", ev));
  }
  std::string alphabet = "\"\\{}[],:019-.eu/ \x01\xC3\xA9\xED\xA0\xFF";
  alphabet.push_back('\0');
  std::mt19937 rng(30);
  int accepted = 0;
  for (int n = 0; n < 30000; ++n) {
    std::string s = lines[rng() % lines.size()];
    testing::DamageOnce(&s, rng, alphabet, false);
    std::string id, want_id;
    SseEvent got, want;
    if (!ParseRawEventLine(s, &id, &got)) continue;
    ++accepted;
    ASSERT_TRUE(ReadGenerically(s, &want_id, &want)) << "accepted what the parse refuses: " << s;
    ASSERT_EQ(id, want_id) << s;
    ExpectSame(got, want, s);
    if (HasFailure()) return;
  }
  EXPECT_GT(accepted, 1000);
}

// ---- Whole files ------------------------------------------------------------------------------

constexpr MonoNs kStart = 1'000'000'000;
constexpr MonoNs kMs = 1'000'000;

std::string Chunk(const std::string& content_json) {
  return R"({"id":"c","object":"chat.completion.chunk","created":1,"model":"sim","choices":[{"index":0,"delta":{"reasoning_content":null,"content":)" +
         content_json + R"(},"logprobs":null,"finish_reason":null}]})";
}
std::string UsageChunk(int completion) {
  return R"({"id":"c","model":"sim","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":)" +
         std::to_string(completion) + R"(,"prompt_tokens_details":{"cached_tokens":0}}})";
}

RawRecord Record(const std::string& id, std::vector<std::string> datas, bool whole = true) {
  RawRecord r;
  r.id = id;
  r.intended_send_ns = r.actual_send_ns = kStart;
  r.first_byte_ns = kStart + kMs;
  r.http_status = 200;
  r.content_type = "text/event-stream";
  r.response_headers = {"HTTP/1.1 200 OK", "Transfer-Encoding: chunked"};
  MonoNs t = kStart + 2 * kMs;
  for (std::string& d : datas) {
    SseEvent ev{t, std::move(d), false, t - 1000};
    ev.kernel_ns = t - 400;
    r.events.push_back(std::move(ev));
    t += 3 * kMs;
  }
  if (!whole) {
    r.transport_error = "Connection reset by peer";
    r.cancelled = true;
  }
  r.end_ns = t;
  return r;
}

struct Written {
  std::string path;
  std::vector<RawRecord> records;
};

// The streams interleaved event by event, as the recorder writes them.
Written Write(const std::string& name, EvidenceCompression c, std::vector<RawRecord> records) {
  Written w{TempPath(name), std::move(records)};
  auto out = EvidenceWriter::Create(w.path, c);
  EXPECT_TRUE(out.ok());
  (*out)->Append(R"({"schema":"capq/raw/v2"})");
  size_t most = 0;
  for (const RawRecord& r : w.records) {
    (*out)->Append(RawSentLine(r.id, r.actual_send_ns));
    most = std::max(most, r.events.size());
  }
  for (size_t k = 0; k < most; ++k) {
    for (const RawRecord& r : w.records) {
      if (k < r.events.size()) (*out)->Append(RawEventLine(r.id, r.events[k]));
    }
  }
  for (const RawRecord& r : w.records) (*out)->Append(RawRecordLine(r));
  (*out)->Append(R"({"end":{"interrupted":false}})");
  EXPECT_TRUE((*out)->Close().ok());
  return w;
}

std::vector<RequestResult> ReadBack(const std::string& path) {
  std::vector<RequestResult> got;
  auto sum = ReadRawEvidence(path, [&](RawRecord&&, RequestResult&& d) { got.push_back(d); });
  EXPECT_TRUE(sum.ok()) << sum.status().ToString();
  return got;
}

class EvidenceReadBack : public ::testing::TestWithParam<EvidenceCompression> {};

TEST_P(EvidenceReadBack, TextsDigestsAndErrorsComeBackAsStreamed) {
  const std::string escaped = R"("say \"hi\"\n\t\\ \u00e9\ud83d\ude00 \/")";
  const std::string escaped_text = "say \"hi\"\n\t\\ \xC3\xA9\xF0\x9F\x98\x80 /";
  Written w = Write(
      std::string("whole-") + EvidenceCompressionName(GetParam()), GetParam(),
      {
          // Multi-byte characters, one or two to a chunk, and escapes.
          Record("m0", {Chunk(R"("")"), Chunk(R"("é")"), Chunk(R"("漢😀")"), Chunk(escaped),
                        UsageChunk(4), "[DONE]"}),
          // Empty texts: the role chunk, a null content, an empty reasoning text.
          Record("m1",
                 {Chunk(R"("")"), Chunk("null"),
                  R"({"model":"sim","choices":[{"index":0,"delta":{"reasoning_content":""}}]})",
                  UsageChunk(0), "[DONE]"}),
          // A character cut in half across two chunks: neither is JSON (nor UTF-8).
          Record("m2", {Chunk("\"a\xE6\xBC\""), Chunk("\"\xA2\""), UsageChunk(2), "[DONE]"}),
          // An error frame, then the server cut the connection.
          Record("m3", {Chunk(R"("partial")"), R"({"error":{"message":"out of memory"}})"},
                 /*whole=*/false),
      });
  const std::vector<RequestResult> got = ReadBack(w.path);
  ASSERT_EQ(got.size(), 4u);

  const std::string m0_text = "é漢😀" + escaped_text;
  EXPECT_EQ(got[0].output_text, m0_text);
  EXPECT_EQ(got[0].content_text, m0_text);
  EXPECT_EQ(got[0].output_sha256, Sha256Hex(m0_text));
  EXPECT_EQ(got[0].chunks, 5);
  EXPECT_EQ(got[0].nonempty_chunks, 3);
  EXPECT_EQ(got[0].completion_tokens, 4);
  EXPECT_EQ(got[0].cached_tokens, 0);
  EXPECT_EQ(got[0].text_gaps_ms, std::vector<float>({3.0f, 3.0f}));
  EXPECT_EQ(got[0].ttft_ns, 5 * kMs - 400) << "the kernel's stamp of the first text";
  EXPECT_TRUE(got[0].errors.empty()) << got[0].errors[0];

  EXPECT_EQ(got[1].output_text, "");
  EXPECT_EQ(got[1].output_sha256, Sha256Hex(""));
  EXPECT_EQ(got[1].chunks, 4);
  EXPECT_EQ(got[1].nonempty_chunks, 0);
  EXPECT_FALSE(got[1].ttft_ns.has_value());
  EXPECT_TRUE(got[1].errors.empty()) << got[1].errors[0];

  EXPECT_EQ(got[2].output_text, "");
  EXPECT_EQ(got[2].chunks, 1);
  ASSERT_EQ(got[2].errors.size(), 2u);
  EXPECT_EQ(got[2].errors[0].rfind("event #1 at +2.000 ms: malformed JSON (", 0), 0u)
      << got[2].errors[0];
  EXPECT_EQ(got[2].errors[1].rfind("event #2 at +5.000 ms: malformed JSON (", 0), 0u)
      << got[2].errors[1];

  EXPECT_EQ(got[3].output_text, "partial");
  EXPECT_EQ(got[3].transport_error, "Connection reset by peer");
  ASSERT_EQ(got[3].errors.size(), 4u);
  EXPECT_EQ(got[3].errors[0], "transport error: Connection reset by peer");
  EXPECT_EQ(got[3].errors[1], "event #2 at +5.000 ms: error frame: out of memory");
  EXPECT_EQ(got[3].errors[2], "the stream ended without data: [DONE]");
  EXPECT_EQ(got[3].errors[3], "no usage object in the stream (server token counts unknown)");

  // The whole-record decode of each stream says the same.
  for (size_t i = 0; i < got.size(); ++i) {
    const RequestResult want = DecodeRecord(w.records[i]);
    EXPECT_EQ(got[i].output_text, want.output_text);
    EXPECT_EQ(got[i].output_sha256, want.output_sha256);
    EXPECT_EQ(got[i].errors, want.errors);
    EXPECT_EQ(got[i].text_gaps_ms, want.text_gaps_ms);
  }
  std::filesystem::remove(w.path);
}

// A damaged line is named by file and line, whether it looked like capq's layout or not.
TEST_P(EvidenceReadBack, ADamagedLineIsNamedByFileAndLine) {
  const std::string name = std::string("bad-") + EvidenceCompressionName(GetParam()) + ".jsonl";
  struct Case {
    std::string line;
    std::string error;
  };
  const std::vector<Case> cases = {
      {R"({"ev":"m0","t":1,"w":1,"data":"x")", "not a JSON object"},
      {R"({"ev":"m0","t":1,"w":1,"data":"x"}})", "not a JSON object"},
      {R"({"ev":"m0","t":"1","w":1,"data":"x"})",
       "raw record: key 't': [json.exception.type_error.302] type must be number, but is string"},
      {R"({"ev":"m0","t":1,"w":1})", "raw event: missing key 'data'"},
      {R"({"ev":"m9","t":1,"w":1,"data":"x"})", "an event of m9, which was not sent"},
      {R"({"ev":"m9","t":1.5,"w":1,"data":"x"})", "an event of m9, which was not sent"},
      {R"({"ev":7,"t":1,"w":1,"data":"x"})", "the request id is not a string"},
      {R"({"ev":"m0","t":1,"w":1,"data":"\ud800"})", "not a JSON object"},
  };
  for (const Case& c : cases) {
    const std::string path = TempPath(name);
    {
      auto out = EvidenceWriter::Create(path, GetParam());
      ASSERT_TRUE(out.ok());
      (*out)->Append(R"({"schema":"capq/raw/v2"})");
      (*out)->Append(RawSentLine("m0", kStart));
      (*out)->Append(RawEventLine("m0", SseEvent{kStart + kMs, Chunk(R"("ok")"), false, 0}));
      (*out)->Append(c.line);
      ASSERT_TRUE((*out)->Close().ok());
    }
    auto sum = ReadRawEvidence(path, [](RawRecord&&, RequestResult&&) {});
    ASSERT_FALSE(sum.ok()) << c.line;
    EXPECT_EQ(sum.status().message(),
              std::filesystem::path(path).filename().string() + ":4: " + c.error)
        << c.line;
    std::filesystem::remove(path);
  }
}

INSTANTIATE_TEST_SUITE_P(Both, EvidenceReadBack,
                         ::testing::Values(EvidenceCompression::kNone, EvidenceCompression::kZstd),
                         [](const auto& info) {
                           return std::string(EvidenceCompressionName(info.param));
                         });

}  // namespace
}  // namespace capq

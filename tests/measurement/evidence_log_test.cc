// The evidence file streamed to disk: lines survive a round trip plain and compressed, a file cut
// short reads back up to its last whole line and says it was cut, and the one-pass reader decodes
// each stream exactly as a whole-record decode does.
#include "capq/measurement/evidence_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/raw_evidence.h"

namespace capq {
namespace {

std::string TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path().string() + "/capq-evidence-" +
         std::to_string(::getpid()) + "-" + name;
}

std::vector<std::string> ReadAll(const std::string& path, std::string* cut) {
  auto r = EvidenceReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  std::vector<std::string> lines;
  std::string line;
  while ((*r)->Next(&line)) lines.push_back(line);
  *cut = (*r)->cut();
  return lines;
}

class EvidenceRoundTrip : public ::testing::TestWithParam<EvidenceCompression> {};

TEST_P(EvidenceRoundTrip, LinesComeBackInOrder) {
  const std::string path = TempPath(EvidenceCompressionName(GetParam()));
  auto w = EvidenceWriter::Create(path, GetParam());
  ASSERT_TRUE(w.ok());
  std::vector<std::string> want;
  for (int i = 0; i < 20000; ++i) {
    want.push_back("{\"i\":" + std::to_string(i) + ",\"data\":\"" + std::string(i % 97, 'x') +
                   "\"}");
    (*w)->Append(want.back());
    if (i % 1000 == 0) {
      ASSERT_TRUE((*w)->Flush().ok());
    }
  }
  ASSERT_TRUE((*w)->Close().ok());
  std::string cut;
  EXPECT_EQ(ReadAll(path, &cut), want);
  EXPECT_EQ(cut, "");
  if (GetParam() == EvidenceCompression::kZstd) {
    EXPECT_LT((*w)->bytes_out() * 5, (*w)->bytes_in()) << "repetitive JSON compresses well";
  }
  std::filesystem::remove(path);
}

// A process killed after a Flush(): the lines flushed are all there, the reader says it was cut.
TEST_P(EvidenceRoundTrip, AFileCutAfterAFlushKeepsEveryFlushedLine) {
  const std::string path = TempPath(std::string("cut-") + EvidenceCompressionName(GetParam()));
  auto w = EvidenceWriter::Create(path, GetParam());
  ASSERT_TRUE(w.ok());
  for (int i = 0; i < 100; ++i) (*w)->Append("{\"line\":" + std::to_string(i) + "}");
  ASSERT_TRUE((*w)->Flush().ok());
  const auto flushed = std::filesystem::file_size(path);
  (*w)->Append("{\"line\":\"after the flush, never written\"}");
  // Copy the file as it is now (what a kill leaves), plus half a line of garbage.
  const std::string copy = path + ".killed";
  std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
  std::ofstream(copy, std::ios::app | std::ios::binary) << "{\"li";
  ASSERT_EQ(std::filesystem::file_size(copy), flushed + 4);
  std::string cut;
  std::vector<std::string> lines = ReadAll(copy, &cut);
  ASSERT_EQ(lines.size(), 100u);
  EXPECT_EQ(lines.back(), "{\"line\":99}");
  EXPECT_NE(cut, "") << "a cut file must say so";
  ASSERT_TRUE((*w)->Close().ok());
  std::filesystem::remove(path);
  std::filesystem::remove(copy);
}

INSTANTIATE_TEST_SUITE_P(Both, EvidenceRoundTrip,
                         ::testing::Values(EvidenceCompression::kNone, EvidenceCompression::kZstd),
                         [](const auto& info) {
                           return std::string(EvidenceCompressionName(info.param));
                         });

RawRecord Stream(const std::string& id, MonoNs start) {
  RawRecord r;
  r.id = id;
  r.phase = Phase::kMeasured;
  r.actual_send_ns = r.intended_send_ns = start;
  r.first_byte_ns = start + 1'000'000;
  r.http_status = 200;
  r.content_type = "text/event-stream";
  const char* chunk = R"({"model":"m","choices":[{"index":0,"delta":{"content":"w%d "}}]})";
  for (int k = 0; k < 5; ++k) {
    char buf[160];
    std::snprintf(buf, sizeof buf, chunk, k);
    r.events.push_back(
        SseEvent{start + (k + 2) * 1'000'000, buf, false, start + (k + 2) * 999'000});
  }
  r.events[1].kernel_ns = r.events[1].arrival_ns - 400'000;  // the kernel's proven stamp
  r.events.push_back(SseEvent{start + 8'000'000,
                              R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}})",
                              false, 0});
  r.events.push_back(SseEvent{start + 9'000'000, "[DONE]", false, 0});
  r.events.push_back(SseEvent{start + 9'500'000, "\xff not utf-8", false, 0});  // data after DONE
  r.end_ns = start + 10'000'000;
  return r;
}

// Two streams interleaved as the recorder writes them; the pass decodes each as DecodeRecord does.
TEST(RawEvidence, OnePassDecodesInterleavedStreamsLikeTheWholeRecord) {
  const std::string path = TempPath("raw.jsonl.zst");
  const RawRecord a = Stream("m0", 1'000'000'000), b = Stream("m1", 1'000'500'000);
  auto w = EvidenceWriter::Create(path, EvidenceCompression::kZstd);
  ASSERT_TRUE(w.ok());
  (*w)->Append(R"({"schema":"capq/raw/v2"})");
  (*w)->Append(RawSentLine(a.id, a.actual_send_ns));
  (*w)->Append(RawSentLine(b.id, b.actual_send_ns));
  for (size_t k = 0; k < a.events.size(); ++k) {
    (*w)->Append(RawEventLine(a.id, a.events[k]));
    (*w)->Append(RawEventLine(b.id, b.events[k]));
  }
  (*w)->Append(RawRecordLine(b));
  (*w)->Append(RawRecordLine(a));
  (*w)->Append(R"({"end":{"interrupted":false}})");
  ASSERT_TRUE((*w)->Close().ok());

  std::vector<RequestResult> got;
  auto sum = ReadRawEvidence(path, [&](RawRecord&&, RequestResult&& d) { got.push_back(d); });
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->records, 2);
  EXPECT_EQ(sum->unfinished, 0);
  EXPECT_EQ(sum->end["interrupted"], false);
  ASSERT_EQ(got.size(), 2u);
  for (const auto& [want, have] : {std::pair{DecodeRecord(b), got[0]}, {DecodeRecord(a), got[1]}}) {
    EXPECT_EQ(have.id, want.id);
    EXPECT_EQ(have.output_sha256, want.output_sha256);
    EXPECT_EQ(have.ttft_ns, want.ttft_ns);
    EXPECT_EQ(have.completion_tokens, want.completion_tokens);
    EXPECT_EQ(have.text_gaps_ms, want.text_gaps_ms);
    EXPECT_EQ(have.errors, want.errors);
    ASSERT_EQ(have.errors.size(), 1u) << "the data after [DONE] is an error";
  }
  auto file = ReadRawRecords(path);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(file->records.size(), 2u);
  EXPECT_EQ(file->records[1].events.size(), a.events.size());
  EXPECT_EQ(file->records[1].events.back().data, a.events.back().data) << "bytes survive";
  EXPECT_EQ(file->records[1].events[0].wake_ns, a.events[0].wake_ns);
  EXPECT_EQ(file->records[1].events[1].kernel_ns, a.events[1].kernel_ns);
  EXPECT_EQ(file->records[1].events[0].kernel_ns, 0) << "none written, none read";
  std::filesystem::remove(path);
}

// A killed trial's file: no end line, a request still in flight; the ended ones are whole.
TEST(RawEvidence, AFileWithoutItsEndSaysHowManyRequestsWereStillInFlight) {
  const std::string path = TempPath("raw.jsonl");
  const RawRecord a = Stream("m0", 1'000'000'000);
  auto w = EvidenceWriter::Create(path, EvidenceCompression::kNone);
  ASSERT_TRUE(w.ok());
  (*w)->Append(R"({"schema":"capq/raw/v2"})");
  (*w)->Append(RawSentLine("m0", a.actual_send_ns));
  (*w)->Append(RawSentLine("m1", a.actual_send_ns));
  (*w)->Append(RawEventLine("m1", a.events[0]));
  (*w)->Append(RawRecordLine(a));
  ASSERT_TRUE((*w)->Close().ok());
  auto sum = ReadRawEvidence(path, [](RawRecord&&, RequestResult&&) {});
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->records, 1);
  EXPECT_EQ(sum->unfinished, 1);
  EXPECT_TRUE(sum->end.is_null());
  std::filesystem::remove(path);
}

TEST(RawEvidence, AMalformedLineIsAnErrorNamingFileAndLine) {
  const std::string path = TempPath("bad-raw.jsonl");
  std::ofstream(path) << "{\"schema\":\"capq/raw/v2\"}\n{\"ev\":\"m9\",\"t\":1,\"data\":\"x\"}\n";
  auto sum = ReadRawEvidence(path, [](RawRecord&&, RequestResult&&) {});
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find(":2: an event of m9, which was not sent"),
            std::string::npos)
      << sum.status().message();
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace capq

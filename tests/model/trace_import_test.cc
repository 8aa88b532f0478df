// Public traces read as their publishers document them (trace_import.h), on byte-exact slices of
// the real files (tests/data/traces/README.md).
#include "capq/model/trace_import.h"

#include <gtest/gtest.h>

#include "capq/file_io.h"

namespace capq {
namespace {

const std::string kTraces = std::string(CAPQ_SOURCE_DIR) + "/tests/data/traces/";

ImportedTrace Import(TraceFormat f, const std::string& name) {
  Result<std::string> text = ReadWholeFile(kTraces + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  Result<ImportedTrace> t = ImportTrace(f, text.ok() ? *text : "", name, "stem");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : ImportedTrace{};
}

TEST(TraceImport, MooncakeKeepsArrivalsLengthsAndItsChainedPrefixBlocks) {
  const ImportedTrace t = Import(TraceFormat::kMooncake, "mooncake_conversation_head40.jsonl");
  ASSERT_EQ(t.samples.size(), 40u);
  const TrafficSample& first = t.samples.front();
  EXPECT_EQ(first.input_tokens, 6758);
  EXPECT_EQ(first.output_tokens, 500);
  EXPECT_EQ(first.block_tokens, 512);
  EXPECT_EQ(first.block_ids.size(), 14u);  // ceil(6758 / 512)
  EXPECT_DOUBLE_EQ(t.samples.back().arrival_offset_s.value_or(-1), 12.0);
  const TraceSummary s = SummarizeTrace(t.samples);
  EXPECT_EQ(s.block_references, 1014);
  EXPECT_EQ(s.blocks_seen_before, 39);  // every request starts with the shared block 0
  // Written and read back as capq traffic, with the blocks.
  std::string text;
  for (const TrafficSample& x : t.samples) text += TrafficSampleToJsonLine(x) + "\n";
  Result<std::vector<TrafficSample>> back = ParseTraffic(text, "back.jsonl");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ((*back)[0].block_ids, first.block_ids);
  EXPECT_EQ((*back)[0].block_tokens, 512);
}

TEST(TraceImport, AzureReadsItsCrlfCsvAndSevenDigitTimestamps) {
  const ImportedTrace t = Import(TraceFormat::kAzure, "azure2023_conv_head40.csv");
  ASSERT_EQ(t.samples.size(), 40u);
  EXPECT_EQ(t.samples[0].input_tokens, 374);
  EXPECT_EQ(t.samples[0].output_tokens, 44);
  EXPECT_EQ(t.samples[0].traffic_class, "stem");
  EXPECT_EQ(t.samples.back().input_tokens, 28);
  EXPECT_EQ(t.samples.back().output_tokens, 175);
  // 18:15:46.6805900 to 18:16:10.8268860
  EXPECT_NEAR(t.samples.back().arrival_offset_s.value_or(-1), 24.146296, 1e-6);
  EXPECT_TRUE(t.samples.back().block_ids.empty());
}

TEST(TraceImport, BurstGptNamesTheClassByModelAndLeavesFailedRequestsOut) {
  const ImportedTrace t = Import(TraceFormat::kBurstGpt, "burstgpt_written.csv");
  ASSERT_EQ(t.samples.size(), 2u);
  EXPECT_EQ(t.skipped, 1);
  EXPECT_EQ(t.samples[0].traffic_class, "ChatGPT");
  EXPECT_EQ(t.samples[1].traffic_class, "GPT-4");
  EXPECT_DOUBLE_EQ(t.samples[1].arrival_offset_s.value_or(-1), 113);
}

TEST(TraceImport, BadLinesNameTheFileTheLineAndTheField) {
  const auto error = [](TraceFormat f, const std::string& text) {
    Result<ImportedTrace> t = ImportTrace(f, text, "t.txt", "c");
    return t.ok() ? std::string("accepted") : t.status().message();
  };
  EXPECT_EQ(error(TraceFormat::kMooncake,
                  "{\"timestamp\": 0, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": "
                  "[0, 1]}\n{\"timestamp\": 3, \"input_length\": 600, \"output_length\": 5, "
                  "\"hash_ids\": [0]}\n"),
            "t.txt:2: hash_ids: 1 ids for 600 tokens; 512-token blocks need 2");
  EXPECT_EQ(error(TraceFormat::kMooncake, "{\"timestamp\": 0, \"output_length\": 5}\n"),
            "t.txt:1: input_length: expected an integer >= 0");
  EXPECT_EQ(error(TraceFormat::kAzure,
                  "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.5,12,x\r\n"),
            "t.txt:2: GeneratedTokens: expected an integer >= 0, got 'x'");
  EXPECT_EQ(error(TraceFormat::kAzure,
                  "TIMESTAMP,ContextTokens,GeneratedTokens\r\n16/11/2023 18:15,12,3\r\n"),
            "t.txt:2: TIMESTAMP: expected YYYY-MM-DD HH:MM:SS.fffffff, got '16/11/2023 18:15'");
  EXPECT_EQ(error(TraceFormat::kAzure, "time,in,out\n"),
            "t.txt:1: expected the header 'TIMESTAMP,ContextTokens,GeneratedTokens'");
  EXPECT_FALSE(ParseTraceFormat("sharegpt"));
  EXPECT_EQ(ParseTraceFormat("weka"), TraceFormat::kWeka);
  EXPECT_EQ(ParseTraceFormat("burstgpt"), TraceFormat::kBurstGpt);
}

}  // namespace
}  // namespace capq

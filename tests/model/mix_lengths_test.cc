// mix.lengths: a trace's lengths fitted to the server (scaled, capped), counted, and what still
// does not fit the declared context refused at load with its traffic line and numbers.
#include <gtest/gtest.h>

#include <string>

#include "capq/model/mix.h"
#include "capq/model/row_loader.h"
#include "row_text.h"

namespace capq {
namespace {

const std::string kAzureRow = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_azure.yaml";

using testing::ReadAll;
using testing::Replace;

TrafficSample Pair(int line, int64_t in, int64_t out) {
  TrafficSample s;
  s.line = line;
  s.input_tokens = in;
  s.output_tokens = out;
  return s;
}

Mix OneClass(std::vector<TrafficSample> samples) {
  Mix m;
  m.traffic = "trace.jsonl";
  MixClass c;
  c.name = "all";
  c.samples = std::move(samples);
  m.classes.push_back(c);
  return m;
}

TEST(FitTraffic, ScalesToTheNearestTokenNeverBelowOneThenCapsAndCountsBoth) {
  Mix m = OneClass({Pair(1, 7930, 1000), Pair(2, 3, 1), Pair(3, 1, 1), Pair(4, 301, 99)});
  m.lengths.scale = 0.5;
  m.lengths.cap_input_tokens = 3000;
  ASSERT_TRUE(FitTraffic(&m).ok());
  const auto& s = m.classes[0].samples;
  EXPECT_EQ(s[0].input_tokens, 3000);  // 3,965 after scaling, then capped
  EXPECT_EQ(s[0].output_tokens, 500);
  EXPECT_EQ(s[1].input_tokens, 2);   // 1.5 rounds up
  EXPECT_EQ(s[1].output_tokens, 1);  // 0.5 rounds up: never 0
  EXPECT_EQ(s[2].input_tokens, 1);   // unchanged
  EXPECT_EQ(s[3].input_tokens, 151);
  EXPECT_EQ(s[3].output_tokens, 50);
  EXPECT_EQ(m.lengths.scaled, 3);  // sample 3 came out as it went in
  EXPECT_EQ(m.lengths.capped, 1);
}

TEST(FitTraffic, APairOverTheContextIsRefusedWithItsLineAndNumbers) {
  Mix m = OneClass({Pair(1, 100, 10), Pair(7, 7930, 1000)});
  m.lengths.scale = 0.5;
  m.lengths.context_tokens = 4096;
  const Status s = FitTraffic(&m);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trace.jsonl:7: 7930 + 1000 tokens, fitted to 3965 + 500"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("context of 4096"), std::string::npos) << s.message();
  m.lengths.context_tokens = 4465;  // exactly fits
  EXPECT_TRUE(FitTraffic(&m).ok());
}

TEST(MixLengths, TheAzureRowIsHalvedAndWrittenBackAsDeclared) {
  Result<Row> row = LoadRow(kAzureRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->mix);
  EXPECT_DOUBLE_EQ(row->mix->lengths.scale, 0.5);
  EXPECT_EQ(row->mix->lengths.scaled, 2000);
  EXPECT_EQ(row->mix->lengths.capped, 0);
  // row.yaml in a trial directory is RowToYaml: the fit must load back and fit the same.
  Result<Row> again = LoadRowFromString(RowToYaml(*row), kAzureRow);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->mix->lengths.scaled, 2000);
  EXPECT_EQ(again->mix->lengths.context_tokens, 8192);
  EXPECT_EQ(again->mix->classes[1].samples.front().input_tokens,
            row->mix->classes[1].samples.front().input_tokens);
}

TEST(MixLengths, ATraceThatDoesNotFitIsRefusedAtLoad) {
  const std::string base = ReadAll(kAzureRow);
  Row row;
  RowError err;
  // The trace's largest pair, line 1502's 7,930 + 49, is 3,965 + 25 halved: over 3,900.
  const std::string small = Replace(base, "context_tokens: 8192", "context_tokens: 3900");
  ASSERT_FALSE(ParseRow(small, kAzureRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.lengths");
  EXPECT_GT(err.line, 0);
  EXPECT_NE(err.message.find("azure_conv_2023.jsonl:1502: 7930 + 49 tokens, fitted to 3965 + 25"),
            std::string::npos)
      << err.message;
  const std::string zero = Replace(base, "scale: 0.5", "scale: 0");
  ASSERT_FALSE(ParseRow(zero, kAzureRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.lengths.scale");
  const std::string unknown = Replace(base, "scale: 0.5", "scale: 0.5, cap: 9");
  ASSERT_FALSE(ParseRow(unknown, kAzureRow, &row, &err));
  EXPECT_NE(err.message.find("cap"), std::string::npos) << err.message;
}

}  // namespace
}  // namespace capq

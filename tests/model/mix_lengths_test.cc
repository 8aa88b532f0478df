// mix.lengths: a trace's lengths fitted to the server (scaled, capped), counted, and what still
// does not fit the declared context refused at load with its traffic line and numbers.
#include <gtest/gtest.h>

#include <string>

#include "capq/model/mix.h"

namespace capq {
namespace {

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

}  // namespace
}  // namespace capq

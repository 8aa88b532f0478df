#include "capq/model/slo_text.h"

#include <gtest/gtest.h>

#include "capq/model/row_loader.h"

namespace capq {
namespace {

TEST(SloText, GatesJoinedByCommasOrAndInSecondsOrMilliseconds) {
  Result<std::vector<SloGate>> g =
      ParseSloText("ttft p95 < 2.5s, itl p99 < 50 ms and e2e p90 < 30s");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->size(), 3u);
  EXPECT_EQ((*g)[0].metric, SloMetric::kTtft);
  EXPECT_EQ((*g)[0].percentile, 95);
  EXPECT_EQ((*g)[0].below_ms, 2500);
  EXPECT_EQ((*g)[1].metric, SloMetric::kItl);
  EXPECT_EQ((*g)[1].percentile, 99);
  EXPECT_EQ((*g)[1].below_ms, 50);
  EXPECT_EQ((*g)[2].metric, SloMetric::kE2e);
  EXPECT_EQ((*g)[2].below_ms, 30000);
}

TEST(SloText, WhatCannotBeReadIsNamed) {
  const struct {
    const char* text;
    const char* says;
  } bad[] = {{"ttft p95 <= 10s", "'<=' is not '<'"},
             {"ttft p100 < 10s", "'p100' is not a percentile"},
             {"ttft p95 < 10", "bound ' 10' is not a positive number of ms or s"},
             {"ttft p95 < -1s", "is not a positive number"},
             {"tpot p95 < 10s", "metric 'tpot'"},
             {"", "--slo is empty"}};
  for (const auto& b : bad) {
    Result<std::vector<SloGate>> g = ParseSloText(b.text);
    ASSERT_FALSE(g.ok()) << b.text;
    EXPECT_NE(g.status().message().find(b.says), std::string::npos)
        << b.text << ": " << g.status().message();
  }
}

// A value capq rows new could not read stays "TODO: ..." until a person fills it in.
TEST(RowTodo, AValueLeftAsATodoIsRefusedAtItsLineAndKey) {
  const std::string row =
      "schema: capq/row/v1\n"
      "id: todo\n"
      "identity:\n"
      "  engine: vllm\n"
      "  image: \"TODO: no --container named\"\n";
  RowError e;
  Row r;
  ASSERT_FALSE(ParseRow(row, "rows/x/todo.yaml", &r, &e));
  EXPECT_EQ(e.line, 5);
  EXPECT_EQ(e.key_path, "identity.image");
  EXPECT_NE(e.message.find("not filled in"), std::string::npos) << e.message;
}

}  // namespace
}  // namespace capq

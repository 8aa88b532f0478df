// The faults file: parsing, error messages, and which requests each selector picks.
#include "capq/sim/faults.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace capq::sim {
namespace {

std::string Data(const std::string& rel) {
  return std::string(CAPQ_SOURCE_DIR) + "/tests/data/faults/" + rel;
}

TEST(FaultsTest, EveryExampleFileLoads) {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(Data(""))) {
    if (!e.is_regular_file()) continue;
    ++files;
    Result<FaultPlan> p = FaultPlan::Load(e.path().string());
    EXPECT_TRUE(p.ok()) << e.path() << ": " << p.status().ToString();
    if (p.ok()) {
      EXPECT_FALSE(p->empty()) << e.path();
    }
  }
  EXPECT_GE(files, 14);
}

TEST(FaultsTest, BadFilesNameFileLineAndKey) {
  struct Case {
    const char* file;
    const char* fragment;
  };
  const Case cases[] = {
      {"bad/unknown_kind.yaml", "unknown_kind.yaml:2:11: faults[0]: unknown fault kind 'explode'"},
      {"bad/unknown_key.yaml", "unknown_key.yaml:3:19: faults[0]: unknown key 'after_tokenz'"},
      {"bad/bad_status.yaml", "key 'status' must be 500, 429 or 503"},
      {"bad/bad_probability.yaml", "key 'probability' must be in [0, 1]"},
      {"bad/missing_kind.yaml", "missing_kind.yaml:2:5: faults[0]: missing key 'kind'"},
      {"bad/syntax.yaml", "syntax.yaml:3:"},
      {"bad/top_level_key.yaml", "unknown key 'rules'"},
  };
  for (const Case& c : cases) {
    Result<FaultPlan> p = FaultPlan::Load(Data(c.file));
    ASSERT_FALSE(p.ok()) << c.file;
    EXPECT_EQ(p.status().code(), Status::Code::kInvalidArgument) << c.file;
    EXPECT_NE(p.status().message().find(c.fragment), std::string::npos)
        << c.file << ": " << p.status().message();
  }
  const Status missing = FaultPlan::Load(Data("nope.yaml")).status();
  EXPECT_EQ(missing.code(), Status::Code::kNotFound);
  EXPECT_NE(missing.message().find("nope.yaml"), std::string::npos) << missing.message();
}

TEST(FaultsTest, SelectorsByIndexPromptAndFromRequest) {
  Result<FaultPlan> p = FaultPlan::Parse(R"(
faults:
  - kind: http_status
    status: 429
    requests: [1, 3]
  - kind: error_frame
    after_tokens: 5
    prompt_contains: "boom"
  - kind: usage_off_by
    n: -2
    from_request: 4
  - kind: stall
    after_tokens: 9
    requests: [2]
    prompt_contains: "boom"
)",
                                         "inline");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE(p->ForRequest(0, "hello").any());
  EXPECT_EQ(p->ForRequest(1, "hello").http_status, 429);
  EXPECT_FALSE(p->ForRequest(2, "hello").http_status.has_value());
  EXPECT_EQ(p->ForRequest(3, "x").http_status, 429);
  RequestFaults boom = p->ForRequest(0, "a boom b");
  EXPECT_EQ(boom.error_frame_after, 5);
  EXPECT_FALSE(boom.stall_after.has_value());  // needs index 2 as well
  EXPECT_EQ(p->ForRequest(2, "boom").stall_after, 9);
  EXPECT_EQ(p->ForRequest(3, "x").usage_off_by, 0);
  EXPECT_EQ(p->ForRequest(4, "x").usage_off_by, -2);
}

TEST(FaultsTest, FirstRuleOfAKindWins) {
  Result<FaultPlan> p = FaultPlan::Parse(
      "faults:\n  - {kind: http_status, status: 503}\n  - {kind: http_status, status: 500}\n", "x");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ForRequest(0, "").http_status, 503);
}

TEST(FaultsTest, ProbabilityIsSeededAndAboutRight) {
  Result<FaultPlan> a = FaultPlan::Load(Data("probability.yaml"));
  ASSERT_TRUE(a.ok());
  int hits = 0;
  for (int i = 0; i < 10000; ++i) hits += a->ForRequest(i, "").http_status.has_value();
  EXPECT_GT(hits, 3000);
  EXPECT_LT(hits, 3600);
  // Same seed: same requests; another seed: other requests.
  Result<FaultPlan> same = FaultPlan::Load(Data("probability.yaml"));
  Result<FaultPlan> other = FaultPlan::Parse(
      "seed: 8\nfaults:\n  - {kind: http_status, status: 500, probability: 0.33}\n", "x");
  ASSERT_TRUE(other.ok());
  int differ = 0;
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(a->ForRequest(i, "").http_status, same->ForRequest(i, "").http_status);
    differ += a->ForRequest(i, "").http_status != other->ForRequest(i, "").http_status;
  }
  EXPECT_GT(differ, 0);
}

TEST(FaultsTest, ServerWideKinds) {
  Result<FaultPlan> p = FaultPlan::Parse(
      "faults:\n  - kind: lying_flush\n  - kind: health_503_for_s\n    seconds: 2.5\n", "x");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->lying_flush());
  EXPECT_DOUBLE_EQ(p->health_503_for_s(), 2.5);
  EXPECT_FALSE(p->ForRequest(0, "").any());
  EXPECT_FALSE(FaultPlan().lying_flush());
}

TEST(FaultsTest, JsonFileIsAccepted) {
  Result<FaultPlan> p = FaultPlan::Load(Data("example.json"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ForRequest(1, "").usage_off_by, -1);
  EXPECT_EQ(p->ForRequest(0, "").usage_off_by, 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(p->ForRequest(i, "").slow_first_byte_ms, 0);
}

TEST(FaultsTest, KindNamesRoundTrip) {
  EXPECT_STREQ(FaultKindName(FaultKind::kHealth503ForS), "health_503_for_s");
  EXPECT_STREQ(FaultKindName(FaultKind::kDuplicateOutput), "duplicate_output");
}

}  // namespace
}  // namespace capq::sim

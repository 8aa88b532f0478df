#include "capq/model/mix.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/model/traffic.h"
#include "row_text.h"

namespace capq {
namespace {

const std::string kRows = std::string(CAPQ_SOURCE_DIR) + "/rows";
const std::string kMixedRow = kRows + "/sim/sim_small_mixed.yaml";

using testing::ReadAll;
using testing::Replace;

Mix ThreeClasses(int a, int b, int c) {
  Mix m;
  for (auto [name, share] :
       {std::pair<const char*, int>{"short", a}, {"reference", b}, {"heavy", c}}) {
    MixClass k;
    k.name = k.match = name;
    k.share = share;
    m.classes.push_back(k);
  }
  return m;
}

TEST(MixSequence, EveryWindowOfOnePeriodHoldsTheSharesExactly) {
  const Mix m = ThreeClasses(3, 2, 1);
  const std::vector<int> seq = MixSequence(m, 202, 120);
  ASSERT_EQ(seq.size(), 120u);
  for (size_t start = 0; start + 6 <= seq.size(); ++start) {
    std::map<int, int> n;
    for (size_t i = start; i < start + 6; ++i) ++n[seq[i]];
    EXPECT_EQ(n[0], 3) << "window at " << start;
    EXPECT_EQ(n[1], 2) << "window at " << start;
    EXPECT_EQ(n[2], 1) << "window at " << start;
  }
}

TEST(MixSequence, SeededAndReproducible) {
  const Mix m = ThreeClasses(3, 2, 1);
  EXPECT_EQ(MixSequence(m, 7, 30), MixSequence(m, 7, 30));
  bool some_differ = false;
  for (uint64_t seed = 1; seed < 20 && !some_differ; ++seed) {
    some_differ = MixSequence(m, seed, 30) != MixSequence(m, 0, 30);
  }
  EXPECT_TRUE(some_differ) << "the seed never moves the sequence's phase";
}

TEST(MixSampleSize, FloorOfPeriodsAndTheSampleNeeded) {
  const Mix m = ThreeClasses(3, 2, 1);
  EXPECT_EQ(MixMinClassRequests(m, 2, 64), 10);
  EXPECT_EQ(MixMinClassRequests(m, 0, 64), 30);
  EXPECT_EQ(MixRequestsNeeded(m, 2, 20), 120);
  EXPECT_EQ(MixRequestsNeeded(m, 1, 20), 60);
}

TEST(Traffic, ParsesSamplesAndNamesTheBadLine) {
  const std::string ok =
      R"({"schema": "capq/traffic/v1", "input_tokens": 10, "output_tokens": 3, "class": "a"})"
      "\n\n"
      R"({"schema": "capq/traffic/v1", "input_tokens": 20, "output_tokens": 4, "arrival_offset_s": 1.5})"
      "\n";
  auto s = ParseTraffic(ok, "t.jsonl");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].traffic_class, "a");
  EXPECT_EQ((*s)[1].line, 3);
  EXPECT_EQ((*s)[1].prefix_hit, "cold");
  EXPECT_DOUBLE_EQ(*(*s)[1].arrival_offset_s, 1.5);
  auto bad = ParseTraffic(ok + R"({"schema": "capq/traffic/v1", "input_tokens": 0})"
                               "\n",
                          "t.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("t.jsonl:4:"), std::string::npos) << bad.status().message();
}

TEST(Traffic, ImportsOpenAiUsageAndCapqResultsKeepingPairs) {
  const std::string text =
      R"({"response": {"usage": {"prompt_tokens": 900, "completion_tokens": 50}}, "metadata": {"class": "tool"}})"
      "\n"
      R"({"usage": {"prompt_tokens": 100, "completion_tokens": 700}})"
      "\n"
      R"({"id": "w0", "phase": "warmup", "http_status": 200, "prompt_tokens": 5, "completion_tokens": 5})"
      "\n"
      R"({"id": "m0", "phase": "measured", "http_status": 200, "prompt_tokens": 515, "completion_tokens": 128, "cached_tokens": 0})"
      "\n";
  auto s = ImportTraffic(text, "export.jsonl", "chat");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 3u);  // the warm-up is no completed production request
  EXPECT_EQ((*s)[0].input_tokens, 900);
  EXPECT_EQ((*s)[0].output_tokens, 50);
  EXPECT_EQ((*s)[0].traffic_class, "tool");
  EXPECT_EQ((*s)[1].input_tokens, 100);
  EXPECT_EQ((*s)[1].output_tokens, 700);
  EXPECT_EQ((*s)[1].traffic_class, "chat");
  EXPECT_EQ((*s)[2].input_tokens, 515);
  auto again = ParseTraffic(TrafficSampleToJsonLine((*s)[1]), "x");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].output_tokens, 700);
}

TEST(Traffic, SummaryGivesCountsAndPairedQuantilesPerClass) {
  std::vector<TrafficSample> v;
  for (int i = 1; i <= 100; ++i) v.push_back({i * 10, i, "a", "cold", "greedy", {}, i, 0, {}});
  v.push_back({5000, 900, "b", "cold", "greedy", {}, 101, 0, {}});
  const auto sum = SummarizeTraffic(v);
  ASSERT_EQ(sum.size(), 2u);
  EXPECT_EQ(sum[0].count, 100);
  EXPECT_EQ(sum[0].input_p50, 500);
  EXPECT_EQ(sum[0].input_p95, 950);
  EXPECT_EQ(sum[0].output_p99, 99);
  EXPECT_EQ(sum[1].count, 1);
  EXPECT_EQ(sum[1].output_p50, 900);
  EXPECT_NE(TrafficSummaryText(sum).find("b: 1"), std::string::npos) << TrafficSummaryText(sum);
}

TEST(MixedRow, ShippedRowLoadsItsClassesFromTheTrafficFile) {
  auto row = LoadRow(kMixedRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->mix);
  ASSERT_EQ(row->mix->classes.size(), 3u);
  EXPECT_EQ(row->mix->classes[2].name, "heavy");
  EXPECT_EQ(row->mix->classes[2].samples.size(), 3u);
  // row.yaml in a trial directory is RowToYaml: it must load back with the same mix.
  auto again = LoadRowFromString(RowToYaml(*row), kMixedRow);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(again->mix);
  EXPECT_EQ(again->mix->classes[1].share, 2);
  EXPECT_EQ(again->mix->traffic, row->mix->traffic);
}

TEST(MixedRow, AClassTooSmallForItsPercentileIsRefusedAtItsShare) {
  const std::string text = Replace(ReadAll(kMixedRow), "min_requests: 120", "min_requests: 64");
  Row row;
  RowError err;
  ASSERT_FALSE(ParseRow(text, kMixedRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.classes[2].share");
  EXPECT_GT(err.line, 0);
  EXPECT_NE(err.ToString().find("sim_small_mixed.yaml:" + std::to_string(err.line) + ":"),
            std::string::npos);
  EXPECT_NE(err.message.find("class heavy"), std::string::npos) << err.message;
  EXPECT_NE(err.message.find("min_requests >= 120"), std::string::npos) << err.message;
}

TEST(MixedRow, OpenLoopAndUnknownClassesAreRefused) {
  const std::string base = ReadAll(kMixedRow);
  Row row;
  RowError err;
  std::string open = Replace(
      Replace(base, "arrival: {kind: closed_loop}", "arrival: {kind: poisson, rate_step_rps: 1}"),
      "measured: {min_requests: 120, per_concurrency: 4}", "measured: {requests: 400, ramp_s: 0}");
  open = Replace(open, "  cmax: 6", "  rmax_rps: 1");
  ASSERT_FALSE(ParseRow(open, kMixedRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix");
  EXPECT_NE(err.message.find("closed_loop or replay"), std::string::npos) << err.message;
  const std::string unknown = Replace(base, "{name: heavy, share: 1}", "{name: giant, share: 1}");
  ASSERT_FALSE(ParseRow(unknown, kMixedRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.traffic");
  EXPECT_NE(err.message.find("class giant has no sample"), std::string::npos) << err.message;
}

TEST(MixedRow, TheWorkloadLengthsNameTheHeaviestPair) {
  const std::string text = Replace(ReadAll(kMixedRow), "input_tokens: 2176", "input_tokens: 2048");
  Row row;
  RowError err;
  ASSERT_FALSE(ParseRow(text, kMixedRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.traffic");
  EXPECT_NE(err.message.find("expected 2176 / 544, got 2048 / 544"), std::string::npos)
      << err.message;
}

TEST(MixedRow, BinsAssignByLengthsInOrder) {
  const std::string text = Replace(
      Replace(Replace(ReadAll(kMixedRow), "{name: short, share: 3}",
                      "{name: small, share: 3, max_input_tokens: 600}"),
              "{name: reference, share: 2}", "{name: mid, share: 2, max_input_tokens: 1100}"),
      "{name: heavy, share: 1}", "{name: big, share: 1, max_output_tokens: 600}");
  auto row = LoadRowFromString(text, kMixedRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  for (const TrafficSample& s : row->mix->classes[0].samples) EXPECT_LE(s.input_tokens, 600);
  for (const TrafficSample& s : row->mix->classes[2].samples) EXPECT_GT(s.input_tokens, 1100);
  EXPECT_EQ(row->mix->classes[1].samples.size(), 3u);
}

TEST(MixedPlan, ClassesInSharesAndEveryRequestAWholeSample) {
  auto row = LoadRow(kMixedRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  PlanInputs in;
  in.level = 6;
  auto plan = MakeTrialPlan(*row, in);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_EQ(plan->measured.size(), 120u);
  std::map<std::string, int> n;
  for (const PlanRequest& r : plan->measured) {
    ++n[r.traffic_class];
    const MixClass* k = nullptr;
    for (const MixClass& c : row->mix->classes) k = c.name == r.traffic_class ? &c : k;
    ASSERT_NE(k, nullptr) << r.traffic_class;
    bool paired = false;
    for (const TrafficSample& s : k->samples) {
      paired |= s.input_tokens == r.prompt.message_tokens && s.output_tokens == r.max_tokens;
    }
    EXPECT_TRUE(paired) << r.id << ": " << r.prompt.message_tokens << "/" << r.max_tokens;
  }
  EXPECT_EQ(n["short"], 60);
  EXPECT_EQ(n["reference"], 40);
  EXPECT_EQ(n["heavy"], 20);
  auto back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->measured[7].traffic_class, plan->measured[7].traffic_class);
  EXPECT_EQ(back->warmup[0].traffic_class, plan->warmup[0].traffic_class);
}

}  // namespace
}  // namespace capq

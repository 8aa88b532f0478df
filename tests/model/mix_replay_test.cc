// workload.arrival.kind: replay: a mixed row's traffic file sent in its own order at its own
// rhythm, slowed or sped up so that what a trial sends arrives at the level's mean rate.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "capq/model/mix.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "row_text.h"

namespace capq {
namespace {

const std::string kReplayRow =
    std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_azure_replay.yaml";

using testing::ReadAll;
using testing::Replace;

TrafficSample At(int line, double s, int64_t in) {
  TrafficSample t;
  t.line = line;
  t.input_tokens = in;
  t.output_tokens = 10;
  t.arrival_offset_s = s;
  return t;
}

// Two classes by input length; samples given per class, out of file order.
Mix TwoClasses(std::vector<TrafficSample> small, std::vector<TrafficSample> large) {
  Mix m;
  m.traffic = "trace.jsonl";
  MixClass a, b;
  a.name = "small";
  a.samples = std::move(small);
  b.name = "large";
  b.samples = std::move(large);
  m.classes = {a, b};
  return m;
}

TEST(OrderReplay, SendsEverySampleInFileOrderAndCyclesAfterTheEnd) {
  Mix m = TwoClasses({At(1, 0, 1), At(3, 2, 3)}, {At(2, 1, 2), At(4, 3, 4)});
  ASSERT_TRUE(OrderReplay(&m, 4).ok());
  ASSERT_TRUE(m.replay());
  EXPECT_EQ(m.classes[0].share, 2);  // the trace's own counts
  EXPECT_EQ(m.classes[1].share, 2);
  for (int64_t k = 0; k < 8; ++k) {
    int cls = -1;
    EXPECT_EQ(ReplaySample(m, k, &cls).input_tokens, k % 4 + 1) << k;
    EXPECT_EQ(cls, k % 2 == 0 ? 0 : 1) << k;
  }
  // 4 requests over 3 s: a mean gap of 1 s, so the second cycle starts at 4 s.
  EXPECT_DOUBLE_EQ(ReplayTraceSeconds(m, 3), 3);
  EXPECT_DOUBLE_EQ(ReplayTraceSeconds(m, 4), 4);
  EXPECT_DOUBLE_EQ(ReplayTraceSeconds(m, 6), 6);
  EXPECT_EQ(ReplayOffsetNs(m, 2.0, 3), 1'500'000'000);  // twice the trace's speed
}

TEST(OrderReplay, RefusesWhatCannotBeReplayedNamingTheLine) {
  Mix gap = TwoClasses({At(1, 0, 1), At(3, 2, 3)}, {At(2, 5, 2)});
  Status s = OrderReplay(&gap, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trace.jsonl:3: arrival_offset_s goes back in time"),
            std::string::npos)
      << s.message();
  Mix lost = TwoClasses({At(1, 0, 1)}, {At(2, 1, 2)});
  s = OrderReplay(&lost, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 of the 3 samples"), std::string::npos) << s.message();
  Mix none = TwoClasses({At(1, 0, 1)}, {At(2, 1, 2)});
  none.classes[1].samples[0].arrival_offset_s.reset();
  s = OrderReplay(&none, 2);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trace.jsonl:2: no arrival_offset_s"), std::string::npos);
  Mix once = TwoClasses({At(1, 0, 1)}, {At(2, 0, 2)});
  EXPECT_FALSE(OrderReplay(&once, 2).ok());
}

TEST(ReplayMinClassRequests, TheFewestOfAClassInAnyWindowAsBruteForceCounts) {
  const std::vector<int> classes = {0, 0, 1, 0, 1, 1, 1, 0, 0, 0, 1};
  Mix m = TwoClasses({}, {});
  for (size_t i = 0; i < classes.size(); ++i) {
    const int c = classes[i];
    m.classes[static_cast<size_t>(c)].samples.push_back(
        At(static_cast<int>(i) + 1, static_cast<double>(i), 1));
  }
  ASSERT_TRUE(OrderReplay(&m, classes.size()).ok());
  const size_t n = classes.size();
  for (int k = 0; k < 2; ++k) {
    for (int w = 1; w <= 30; ++w) {
      int least = w;
      for (size_t start = 0; start < n; ++start) {
        int have = 0;
        for (int i = 0; i < w; ++i) have += classes[(start + static_cast<size_t>(i)) % n] == k;
        least = std::min(least, have);
      }
      EXPECT_EQ(ReplayMinClassRequests(m, k, w), least) << "class " << k << ", window " << w;
    }
  }
}

TEST(ReplayRow, WhatATrialSendsArrivesAtTheLevelsRateInTheTracesOrderAndRhythm) {
  Result<Row> row = LoadRow(kReplayRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->mix && row->mix->replay());
  for (int level : {1, 2, 3}) {
    PlanInputs in;
    in.level = level;
    Result<TrialPlan> plan = MakeTrialPlan(*row, in);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const std::vector<int64_t>& at = plan->send_offsets_ns;
    ASSERT_EQ(at.size(), plan->measured.size());
    ASSERT_EQ(plan->expected_measured, 150);
    const double rate = static_cast<double>(at.size() - 1) / (static_cast<double>(at.back()) / 1e9);
    EXPECT_NEAR(rate, 0.7 * level, 0.7 * level * 0.02) << "level " << level;
    // Request k is the trace's request k with its fitted lengths, sent at its recorded offset
    // times one speed.
    const double speed = ReplayTraceSeconds(*row->mix, 1) / (static_cast<double>(at[1]) / 1e9);
    for (size_t k = 0; k < at.size(); ++k) {
      int cls = -1;
      const TrafficSample& s = ReplaySample(*row->mix, static_cast<int64_t>(k), &cls);
      ASSERT_EQ(plan->measured[k].max_tokens, s.output_tokens) << k;
      ASSERT_EQ(plan->measured[k].prompt.target_tokens, s.input_tokens) << k;
      ASSERT_EQ(plan->measured[k].traffic_class, row->mix->classes[static_cast<size_t>(cls)].name);
      ASSERT_NEAR(static_cast<double>(at[k]) / 1e9,
                  ReplayTraceSeconds(*row->mix, static_cast<int64_t>(k)) / speed, 1e-6)
          << k;
    }
  }
}

TEST(ReplayRow, SharesDurationsAndAMissingTraceAreRefused) {
  const std::string base = ReadAll(kReplayRow);
  Row row;
  RowError err;
  const std::string share = Replace(base, "{name: short, max_input_tokens: 1024}",
                                    "{name: short, share: 1, max_input_tokens: 1024}");
  ASSERT_FALSE(ParseRow(share, kReplayRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.classes[0].share");
  EXPECT_NE(err.message.find("the trace's shares"), std::string::npos) << err.message;
  const std::string duration = Replace(base, "requests: 150 ", "duration_s: 200 ");
  ASSERT_FALSE(ParseRow(duration, kReplayRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix");
  EXPECT_NE(err.message.find("measured.requests"), std::string::npos) << err.message;
  const std::string bare = base.substr(0, base.find("mix:")) + base.substr(base.find("cache:"));
  ASSERT_FALSE(ParseRow(bare, kReplayRow, &row, &err));
  EXPECT_EQ(err.key_path, "workload.arrival.kind");
  EXPECT_NE(err.message.find("needs mix.traffic"), std::string::npos) << err.message;
  const std::string thin = Replace(base, "requests: 150 ", "requests: 30 ");
  ASSERT_FALSE(ParseRow(thin, kReplayRow, &row, &err));
  EXPECT_NE(err.message.find("consecutive requests of the trace"), std::string::npos)
      << err.message;
}

}  // namespace
}  // namespace capq

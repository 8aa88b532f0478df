// The shipped mixed row on the embedded simulator: one trial, then capq validate re-derives every
// class's verdict from the directory alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "capq/model/row_loader.h"
#include "capq/trial/trial.h"
#include "trial_test_util.h"

namespace capq {
namespace {

using testing::Options;
using testing::ScratchDir;
using testing::StartSim;

TEST(TrialMixed, ClassVerdictsAreSealedAndReDerivedByValidate) {
  auto row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_mixed.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  const std::string dir = ScratchDir("mixed");
  auto sim = StartSim(*row);
  ASSERT_TRUE(sim);
  TrialReport rep = RunTrial(*row, Options(sim->url(), dir + "/trial", 3));
  sim->Stop();
  ASSERT_EQ(rep.verdict.outcome, TrialOutcome::kPass) << rep.verdict.reasons.front();
  ASSERT_EQ(rep.verdict.classes.size(), 3u);
  EXPECT_EQ(rep.verdict.classes[0].requests + rep.verdict.classes[1].requests +
                rep.verdict.classes[2].requests,
            120);
  EXPECT_EQ(rep.verdict.classes[2].requests, 20);
  {
    std::ifstream in(dir + "/trial/verdict.json");
    const auto j = nlohmann::json::parse(in);
    ASSERT_EQ(j["classes"].size(), 3u);
    EXPECT_EQ(j["classes"][2]["class"], "heavy");
  }
  {  // what was sent, for the report's trace section: every measured request, as served
    std::ifstream in(dir + "/trial/metrics.json");
    const auto sent = nlohmann::json::parse(in).at("sent");
    EXPECT_FALSE(sent.contains("first_trace_index"));  // closed loop: no trace order
    ASSERT_EQ(sent["requests"].size(), 120u);
    double last = -1;
    for (const auto& r : sent["requests"]) {
      EXPECT_GT(r[0].get<int64_t>(), 51);  // the chat template and a message
      EXPECT_GE(r[1].get<int64_t>(), 1);
      EXPECT_GE(r[2].get<double>(), 0);
      last = std::max(last, r[2].get<double>());
    }
    EXPECT_GT(last, 0);
  }
  auto v = ValidateTrialDir(dir + "/trial");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_TRUE(v->problems.empty()) << v->problems.front();
  ASSERT_EQ(v->verdict.classes.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(v->verdict.classes[k].name, rep.verdict.classes[k].name);
    EXPECT_EQ(v->verdict.classes[k].requests, rep.verdict.classes[k].requests);
    EXPECT_DOUBLE_EQ(v->verdict.classes[k].gate_ms[0], rep.verdict.classes[k].gate_ms[0]);
  }
}

}  // namespace
}  // namespace capq

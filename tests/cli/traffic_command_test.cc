// capq traffic as a user runs it: an OpenAI usage export becomes a traffic file of paired
// samples, with its per-class summary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../capq_process.h"
#include "capq/model/traffic.h"

namespace {

namespace fs = std::filesystem;

int Capq(const std::vector<std::string>& args, std::string* out) {
  return capq::testing::RunCapqCapturing(args, out);
}

TEST(TrafficCommandTest, ConvertsAnOpenAiExportAndSummarisesPerClass) {
  const fs::path dir = fs::temp_directory_path() / ("capq_traffic_dir_" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream e(dir / "usage.jsonl");
    for (int i = 0; i < 4; ++i) {
      e << R"({"usage": {"prompt_tokens": )" << 100 + i << R"(, "completion_tokens": )" << 10 + i
        << "}}\n";
    }
    e << R"({"usage": {"prompt_tokens": 4000, "completion_tokens": 900}, "metadata": {"class": "agent"}})"
      << "\n";
  }
  std::string out;
  ASSERT_EQ(Capq({"traffic", (dir / "usage.jsonl").string(), "--class", "chat", "--out",
                  (dir / "t.jsonl").string()},
                 &out),
            0)
      << out;
  EXPECT_NE(out.find("5 samples in 2 classes"), std::string::npos) << out;
  EXPECT_NE(out.find("agent: 1 (20.0%)  ISL 4000 4000 4000  OSL 900 900 900"), std::string::npos)
      << out;
  EXPECT_NE(out.find("chat: 4 (80.0%)  ISL 101 103 103  OSL 11 13 13"), std::string::npos) << out;
  auto samples = capq::LoadTraffic((dir / "t.jsonl").string());
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 5u);
  EXPECT_EQ((*samples)[4].input_tokens, 4000);
  EXPECT_EQ((*samples)[4].output_tokens, 900);

  EXPECT_EQ(Capq({"traffic", (dir / "missing.jsonl").string()}, &out), 2);
  EXPECT_NE(out.find("missing.jsonl"), std::string::npos) << out;
  fs::remove_all(dir);
}

}  // namespace

// capq predict as a user runs it: the b70 reference row's published baseline, its surface, and
// the qualified rows overlaid.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../capq_process.h"

namespace {

namespace fs = std::filesystem;

const std::string kRows = std::string(CAPQ_SOURCE_DIR) + "/rows/";

int Capq(const std::vector<std::string>& args, std::string* out) {
  return capq::testing::RunCapqCapturing(args, out);
}

TEST(PredictCommandTest, PrintsTheRowsBoundaryAndASurfaceWithQualifiedPointsOverlaid) {
  std::string out;
  const std::string b70 = kRows + "b70/b70_qwen38_27b_";
  ASSERT_EQ(Capq({"predict", b70 + "8k1k.yaml", "--qualified",
                  b70 + "2k512.yaml," + b70 + "8k1k.yaml," + b70 + "16k2k.yaml"},
                 &out),
            0)
      << out;
  EXPECT_NE(out.find("predicted Cmax = 7 (expect.cmax 7)"), std::string::npos) << out;
  EXPECT_NE(out.find("b1_s_per_prefill_token"), std::string::npos) << out;
  EXPECT_NE(out.find("measured"), std::string::npos) << out;
  EXPECT_NE(out.find("assumed"), std::string::npos) << out;
  // The surface's rows are the input lengths; the published rows sit on its cells.
  for (const char* cell :
       {"[11] 2048/512: b70_qwen38_27b_2k512", "[7] 8192/1024", "[5] 16384/2048"}) {
    EXPECT_NE(out.find(cell), std::string::npos) << cell << "\n" << out;
  }
  // The other shapes calibrate on the reference row's baseline: every b70 row within one.
  for (const auto& [file, lo, hi] : std::vector<std::tuple<std::string, int, int>>{
           {"2k512.yaml", 10, 12}, {"16k2k.yaml", 4, 6}}) {
    ASSERT_EQ(Capq({"predict", b70 + file, "--baseline", b70 + "8k1k.yaml"}, &out), 0) << out;
    const size_t at = out.find("predicted Cmax = ");
    ASSERT_NE(at, std::string::npos) << out;
    const int c = std::stoi(out.substr(at + 17));
    EXPECT_GE(c, lo) << out;
    EXPECT_LE(c, hi) << out;
  }
}

TEST(PredictCommandTest, ARowWithNoBaselineOrABadGridIsRefusedByName) {
  std::string out;
  EXPECT_EQ(Capq({"predict", kRows + "b70/b70_qwen38_27b_2k512.yaml"}, &out), 2);
  EXPECT_NE(out.find("publishes no expect.baseline"), std::string::npos) << out;
  EXPECT_EQ(Capq({"predict", kRows + "sim/sim_small_reference.yaml", "--isl", "512,x"}, &out), 2);
  EXPECT_NE(out.find("--isl: 'x'"), std::string::npos) << out;
}

TEST(PredictCommandTest, ASimRowIsPredictedFromItsOwnProfile) {
  std::string out;
  ASSERT_EQ(Capq({"predict", kRows + "sim/sim_small_reference.yaml"}, &out), 0) << out;
  EXPECT_NE(out.find("engine profile small"), std::string::npos) << out;
  EXPECT_NE(out.find("predicted Cmax = 6 (expect.cmax 6)"), std::string::npos) << out;
}

}  // namespace

// A mixed row's requalification fields: its traffic (by content) and its classes and shares.
#include <gtest/gtest.h>

#include <string>

#include "capq/model/row_loader.h"
#include "capq/qualify/recommend.h"

namespace capq {
namespace {

std::string Field(const std::vector<PinnedField>& f, const std::string& name) {
  for (const PinnedField& p : f) {
    if (p.field == name) return p.value;
  }
  return "";
}

TEST(RecommendMix, TheTrafficAndTheSharesArePinned) {
  auto row = LoadRow(std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_mixed.yaml");
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  const auto fields = RequalifyFields(*row);
  EXPECT_EQ(Field(fields, "mix.classes"), "short 3, reference 2, heavy 1");
  const std::string traffic = Field(fields, "mix.traffic");
  EXPECT_NE(traffic.find("seed_shapes.jsonl (samples sha256 "), std::string::npos) << traffic;
  Row edited = *row;
  edited.mix->classes[2].samples[0].output_tokens += 1;
  EXPECT_NE(Field(RequalifyFields(edited), "mix.traffic"), traffic);
}

}  // namespace
}  // namespace capq

// "Cmax passes, Cmax+1 fails" as GoogleTest expectations: one test per (row, C, trial).
// The fixture (fixtures/capacity_fixture.h) finds the server and runs the trial; these bodies only
// state what each side of the boundary must show.
#include <gtest/gtest.h>

#include "capacity_fixture.h"

namespace capq::fixtures {
namespace {

TEST_P(AtCmax, SloMetAndStreamsCorrect) {
  const TrialReport report = RunCaseTrial();
  ASSERT_TRUE(TrialRan(GetParam(), report));
  EXPECT_TRUE(StreamsCorrect(GetParam(), report));
  EXPECT_TRUE(SloMet(GetParam(), report));
}

TEST_P(AboveCmax, SloMissedAndStreamsCorrect) {
  const TrialReport report = RunCaseTrial();
  ASSERT_TRUE(TrialRan(GetParam(), report));
  EXPECT_TRUE(StreamsCorrect(GetParam(), report));
  EXPECT_TRUE(SloMissed(GetParam(), report));
}

INSTANTIATE_TEST_SUITE_P(Capacity, AtCmax, ::testing::ValuesIn(CasesFor(Side::kPass)), CaseName);
INSTANTIATE_TEST_SUITE_P(Capacity, AboveCmax, ::testing::ValuesIn(CasesFor(Side::kFail)), CaseName);

}  // namespace
}  // namespace capq::fixtures

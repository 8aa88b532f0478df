// "Cmax passes, Cmax+1 fails" as GoogleTest expectations: one test per (row, C, trial); for a rate
// row "Rmax passes, Rmax + one step fails", one test per (row, rate, trial).
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

// A client that fell behind its schedule makes the trial "could not run": TrialRan fails it.
TEST_P(AtRmax, SloMetStableAndStreamsCorrect) {
  const TrialReport report = RunCaseTrial();
  ASSERT_TRUE(TrialRan(GetParam(), report));
  EXPECT_TRUE(StreamsCorrect(GetParam(), report));
  EXPECT_TRUE(SloMet(GetParam(), report));
}

TEST_P(AboveRmax, SloMissedOrUnstableAndStreamsCorrect) {
  const TrialReport report = RunCaseTrial();
  ASSERT_TRUE(TrialRan(GetParam(), report));
  EXPECT_TRUE(StreamsCorrect(GetParam(), report));
  EXPECT_TRUE(SloMissed(GetParam(), report));
}

INSTANTIATE_TEST_SUITE_P(Capacity, AtCmax, ::testing::ValuesIn(CasesFor(Claim::kCmax, Side::kPass)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Capacity, AboveCmax,
                         ::testing::ValuesIn(CasesFor(Claim::kCmax, Side::kFail)), CaseName);
INSTANTIATE_TEST_SUITE_P(Capacity, AtRmax, ::testing::ValuesIn(CasesFor(Claim::kRmax, Side::kPass)),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Capacity, AboveRmax,
                         ::testing::ValuesIn(CasesFor(Claim::kRmax, Side::kFail)), CaseName);

}  // namespace

// A selection of rows may hold no claim of one kind (no rate row, or only rate rows): that is no
// error, so gtest must not add a failing test for the empty suite.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AtCmax);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AboveCmax);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AtRmax);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(AboveRmax);

}  // namespace capq::fixtures

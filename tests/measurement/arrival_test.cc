#include "capq/measurement/arrival.h"

#include <gtest/gtest.h>

namespace capq {
namespace {

TEST(ClosedLoopArrivals, ReleasesCAtTheStartThenOneAtEachCompletion) {
  auto a = ClosedLoopArrivals(2);
  a->Begin(1000, 4);
  std::vector<Release> got;
  while (auto r = a->Peek()) {
    got.push_back(*r);
    a->Take();
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 0u);
  EXPECT_EQ(got[1].index, 1u);
  EXPECT_EQ(got[0].intended_ns, 1000);
  EXPECT_EQ(got[1].intended_ns, 1000);
  EXPECT_FALSE(a->Exhausted());
  a->Finished(1, 5000);  // the slot freed at 5000 starts request 2, intended then
  ASSERT_TRUE(a->Peek());
  EXPECT_EQ(a->Peek()->index, 2u);
  EXPECT_EQ(a->Peek()->intended_ns, 5000);
  a->Take();
  EXPECT_FALSE(a->Peek());
  a->Finished(0, 6000);
  a->Take();
  EXPECT_TRUE(a->Exhausted());
  a->Finished(2, 7000);
  EXPECT_FALSE(a->Peek());  // every request was released
}

TEST(ScheduledArrivals, ReleaseAtTheirOffsetsWhateverFinishes) {
  auto a = ScheduledArrivals({0, 10, 10, 50});
  a->Begin(100, 4);
  EXPECT_EQ(a->Peek()->intended_ns, 100);
  a->Take();
  a->Finished(0, 105);  // a completion releases nothing early
  EXPECT_EQ(a->Peek()->index, 1u);
  EXPECT_EQ(a->Peek()->intended_ns, 110);
  a->Take();
  EXPECT_EQ(a->Peek()->intended_ns, 110);
  a->Take();
  EXPECT_EQ(a->Peek()->intended_ns, 150);
  a->Take();
  EXPECT_TRUE(a->Exhausted());
  EXPECT_FALSE(a->Peek());
}

TEST(ScheduledArrivals, AScheduleShorterThanItsPhaseIsNeverExhausted) {
  auto a = ScheduledArrivals({0});
  a->Begin(0, 2);
  a->Take();
  EXPECT_FALSE(a->Peek());
  EXPECT_FALSE(a->Exhausted());  // the loop names this instead of ending the phase quietly
}

}  // namespace
}  // namespace capq

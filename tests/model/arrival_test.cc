#include "capq/model/arrival.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace capq {
namespace {

struct GapStats {
  double mean_s = 0;
  double cv = 0;
};

// The gaps of a schedule: from the start to the first offset too, except for constant arrival,
// whose first request is sent at 0.
GapStats Gaps(ArrivalKind kind, const std::vector<int64_t>& offsets) {
  std::vector<double> gaps;
  int64_t last = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    if (i > 0 || kind != ArrivalKind::kConstant) gaps.push_back((offsets[i] - last) * 1e-9);
    last = offsets[i];
  }
  double sum = 0;
  for (double g : gaps) sum += g;
  const double mean = sum / static_cast<double>(gaps.size());
  double sq = 0;
  for (double g : gaps) sq += (g - mean) * (g - mean);
  const double sd = std::sqrt(sq / static_cast<double>(gaps.size() - 1));
  return {mean, sd / mean};
}

bool NonDecreasing(const std::vector<int64_t>& v) { return std::is_sorted(v.begin(), v.end()); }

struct Kind {
  ArrivalKind kind;
  double cv;  // the gaps' cv by definition (constant, poisson) or as declared (gamma)
};

const Kind kKinds[] = {{ArrivalKind::kConstant, 0}, {ArrivalKind::kPoisson, 1},
                       {ArrivalKind::kGamma, 0.5},  {ArrivalKind::kGamma, 1},
                       {ArrivalKind::kGamma, 2},    {ArrivalKind::kGamma, 1.5}};

std::string Name(const Kind& k) {
  return std::string(ArrivalKindName(k.kind)) + " cv " + std::to_string(k.cv);
}

TEST(ArrivalOffsets, DeterministicForAFixedSeedAndDifferentAcrossSeeds) {
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(Name(k));
    const auto a = ArrivalOffsetsNs(k.kind, 3.0, k.cv, 500, 77);
    EXPECT_EQ(a, ArrivalOffsetsNs(k.kind, 3.0, k.cv, 500, 77));
    ASSERT_EQ(a.size(), 500u);
    const auto b = ArrivalOffsetsNs(k.kind, 3.0, k.cv, 500, 78);
    if (k.kind == ArrivalKind::kConstant) {
      EXPECT_EQ(a, b);  // nothing is drawn
    } else {
      EXPECT_NE(a, b);
      // Not merely shifted: most gaps differ.
      int same = 0;
      for (size_t i = 1; i < a.size(); ++i) same += (a[i] - a[i - 1]) == (b[i] - b[i - 1]);
      EXPECT_LT(same, 10);
    }
  }
}

// The rate and the gaps' cv are what was asked for. The sample is at least 20,000 arrivals and
// large enough that 2% is four standard errors of the mean gap (whose relative error is
// cv / sqrt(n)): 20,000 gaps at cv 2 would leave 2% at 1.4 standard errors, a coin toss.
TEST(ArrivalOffsets, MeanRateAndCvOfGapsMatchTheKind) {
  const double rate = 7.5;
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(Name(k));
    const int64_t n = std::max<int64_t>(20000, std::llround(40000 * k.cv * k.cv));
    const auto offsets = ArrivalOffsetsNs(k.kind, rate, k.cv, n, 20260101);
    ASSERT_EQ(static_cast<int64_t>(offsets.size()), n);
    EXPECT_TRUE(NonDecreasing(offsets));
    const GapStats g = Gaps(k.kind, offsets);
    EXPECT_NEAR(1 / g.mean_s, rate, 0.02 * rate);
    if (k.cv == 0) {
      EXPECT_LT(g.cv, 0.05);  // gaps differ by at most a rounding nanosecond
    } else {
      EXPECT_NEAR(g.cv, k.cv, 0.05 * k.cv);
    }
  }
}

TEST(ArrivalOffsets, NonDecreasingEvenWhenBurstsSendManyAtOnce) {
  // cv 10 is gamma shape 0.01: most gaps round to 0 ns, a few are very long.
  const auto offsets = ArrivalOffsetsNs(ArrivalKind::kGamma, 50, 10, 20000, 3);
  ASSERT_EQ(offsets.size(), 20000u);
  EXPECT_TRUE(NonDecreasing(offsets));
  EXPECT_GE(offsets.front(), 0);
  int simultaneous = 0;
  for (size_t i = 1; i < offsets.size(); ++i) simultaneous += offsets[i] == offsets[i - 1];
  EXPECT_GT(simultaneous, 1000);  // simultaneous sends are kept, in order
}

TEST(ArrivalOffsets, ConstantStartsAtZeroAndTheOthersOneGapIn) {
  const auto constant = ArrivalOffsetsNs(ArrivalKind::kConstant, 4, 0, 5, 1);
  EXPECT_EQ(constant, (std::vector<int64_t>{0, 250000000, 500000000, 750000000, 1000000000}));
  // A constant schedule is exact over long runs: offset i is round(i / rate), not a running sum.
  const auto thirds = ArrivalOffsetsNs(ArrivalKind::kConstant, 3, 0, 300001, 1);
  EXPECT_EQ(thirds[1], 333333333);
  EXPECT_EQ(thirds[2], 666666667);
  EXPECT_EQ(thirds[300000], 100000000000000);
  for (ArrivalKind kind : {ArrivalKind::kPoisson, ArrivalKind::kGamma}) {
    EXPECT_GT(ArrivalOffsetsNs(kind, 4, 2, 1, 1)[0], 0) << ArrivalKindName(kind);
  }
}

// A change to the generator, the seeding or the gap rounding changes every schedule, so it must be
// deliberate: these are the first offsets of three schedules, pinned (an independent
// re-implementation of the algorithm described in arrival.h gave the same values).
TEST(ArrivalOffsets, GoldenPrefix) {
  EXPECT_EQ(ArrivalOffsetsNs(ArrivalKind::kPoisson, 2.0, 1, 5, 42),
            (std::vector<int64_t>{1239285555, 1724421147, 1917220469, 1956367243, 1960482172}));
  EXPECT_EQ(ArrivalOffsetsNs(ArrivalKind::kGamma, 2.0, 2.0, 5, 42),
            (std::vector<int64_t>{559084685, 891845745, 940077831, 2326665844, 2331391001}));
  EXPECT_EQ(ArrivalOffsetsNs(ArrivalKind::kGamma, 2.0, 0.5, 5, 42),
            (std::vector<int64_t>{305556615, 1026324139, 1936590863, 2258936086, 2811874401}));
}

TEST(ArrivalOffsets, ALongerScheduleExtendsAShorterOne) {
  for (const Kind& k : kKinds) {
    SCOPED_TRACE(Name(k));
    const auto shorter = ArrivalOffsetsNs(k.kind, 2.5, k.cv, 40, 9);
    const auto longer = ArrivalOffsetsNs(k.kind, 2.5, k.cv, 400, 9);
    ASSERT_EQ(shorter.size(), 40u);
    EXPECT_TRUE(std::equal(shorter.begin(), shorter.end(), longer.begin()));
    // The duration form is the prefix of the same sequence below the duration.
    const auto within = ArrivalOffsetsForDurationNs(k.kind, 2.5, k.cv, 60, 9);
    ASSERT_FALSE(within.empty());
    ASSERT_LT(within.size(), longer.size());
    EXPECT_TRUE(std::equal(within.begin(), within.end(), longer.begin()));
    EXPECT_LT(within.back(), 60'000'000'000);
    EXPECT_GE(longer[within.size()], 60'000'000'000);
  }
}

TEST(ArrivalOffsets, DurationHoldsAboutRateTimesDuration) {
  // constant: offsets 0, 0.5 s, ..., 99.5 s inside [0, 100 s); 100 s itself is outside.
  EXPECT_EQ(ArrivalOffsetsForDurationNs(ArrivalKind::kConstant, 2, 0, 100, 1).size(), 200u);
  const auto poisson = ArrivalOffsetsForDurationNs(ArrivalKind::kPoisson, 2, 1, 10000, 1);
  EXPECT_NEAR(static_cast<double>(poisson.size()), 20000, 4 * std::sqrt(20000.0));
}

TEST(ArrivalOffsets, InvalidArgumentsGiveNoSchedule) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kClosedLoop, 2, 1, 10, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kPoisson, 0, 1, 10, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kPoisson, -1, 1, 10, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kPoisson, nan, 1, 10, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kPoisson, inf, 1, 10, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kPoisson, 2, 1, 0, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kGamma, 2, 0, 10, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsNs(ArrivalKind::kGamma, 2, nan, 10, 1).empty());
  // cv is read for gamma only.
  EXPECT_EQ(ArrivalOffsetsNs(ArrivalKind::kPoisson, 2, 0, 10, 1),
            ArrivalOffsetsNs(ArrivalKind::kPoisson, 2, 5, 10, 1));
  EXPECT_TRUE(ArrivalOffsetsForDurationNs(ArrivalKind::kPoisson, 2, 1, 0, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsForDurationNs(ArrivalKind::kPoisson, 2, 1, -5, 1).empty());
  EXPECT_TRUE(ArrivalOffsetsForDurationNs(ArrivalKind::kPoisson, 2, 1, inf, 1).empty());
}

}  // namespace
}  // namespace capq

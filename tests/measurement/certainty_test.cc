// The certainty of a latency verdict: the early-miss rule held against every completion of the
// unknown requests, and the binomial confidences held against direct sums and LoadGen's figures.
#include "capq/measurement/certainty.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "capq/measurement/metrics.h"

namespace capq {
namespace {

// Every value an unknown request may take in the brute force: a grid that holds every lower bound
// the cases use, so the least completion is among those tried.
const std::vector<double> kGrid = {0, 1, 2, 3, 4, 5, 7, 50};

// True when every completion of f's unknown requests from kGrid (a waiting one no lower than its
// bound) misses "p-th percentile < below".
bool EveryCompletionMisses(const PartialFigure& f, double p, PercentileMethod m, double below) {
  const size_t waiting = f.waiting_at_least.size();
  const size_t unknown = static_cast<size_t>(f.total) - f.known.size();
  std::vector<double> values(unknown);
  std::function<bool(size_t)> all_miss = [&](size_t i) {
    if (i == unknown) {
      std::vector<double> all = f.known;
      all.insert(all.end(), values.begin(), values.end());
      return Percentile(all, p, m) >= below;
    }
    const double floor = i < waiting ? f.waiting_at_least[i] : 0.0;
    for (double v : kGrid) {
      if (v < floor) continue;
      values[i] = v;
      if (!all_miss(i + 1)) return false;
    }
    return true;
  };
  return all_miss(0);
}

TEST(CertaintyTest, AMissIsCertainExactlyWhenNoCompletionOfTheUnknownRequestsPasses) {
  std::mt19937 rng(7);
  auto pick = [&](int hi) { return std::uniform_int_distribution<int>(0, hi)(rng); };
  int certain = 0, open = 0;
  for (int round = 0; round < 3000; ++round) {
    PartialFigure f;
    f.total = 1 + pick(5);
    const int known = pick(static_cast<int>(f.total));
    const int waiting = pick(static_cast<int>(f.total) - known);
    for (int i = 0; i < known; ++i) f.known.push_back(kGrid[pick(6)]);
    for (int i = 0; i < waiting; ++i) f.waiting_at_least.push_back(kGrid[pick(5)]);
    const double p = std::vector<double>{50, 75, 90, 95, 99}[pick(4)];
    const double below = 0.5 + pick(6);
    for (PercentileMethod m : {PercentileMethod::kLinear, PercentileMethod::kNearestRank}) {
      const bool brute = EveryCompletionMisses(f, p, m, below);
      ASSERT_EQ(MissIsCertain(f, p, m, below), brute)
          << "total " << f.total << " known " << known << " waiting " << waiting << " p" << p
          << " below " << below << " " << PercentileMethodName(m);
      (brute ? certain : open) += 1;
    }
  }
  // Both answers occur often enough for the comparison to mean something.
  EXPECT_GT(certain, 500);
  EXPECT_GT(open, 500);
}

TEST(CertaintyTest, TheFifthOfSixtyFourOverTheBoundDecidesAP95Gate) {
  // 64 measured at p95 (linear: rank 59.85, between the 60th and 61st values): four requests
  // over the bound leave room for a pass, the fifth does not, whatever the rest do.
  PartialFigure f;
  f.total = 64;
  f.known.assign(20, 100.0);
  f.waiting_at_least.assign(4, 2600.0);
  EXPECT_FALSE(MissIsCertain(f, 95, PercentileMethod::kLinear, 2500));
  f.waiting_at_least.push_back(2500.0);
  EXPECT_TRUE(MissIsCertain(f, 95, PercentileMethod::kLinear, 2500));
  // Nearest rank (rank 61): the fourth over the bound already decides.
  f.waiting_at_least.pop_back();
  EXPECT_TRUE(MissIsCertain(f, 95, PercentileMethod::kNearestRank, 2500));
  f.waiting_at_least.pop_back();
  EXPECT_FALSE(MissIsCertain(f, 95, PercentileMethod::kNearestRank, 2500));
}

TEST(CertaintyTest, NothingIsCertainOfAnEmptyOrOverfullFigure) {
  EXPECT_FALSE(MissIsCertain(PartialFigure{}, 95, PercentileMethod::kLinear, 1));
  PartialFigure over;
  over.total = 1;
  over.known = {5, 5};
  EXPECT_TRUE(std::isnan(LowestReachablePercentile(over, 95, PercentileMethod::kLinear)));
  EXPECT_FALSE(MissIsCertain(over, 95, PercentileMethod::kLinear, 1));
}

TEST(CertaintyTest, TheBinomialCdfIsTheDirectSum) {
  for (int n : {1, 5, 20, 64}) {
    for (double q : {0.01, 0.05, 0.3, 0.9}) {
      double sum = 0, choose = 1;
      for (int k = 0; k <= n; ++k) {
        if (k > 0) choose = choose * (n - k + 1) / k;
        sum += choose * std::pow(q, k) * std::pow(1 - q, n - k);
        EXPECT_NEAR(BinomialCdf(k, n, q), sum, 1e-9) << "k " << k << " n " << n << " q " << q;
      }
    }
  }
  EXPECT_EQ(BinomialCdf(-1, 10, 0.5), 0);
  EXPECT_EQ(BinomialCdf(10, 10, 0.5), 1);
  // A long run stays finite and ordered where the direct sum would underflow term by term.
  EXPECT_GT(BinomialCdf(600, 10000, 0.05), 0.9);
  EXPECT_LT(BinomialCdf(400, 10000, 0.05), 1e-3);
}

TEST(CertaintyTest, APassClaimNeedsWhatLoadGenEarlyStoppingNeeds) {
  // MLPerf LoadGen's early stopping at p95 and 0.99: 90 queries with none over the bound, 130
  // with one.
  EXPECT_EQ(RequestsForPassClaim(0, 95, 0.99), std::optional<int64_t>(90));
  EXPECT_EQ(RequestsForPassClaim(1, 95, 0.99), std::optional<int64_t>(130));
  EXPECT_LT(PassConfidence(89, 0, 95), 0.99);
  EXPECT_GE(PassConfidence(90, 0, 95), 0.99);
  // 64 requests with three over the bound: a pass of the seed's size, far from 0.99.
  EXPECT_LT(PassConfidence(64, 3, 95), 0.5);
  EXPECT_EQ(RequestsForPassClaim(0, 95, 0.99, /*cap=*/50), std::nullopt);
}

TEST(CertaintyTest, AFailClaimGrowsSurerWithEveryMissAndNeedsARateAboveTheBound) {
  double last = -1;
  for (int over = 0; over <= 20; ++over) {
    const double c = FailConfidence(64, over, 95);
    EXPECT_GE(c, last) << over;
    last = c;
  }
  EXPECT_EQ(FailConfidence(64, 0, 95), 0);
  EXPECT_GT(FailConfidence(64, 12, 95), 0.999);
  EXPECT_EQ(RequestsForFailClaim(64, 3, 95, 0.99), std::nullopt);  // 4.7 %: not above 5 %
  const std::optional<int64_t> n = RequestsForFailClaim(64, 12, 95, 0.99);
  ASSERT_TRUE(n.has_value());
  EXPECT_GT(*n, 1);  // one request cannot show a whole miss rate
  EXPECT_LE(*n, 64);
  const auto misses =
      static_cast<int64_t>(std::floor(12.0 / 64.0 * static_cast<double>(*n) + 1e-9));
  EXPECT_GE(FailConfidence(*n, misses, 95), 0.99);
}

}  // namespace
}  // namespace capq

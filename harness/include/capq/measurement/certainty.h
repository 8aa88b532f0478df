// How certain a latency verdict is: whether a trial still running can already no longer meet a
// percentile bound (so it may stop), and, once measured, how confident a pass or a fail is that
// the server's true percentile lies on that side of the bound. Pure functions; no I/O.
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "capq/model/row.h"

namespace capq {

// What a trial knows of one latency figure while it runs, over its `total` measured requests:
// the values of the requests that have one (a first token arrived), a lower bound for each
// request still waiting (the time it has waited so far: its value can only be larger), and the
// rest, not yet sent, whose values may be anything from 0.
struct PartialFigure {
  std::vector<double> known;
  std::vector<double> waiting_at_least;
  int64_t total = 0;  // known + waiting + not yet sent
};

// The smallest p-th percentile (method m) the finished trial can still show, over every value
// the unknown requests may take. Both methods are non-decreasing in every value, so it is the
// percentile with each waiting request at its lower bound and each unsent one at 0. NaN when
// `total` is 0 or smaller than what is known.
double LowestReachablePercentile(const PartialFigure& f, double p, PercentileMethod m);

// A gate "p-th percentile < below" can no longer pass: the lowest reachable percentile is at or
// above the bound. Exact: false whenever some completion of the unknown requests would pass.
bool MissIsCertain(const PartialFigure& f, double p, PercentileMethod m, double below);

// P(X <= k) for X ~ Binomial(n, q); 1 for k >= n, 0 for k < 0.
double BinomialCdf(int64_t k, int64_t n, double q);

// One-sided confidence, from n requests of which `over` were at or above the bound, that the
// server's true p-th percentile is below the bound (a pass claim): 1 - P(X <= over) for X ~
// Binomial(n, 1 - p/100), the chance a server exactly at the bound would have shown more misses.
// The rule of MLPerf LoadGen's early stopping: for p = 95 at 0.99 it needs 90 requests with
// none over, 130 with one.
double PassConfidence(int64_t n, int64_t over, double p);

// One-sided confidence that the true p-th percentile is at or above the bound (a fail claim):
// P(X < over) for X ~ Binomial(n, 1 - p/100), the chance a server exactly at the bound would have
// shown fewer misses than were seen.
double FailConfidence(int64_t n, int64_t over, double p);

// The fewest requests a pass claim at `confidence` needs when `over` of them miss the bound;
// nullopt past `cap` requests.
std::optional<int64_t> RequestsForPassClaim(int64_t over, double p, double confidence,
                                            int64_t cap = 100'000'000);

// The fewest requests a fail claim at `confidence` needs when misses keep the rate seen
// (`over` of `n`, whole misses: floor(rate * requests)), found by bisection: nullopt when that rate
// is not above 1 - p/100 (no number of requests would make the claim) or past `cap`.
std::optional<int64_t> RequestsForFailClaim(int64_t n, int64_t over, double p, double confidence,
                                            int64_t cap = 100'000'000);

// The confidence a claim on one side of a bound carries, at the level every verdict states it.
inline constexpr double kStatedConfidence = 0.95;

// One gate's claim from one sample (a trial, or every trial of one side of a boundary together):
// the side is the one the gate's percentile landed on.
struct GateConfidence {
  int64_t requests = 0;     // the values the gate's percentile was taken over
  int64_t over = 0;         // of them at or above the bound
  bool pass_side = false;   // the claim: below the bound (pass) or at or above it (fail)
  double confidence = NAN;  // PassConfidence or FailConfidence; NaN when nothing was measured
  // The requests a claim on that side at kStatedConfidence needs (at the miss rate seen, on the
  // fail side); nullopt when no number would do (a fail rate not above 1 - p/100).
  std::optional<int64_t> requests_needed;
};
GateConfidence ClaimConfidence(int64_t requests, int64_t over, double p, bool pass_side);
// The gate's values at or above `below`, over the finite ones, claimed on the side the gate took.
GateConfidence ClaimConfidenceOf(const std::vector<double>& values, double p, double below,
                                 bool passed);
// "confidence 0.42 below (64 requests, 3 at or over; a 0.95 claim needs 130)"; "" when nothing
// was measured.
std::string ConfidenceText(const GateConfidence& c);
// {"requests", "over", "side": "below"|"at_or_above", "confidence", "requests_needed"}: null for
// a figure that is not known. The reader takes data without the object as nothing measured.
nlohmann::json ConfidenceToJson(const GateConfidence& c);
GateConfidence ConfidenceFromJson(const nlohmann::json& j);

}  // namespace capq

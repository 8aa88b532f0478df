#include "capq/model/arrival.h"

#include <algorithm>
#include <cmath>

#include "capq/hash.h"

namespace capq {
namespace {

// Offsets beyond this (about 146 years) end a schedule rather than overflow int64 arithmetic.
constexpr double kMaxOffsetNs = 4.6e18;

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// xoshiro256** (Blackman and Vigna), its state filled from a splitmix64 stream of the seed so
// that nearby seeds give unrelated streams and the state is never all zero.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& w : s_) {
      w = SplitMix64(x);
      x += 0x9e3779b97f4a7c15ULL;
    }
  }
  uint64_t Next() {
    const uint64_t out = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return out;
  }
  // Uniform in the open interval (0, 1): the top 53 bits, centred in their cell, so that log(u)
  // and log(1 - u) are always finite.
  double Open01() { return (static_cast<double>(Next() >> 11) + 0.5) * 0x1.0p-53; }

 private:
  uint64_t s_[4];
};

// A standard normal draw by Marsaglia's polar method (no trigonometry, whose last bits vary
// between libms more than log's); the second normal of each accepted pair is discarded.
double Normal(Xoshiro256& g) {
  for (;;) {
    const double a = 2 * g.Open01() - 1;
    const double b = 2 * g.Open01() - 1;
    const double s = a * a + b * b;
    if (s > 0 && s < 1) return a * std::sqrt(-2 * std::log(s) / s);
  }
}

// A gamma draw with `shape` > 0 and scale 1 (mean `shape`): Marsaglia and Tsang's squeeze method,
// with shape < 1 boosted from shape + 1 by u^(1 / shape).
double Gamma(Xoshiro256& g, double shape) {
  if (shape < 1) {
    const double boosted = Gamma(g, shape + 1);
    return boosted * std::exp(std::log(g.Open01()) / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1 / std::sqrt(9 * d);
  for (;;) {
    double x = 0, v = 0;
    do {
      x = Normal(g);
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = g.Open01();
    const double x2 = x * x;
    if (u < 1 - 0.0331 * x2 * x2) return d * v;
    if (std::log(u) < 0.5 * x2 + d * (1 - v + std::log(v))) return d * v;
  }
}

bool Valid(ArrivalKind kind, double rate_rps, double cv) {
  if (kind == ArrivalKind::kClosedLoop) return false;
  if (!(rate_rps > 0) || !std::isfinite(rate_rps)) return false;
  if (kind == ArrivalKind::kGamma && (!(cv > 0) || !std::isfinite(cv))) return false;
  return true;
}

// The offsets one by one. Next() is the next offset, or -1 once the schedule has run past what
// int64 nanoseconds hold.
class Schedule {
 public:
  Schedule(ArrivalKind kind, double rate_rps, double cv, uint64_t seed)
      : kind_(kind), rate_(rate_rps), gen_(seed) {
    if (kind == ArrivalKind::kGamma) {
      shape_ = 1 / (cv * cv);
      scale_s_ = cv * cv / rate_rps;  // mean gap shape * scale = 1 / rate
    }
  }

  int64_t Next() {
    if (done_) return -1;
    double next_ns = 0;
    if (kind_ == ArrivalKind::kConstant) {
      // Each offset from its index, so no rounding accumulates over a long schedule.
      next_ns = std::round(static_cast<double>(index_) * 1e9 / rate_);
    } else {
      const double gap_s = kind_ == ArrivalKind::kPoisson ? -std::log(gen_.Open01()) / rate_
                                                          : Gamma(gen_, shape_) * scale_s_;
      next_ns = static_cast<double>(last_ns_) + std::round(gap_s * 1e9);
    }
    if (!(next_ns <= kMaxOffsetNs)) {
      done_ = true;
      return -1;
    }
    ++index_;
    last_ns_ = static_cast<int64_t>(next_ns);
    return last_ns_;
  }

 private:
  ArrivalKind kind_;
  double rate_;
  double shape_ = 1;
  double scale_s_ = 0;
  Xoshiro256 gen_;
  int64_t index_ = 0;
  int64_t last_ns_ = 0;
  bool done_ = false;
};

}  // namespace

std::vector<int64_t> ArrivalOffsetsNs(ArrivalKind kind, double rate_rps, double cv, int64_t count,
                                      uint64_t seed) {
  std::vector<int64_t> out;
  if (!Valid(kind, rate_rps, cv) || count <= 0) return out;
  out.reserve(static_cast<size_t>(count));
  Schedule schedule(kind, rate_rps, cv, seed);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t at = schedule.Next();
    if (at < 0) break;
    out.push_back(at);
  }
  return out;
}

std::vector<int64_t> ArrivalOffsetsForDurationNs(ArrivalKind kind, double rate_rps, double cv,
                                                 double duration_s, uint64_t seed) {
  std::vector<int64_t> out;
  if (!Valid(kind, rate_rps, cv) || !(duration_s > 0) || !std::isfinite(duration_s)) return out;
  const int64_t end_ns = static_cast<int64_t>(std::min(std::round(duration_s * 1e9), kMaxOffsetNs));
  const double expected = duration_s * rate_rps;
  if (expected < 1e7) out.reserve(static_cast<size_t>(expected * 1.1) + 16);
  Schedule schedule(kind, rate_rps, cv, seed);
  for (;;) {
    const int64_t at = schedule.Next();
    if (at < 0 || at >= end_ns) break;
    out.push_back(at);
  }
  return out;
}

}  // namespace capq

#include "capq/measurement/certainty.h"

#include <algorithm>
#include <cmath>

#include "capq/measurement/json_figure.h"
#include "capq/measurement/metrics.h"
#include "capq/text.h"

namespace capq {

double LowestReachablePercentile(const PartialFigure& f, double p, PercentileMethod m) {
  const int64_t seen = static_cast<int64_t>(f.known.size() + f.waiting_at_least.size());
  if (f.total <= 0 || f.total < seen) return NAN;
  std::vector<double> lowest = f.known;
  lowest.insert(lowest.end(), f.waiting_at_least.begin(), f.waiting_at_least.end());
  lowest.resize(static_cast<size_t>(f.total), 0.0);  // the unsent, at the least they may take
  return Percentile(std::move(lowest), p, m);
}

bool MissIsCertain(const PartialFigure& f, double p, PercentileMethod m, double below) {
  const double lowest = LowestReachablePercentile(f, p, m);
  return !std::isnan(lowest) && lowest >= below;
}

double BinomialCdf(int64_t k, int64_t n, double q) {
  if (k < 0) return 0;
  if (k >= n) return 1;
  if (q <= 0) return 1;
  if (q >= 1) return 0;
  // Each term in log space (lgamma), summed from the largest down, so a long tail of tiny terms
  // neither underflows nor loses the leading ones.
  const double lq = std::log(q), lr = std::log1p(-q);
  std::vector<double> logs;
  logs.reserve(static_cast<size_t>(k + 1));
  for (int64_t i = 0; i <= k; ++i) {
    const double x = static_cast<double>(i), nn = static_cast<double>(n);
    logs.push_back(std::lgamma(nn + 1) - std::lgamma(x + 1) - std::lgamma(nn - x + 1) + x * lq +
                   (nn - x) * lr);
  }
  const double top = *std::max_element(logs.begin(), logs.end());
  double sum = 0;
  for (double l : logs) sum += std::exp(l - top);
  return std::min(1.0, std::exp(top) * sum);
}

double PassConfidence(int64_t n, int64_t over, double p) {
  return 1.0 - BinomialCdf(over, n, 1.0 - p / 100.0);
}

double FailConfidence(int64_t n, int64_t over, double p) {
  return BinomialCdf(over - 1, n, 1.0 - p / 100.0);
}

namespace {

// The least n in [lo, cap] for which holds(n) is true, for a predicate that stays true once true;
// nullopt when it holds nowhere up to cap.
template <typename Holds>
std::optional<int64_t> LeastHolding(int64_t lo, int64_t cap, const Holds& holds) {
  int64_t hi = lo;
  while (!holds(hi)) {
    if (hi >= cap) return std::nullopt;
    hi = std::min(cap, hi * 2);
  }
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (holds(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

std::optional<int64_t> RequestsForPassClaim(int64_t over, double p, double confidence,
                                            int64_t cap) {
  return LeastHolding(std::max<int64_t>(1, over + 1), cap,
                      [&](int64_t n) { return PassConfidence(n, over, p) >= confidence; });
}

std::optional<int64_t> RequestsForFailClaim(int64_t n, int64_t over, double p, double confidence,
                                            int64_t cap) {
  if (n <= 0) return std::nullopt;
  const double rate = static_cast<double>(over) / static_cast<double>(n);
  if (!(rate > 1.0 - p / 100.0)) return std::nullopt;
  return LeastHolding(1, cap, [&](int64_t m) {
    // Whole misses only: a fraction of one expected miss is not yet seen.
    const auto misses = static_cast<int64_t>(std::floor(rate * static_cast<double>(m) + 1e-9));
    return FailConfidence(m, misses, p) >= confidence;
  });
}

GateConfidence ClaimConfidence(int64_t requests, int64_t over, double p, bool pass_side) {
  GateConfidence c;
  c.requests = requests;
  c.over = over;
  c.pass_side = pass_side;
  if (requests <= 0) return c;
  c.confidence = pass_side ? PassConfidence(requests, over, p) : FailConfidence(requests, over, p);
  c.requests_needed = pass_side ? RequestsForPassClaim(over, p, kStatedConfidence)
                                : RequestsForFailClaim(requests, over, p, kStatedConfidence);
  return c;
}

GateConfidence ClaimConfidenceOf(const std::vector<double>& values, double p, double below,
                                 bool passed) {
  int64_t n = 0, over = 0;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    ++n;
    over += v >= below ? 1 : 0;
  }
  return ClaimConfidence(n, over, p, passed);
}

std::string ConfidenceText(const GateConfidence& c) {
  if (c.requests <= 0 || std::isnan(c.confidence)) return "";
  std::string out = "confidence " + FormatFixed(c.confidence, 2) +
                    (c.pass_side ? " below" : " at or above") + " (" + std::to_string(c.requests) +
                    " requests, " + std::to_string(c.over) + " at or over; a " +
                    FormatShortest(kStatedConfidence) + " claim ";
  if (!c.requests_needed) return out + "cannot be made at this miss rate)";
  return out + "needs " + std::to_string(*c.requests_needed) + ")";
}

nlohmann::json ConfidenceToJson(const GateConfidence& c) {
  nlohmann::json j = {{"requests", c.requests},
                      {"over", c.over},
                      {"side", c.pass_side ? "below" : "at_or_above"},
                      {"confidence", FigureToJson(c.confidence)}};
  j["requests_needed"] = c.requests_needed ? nlohmann::json(*c.requests_needed) : nullptr;
  return j;
}

GateConfidence ConfidenceFromJson(const nlohmann::json& j) {
  GateConfidence c;
  if (!j.is_object()) return c;
  c.requests = j.at("requests").get<int64_t>();
  c.over = j.at("over").get<int64_t>();
  c.pass_side = j.at("side").get<std::string>() == "below";
  c.confidence = FigureAt(j, "confidence");
  if (!j.at("requests_needed").is_null())
    c.requests_needed = j.at("requests_needed").get<int64_t>();
  return c;
}

}  // namespace capq

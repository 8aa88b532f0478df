#include "capq/qualify/locate.h"

#include <algorithm>
#include <cmath>

namespace capq {

const char* ProbeVerdictName(ProbeVerdict v) {
  switch (v) {
    case ProbeVerdict::kPass:
      return "pass";
    case ProbeVerdict::kSloFail:
      return "slo_fail";
    case ProbeVerdict::kCorrectnessFail:
      return "correctness_fail";
    case ProbeVerdict::kCouldNotRun:
      return "could_not_run";
    case ProbeVerdict::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

int LocateProbeBudget(int cmax) {
  if (cmax <= 1) return 2;
  return static_cast<int>(std::ceil(std::log2(static_cast<double>(cmax)))) + 2;
}

namespace {

bool IsNavigation(ProbeVerdict v) {
  return v == ProbeVerdict::kPass || v == ProbeVerdict::kSloFail;
}

bool Usable(double ratio) { return std::isfinite(ratio) && ratio > 0; }

}  // namespace

Locator::Locator(Options options) : options_(options) {
  if (options_.max_level < 1) options_.max_level = 1;
}

const ProbePoint* Locator::Find(int c) const {
  for (auto it = points_.rbegin(); it != points_.rend(); ++it) {
    if (it->level == c && IsNavigation(it->verdict)) return &*it;
  }
  return nullptr;
}

int Locator::first_fail() const {
  int hi = 0;
  for (const auto& p : points_) {
    if (p.verdict == ProbeVerdict::kSloFail && (hi == 0 || p.level < hi)) hi = p.level;
  }
  return hi;
}

int Locator::last_pass() const {
  int hi = first_fail();
  int lo = 0;
  // A pass above a known failure is noise for navigation: the confirmation phase judges it.
  for (const auto& p : points_) {
    if (p.verdict == ProbeVerdict::kPass && (hi == 0 || p.level < hi)) {
      lo = std::max(lo, p.level);
    }
  }
  return lo;
}

Locator::State Locator::state() const {
  if (stopped_) return State::kStopped;
  int hi = first_fail();
  int lo = last_pass();
  if (hi == 1) return State::kFailsAtOne;
  if (hi != 0 && lo + 1 == hi) return State::kBoundary;
  if (hi == 0 && lo >= options_.max_level) return State::kNoFailUpToCap;
  return State::kSearching;
}

std::optional<Locator::Choice> Locator::Choose() const {
  if (state() != State::kSearching) return std::nullopt;
  const int hi = first_fail();
  const int lo = last_pass();
  if (std::optional<Choice> c = ChooseByPrediction(lo, hi)) return c;
  if (hi == 0) return ChooseUpward(lo);
  return ChooseInBracket(lo, hi);
}

std::optional<Locator::Choice> Locator::ChooseByPrediction(int lo, int hi) const {
  if (prediction_ < 1) return std::nullopt;
  const int cap = options_.max_level;
  const int pc = std::min(prediction_, cap);
  const ProbePoint* at = Find(pc);
  const std::string predicted = "predicted " + options_.max_name;
  if (!at && pc > lo && (hi == 0 || pc < hi)) return Choice{pc, predicted};
  if (at && at->verdict == ProbeVerdict::kPass && pc + 1 <= cap && !Find(pc + 1) &&
      (hi == 0 || pc + 1 < hi)) {
    return Choice{pc + 1, predicted + " + 1"};
  }
  if (at && at->verdict == ProbeVerdict::kSloFail && pc - 1 > lo && !Find(pc - 1)) {
    return Choice{pc - 1, predicted + " - 1"};
  }
  return std::nullopt;
}

Locator::Choice Locator::ChooseUpward(int lo) const {
  const int cap = options_.max_level;
  if (lo == 0) return Choice{1, "start at C=1"};
  Choice c{std::min(2 * lo, cap), "double"};
  const ProbePoint* at_lo = Find(lo);
  if (options_.interpolate && at_lo && Usable(at_lo->gate_ratio) && at_lo->gate_ratio < 1) {
    // Extrapolate the gate ratio to 1 from the last two passes (or, with one pass, assume it
    // grows in proportion to C). Jumps are bounded to 4x so a flat curve cannot run away.
    const ProbePoint* below = nullptr;
    for (const auto& p : points_) {
      if (p.verdict == ProbeVerdict::kPass && p.level < lo && Usable(p.gate_ratio) &&
          (!below || p.level > below->level)) {
        below = &p;
      }
    }
    double crossing = NAN;
    if (below && at_lo->gate_ratio > below->gate_ratio) {
      double slope = (at_lo->gate_ratio - below->gate_ratio) / (lo - below->level);
      crossing = lo + (1.0 - at_lo->gate_ratio) / slope;
    } else if (!below) {
      crossing = lo / at_lo->gate_ratio;
    }
    if (std::isfinite(crossing)) {
      double target = std::floor(crossing);
      target = std::clamp(target, static_cast<double>(lo + 1), 2.0 * lo);
      c = Choice{std::min(static_cast<int>(target), cap), "extrapolate"};
    }
  }
  return c;
}

Locator::Choice Locator::ChooseInBracket(int lo, int hi) const {
  // Bracketed: lo passes (or nothing known below), hi fails, hi - lo >= 2.
  Choice c{lo + (hi - lo) / 2, "bisect"};
  const ProbePoint* at_lo = lo > 0 ? Find(lo) : nullptr;
  const ProbePoint* at_hi = Find(hi);
  bool safeguard = false;
  // Two interpolated probes in a row that each failed to halve the bracket: bisect once, so a
  // curve the interpolation reads badly costs at most a constant factor over bisection.
  if (bracket_widths_.size() >= 3 && interpolated_.size() >= 2) {
    size_t n = bracket_widths_.size();
    bool last_two_interp =
        interpolated_[interpolated_.size() - 1] && interpolated_[interpolated_.size() - 2];
    bool no_halving = bracket_widths_[n - 1] * 2 > bracket_widths_[n - 2] &&
                      bracket_widths_[n - 2] * 2 > bracket_widths_[n - 3];
    safeguard = last_two_interp && no_halving;
  }
  if (options_.interpolate && !safeguard && at_lo && at_hi && Usable(at_lo->gate_ratio) &&
      Usable(at_hi->gate_ratio) && at_hi->gate_ratio > at_lo->gate_ratio) {
    // In log space: past the knee the ratio grows faster than linearly, and a linear secant
    // through a far-overshooting failure would creep up from the passing side.
    double l_lo = std::log(at_lo->gate_ratio), l_hi = std::log(at_hi->gate_ratio);
    double crossing = lo + (0.0 - l_lo) * (hi - lo) / (l_hi - l_lo);
    if (std::isfinite(crossing)) {
      double target = std::clamp(std::floor(crossing), static_cast<double>(lo + 1),
                                 static_cast<double>(hi - 1));
      c = Choice{static_cast<int>(target), "interpolate"};
    }
  }
  return c;
}

std::optional<int> Locator::Next() const {
  auto c = Choose();
  if (!c) return std::nullopt;
  return c->level;
}

void Locator::AddKnown(const ProbePoint& p) {
  points_.push_back(p);
  if (!IsNavigation(p.verdict)) {
    stopped_ = true;
    stop_reason_ = p.reason.empty() ? ProbeVerdictName(p.verdict) : p.reason;
  }
}

void Locator::Record(const ProbePoint& p) {
  auto choice = Choose();
  const bool bracketed_before = first_fail() != 0;
  std::string move = choice && choice->level == p.level ? choice->move : "chosen by caller";
  points_.push_back(p);
  probes_.push_back(p);
  interpolated_.push_back(move == "interpolate");
  if (bracketed_before || first_fail() != 0) {
    int lo = last_pass();
    int hi = first_fail();
    bracket_widths_.push_back(hi - lo);
  }
  if (!IsNavigation(p.verdict)) {
    stopped_ = true;
    stop_reason_ = p.reason.empty() ? ProbeVerdictName(p.verdict) : p.reason;
  }
  moves_.push_back(move);
}

}  // namespace capq

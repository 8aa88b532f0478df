// The confirmation of a located boundary (capq/qualify/qualify.h): independent trials at the
// candidate and one level above, alternating; on overlap more trials per side, then the operating
// point at or below the candidate, never rounded toward more traffic.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "capq/qualify/qualify.h"
#include "capq/text.h"
#include "qualify_internal.h"

namespace capq::qualify_internal {

namespace {

int Passes(const std::vector<const TrialSummary*>& ts) {
  int n = 0;
  for (const auto* t : ts) n += t->passed();
  return n;
}

}  // namespace

bool Run::FillTo(int c, int n, int c_up, int n_up) {
  int total = 0;
  auto count = [&](int cc) {
    return static_cast<int>(q_.Trials(QualifyPhase::kConfirm, cc).size());
  };
  total = std::max(0, n - count(c)) + (c_up ? std::max(0, n_up - count(c_up)) : 0);
  int done = 0;
  while (count(c) < n || (c_up && count(c_up) < n_up)) {
    for (int side : {c, c_up}) {
      if (!side) continue;
      int want = side == c ? n : n_up;
      if (count(side) >= want) continue;
      if (Cancelled()) {
        Interrupt("confirm");
        return false;
      }
      int k = count(side) + 1;
      ++done;
      Say("confirm " + std::to_string(done) + "/" + std::to_string(total) + ": " +
          LevelLabel(side) + " trial " + std::to_string(k) + Eta(total - done + 1));
      const TrialSummary& t = RunOne(QualifyPhase::kConfirm, side, k, "");
      Say("confirm: " + LevelLabel(side) + " trial " + std::to_string(k) + " " + Brief(t) +
          Fmt(" (%.1f s)", t.wall_s));
      if (StopOn(t)) return false;
    }
  }
  return true;
}

void Run::Confirm(int c) {
  if (!FillTo(c, trials_, c + 1, trials_)) return;
  auto low = q_.Trials(QualifyPhase::kConfirm, c);
  auto high = q_.Trials(QualifyPhase::kConfirm, c + 1);
  if (Passes(low) == static_cast<int>(low.size()) && Passes(high) == 0) {
    q_.status = QualifyStatus::kProven;
    if (row_.open_loop()) {
      q_.rmax_rps = scale_.Rate(c);
    } else {
      q_.cmax = c;
    }
    q_.operating_point = c;
    q_.message =
        "every " + LevelLabel(c) + " trial passed and every " + LevelLabel(c + 1) + " trial failed";
    ReachConfidence(c);
    return;
  }
  Lower(c);
}

double Run::PassSideConfidence(int c) const {
  double lowest = 1;
  for (const BoundarySide& side : BoundaryConfidence(q_)) {
    if (side.level != c || !side.pass_side) continue;
    for (const GateConfidence& g : side.gates) {
      lowest = std::min(lowest, std::isnan(g.confidence) ? 0.0 : g.confidence);
    }
    return lowest;
  }
  return 0;
}

void Run::ReachConfidence(int c) {
  if (!row_.confidence) return;
  ConfidenceClaim claim;
  claim.asked = *row_.confidence;
  const std::string at = LevelLabel(c);
  while (true) {
    claim.reached = PassSideConfidence(c);
    const int have = static_cast<int>(q_.Trials(QualifyPhase::kConfirm, c).size());
    if (claim.reached >= claim.asked) {
      claim.met = true;
      claim.note =
          Fmt("met: %.3f", claim.reached) + " over " + std::to_string(have) + " trials at " + at;
      break;
    }
    if (have >= max_per_side_) {
      claim.note = Fmt("not met: %.3f", claim.reached) + " over " + std::to_string(have) +
                   " trials at " + at + ", the most a side may have (--max-trials)";
      break;
    }
    Say("confirm: " + at + Fmt("'s pass side at confidence %.3f", claim.reached) +
        Fmt(", below the required %.3f: one more trial", claim.asked));
    if (!FillTo(c, have + 1, 0, 0)) {
      claim.note = "not met: the qualification stopped at " + at;
      break;
    }
    ++claim.added_trials;
    const TrialSummary& t = *q_.Trials(QualifyPhase::kConfirm, c).back();
    if (!t.passed()) {
      claim.reached = PassSideConfidence(c);
      claim.note = "not met: " + at + " trial " + std::to_string(have + 1) + " failed, so " + at +
                   " is no longer a proven pass side";
      q_.confidence_claim = claim;
      q_.cmax.reset();
      q_.rmax_rps.reset();
      Lower(c);
      return;
    }
  }
  q_.confidence_claim = claim;
}

void Run::Lower(int c) {
  auto low = q_.Trials(QualifyPhase::kConfirm, c);
  auto high = q_.Trials(QualifyPhase::kConfirm, c + 1);
  // Overlap: measure the noise with more trials on both sides, then never round upward.
  Say("confirm: sides overlap (" + LevelLabel(c) + " " + SideWord(low) + ", " + LevelLabel(c + 1) +
      " " + SideWord(high) + "); extending to " + std::to_string(max_per_side_) +
      " trials per side");
  if (!FillTo(c, max_per_side_, c + 1, max_per_side_)) return;
  low = q_.Trials(QualifyPhase::kConfirm, c);
  high = q_.Trials(QualifyPhase::kConfirm, c + 1);
  std::string noise = LevelLabel(c) + " passed " + std::to_string(Passes(low)) + " of " +
                      std::to_string(low.size()) + " trials, " + LevelLabel(c + 1) + " passed " +
                      std::to_string(Passes(high)) + " of " + std::to_string(high.size());
  int candidate = c;
  int steps = 0;
  while (true) {
    auto at = q_.Trials(QualifyPhase::kConfirm, candidate);
    if (!at.empty() && Passes(at) == static_cast<int>(at.size())) break;
    if (candidate <= 1 || steps >= opt_.max_steps_down) {
      q_.status = QualifyStatus::kLowered;
      q_.operating_point.reset();
      q_.message = "noisy boundary (" + noise + ") and no level down to " + LevelLabel(candidate) +
                   " passed every trial: no operating point";
      return;
    }
    --candidate;
    ++steps;
    Say("confirm: moving down to " + LevelLabel(candidate));
    if (!FillTo(candidate, trials_, 0, 0)) return;
  }
  q_.status = QualifyStatus::kLowered;
  q_.operating_point = candidate;
  q_.message = "noisy boundary: " + noise + ". Operating point " + LevelLabel(candidate) +
               " (every trial passed); it is not a proven " + scale_.Max() + " because " +
               LevelLabel(candidate + 1) + " did not fail every trial";
}

}  // namespace capq::qualify_internal

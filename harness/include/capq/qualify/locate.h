// The locator: which concurrencies to probe to find an adjacent pair (last pass, first fail).
// Pure policy, no I/O: a caller asks Next(), runs a probe trial at that C, and Record()s the
// result.
//
// Probes are navigation, not evidence (seed, Part III): the locator only proposes the pair that the
// confirmation phase then proves with independent trials.
//
// Search: exponential steps from C = 1 (1, 2, 4, 8, ...) until the first failure, then bisection
// between the last pass and the first fail, ending with an adjacent pair. When probes report how
// close they came to the SLO (`gate_ratio` = measured / threshold of the tightest gate), the
// locator aims its next probe at the predicted crossing instead (linear interpolation between the
// two bracketing probes, or extrapolation from the last two passes), safeguarded so that a step
// that fails to halve the bracket is followed by a plain bisection. With pass/fail only it is
// exactly exponential search + bisection.
//
// A probe that fails correctness, could not run or was interrupted stops the search: a broken
// stream is never navigated as an SLO failure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capq/model/load_level.h"

namespace capq {

enum class ProbeVerdict { kPass, kSloFail, kCorrectnessFail, kCouldNotRun, kInterrupted };
const char* ProbeVerdictName(ProbeVerdict v);  // "pass", "slo_fail", ...

struct ProbePoint {
  LoadLevel level = 0;
  ProbeVerdict verdict = ProbeVerdict::kCouldNotRun;
  // measured / below_ms of the SLO gate closest to (or furthest past) its threshold: < 1 passes.
  // NaN when unknown; the locator then uses pass/fail only.
  double gate_ratio = 0;
  std::string reason;  // why a probe stopped the search (the failed gate), for the caller's message
};

class Locator {
 public:
  enum class State {
    kSearching,      // Next() has a level to probe
    kBoundary,       // last_pass() + 1 == first_fail()
    kNoFailUpToCap,  // every probe up to max_level passed: Cmax >= cap, not a claim
    kFailsAtOne,     // C = 1 misses the SLO: no concurrency meets it
    kStopped,        // a probe failed correctness / could not run / was interrupted
  };

  struct Options {
    LoadLevel max_level = 256;  // never probe above this
    bool interpolate = true;    // use gate_ratio when probes report it
    // The answer's name in moves(): "Cmax", or "Rmax" where the levels are rate steps.
    std::string max_name = "Cmax";
  };

  explicit Locator(Options options);

  // A point known without spending a probe (the C = 1 baseline trial). Not counted as a probe.
  void AddKnown(const ProbePoint& p);
  // A predicted Cmax (e.g. from the simulator's engine model): the search probes it and its
  // neighbour first, so a right prediction costs two probes; a wrong one falls back to the
  // search above from whatever the two probes showed.
  void SetPrediction(int predicted_cmax) { prediction_ = predicted_cmax; }
  // The next level to probe; nullopt when state() != kSearching.
  std::optional<int> Next() const;
  void Record(const ProbePoint& p);

  State state() const;
  // Largest passing C below first_fail() (0 when none); first failing C (0 when none yet).
  int last_pass() const;
  int first_fail() const;
  int probes_used() const { return static_cast<int>(probes_.size()); }
  const std::vector<ProbePoint>& probes() const { return probes_; }
  const std::vector<ProbePoint>& points() const { return points_; }  // known + probes, in order
  const std::string& stop_reason() const { return stop_reason_; }
  // "double", "bisect", "interpolate", "extrapolate", "adjacent pair found", ... : why each probe
  // was chosen, parallel to probes(), for the report's locator table.
  const std::vector<std::string>& moves() const { return moves_; }

 private:
  struct Choice {
    LoadLevel level = 0;
    std::string move;
  };
  std::optional<Choice> Choose() const;
  // The predicted level and its neighbours, while they are unprobed and inside the bracket.
  std::optional<Choice> ChooseByPrediction(int lo, int hi) const;
  // No failure yet: double from the last pass, or extrapolate its gate ratio to 1.
  Choice ChooseUpward(int lo) const;
  // Bracketed: bisect, or interpolate the gate ratios of both ends.
  Choice ChooseInBracket(int lo, int hi) const;
  const ProbePoint* Find(int c) const;

  Options options_;
  std::vector<ProbePoint> points_;
  std::vector<ProbePoint> probes_;
  std::vector<std::string> moves_;
  std::vector<int> bracket_widths_;  // hi - lo after each bracketed probe
  std::vector<bool> interpolated_;   // per probe: chosen by interpolation
  std::string stop_reason_;
  bool stopped_ = false;
  int prediction_ = 0;
};

// The probe budget the protocol targets on smooth (simulated) rows: ceil(log2(cmax)) + 2.
int LocateProbeBudget(int cmax);

}  // namespace capq

// One qualification of one row (capq/qualify/qualify.h): the driver and its phases in qualify.cc,
// the confirmation in qualify_confirm.cc, the words they print in qualify_summary.cc.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/qualify/locate.h"
#include "capq/qualify/qualify.h"

namespace capq::qualify_internal {

// "pass", "fail" or "2/3 pass": a side's trials in one word.
std::string SideWord(const std::vector<const TrialSummary*>& ts);

// The correctness gates a trial failed, each named once: "nonempty_deltas, unique_outputs".
std::string FailedGateNames(const TrialSummary& t);

// The gate that decided a trial against its bound: "itl p95 55.1 ms >= 50.0 ms", or on a rate row
// the stability gate when every SLO gate was met ("queue_bounded: client in-flight ...").
std::string DecidedBy(const TrialSummary& t);

// What the C=1 baseline measures: "20 measured requests (the single-user check; a claim at C=1
// measures 64)", "120 measured requests after a 10 s ramp", "300 s measured after a 10 s ramp".
std::string BaselineSampleText(const Row& row);

// A trial's reasons joined with "; ", or its outcome when it gave none.
std::string Reasons(const TrialSummary& t);

// "slo_fail itl p95 55.1 ms >= 50.0 ms": the outcome and the gate that decided it.
std::string Brief(const TrialSummary& t);

class Run {
 public:
  Run(const Row& row, const TrialRunner& runner, const QualifyOptions& opt);

  RowQualification Go();

 private:
  bool Cancelled() const { return opt_.cancel && opt_.cancel->load(); }

  // The primary tier's result in brief: probes, budget and the summary line.
  void Conclude();

  // Each further SLO tier of the row, reusing the trials run so far (capq/qualify/tiers.h).
  void QualifyFurtherTiers();

  // "C=6" or "R=1.25 rps": every line below names a level this way.
  std::string LevelLabel(int level) const { return scale_.Label(level); }

  void Say(const std::string& line) const {
    if (opt_.progress) opt_.progress(q_.row.id + ": " + line);
  }

  double MeanTrialWall() const;
  std::string Eta(int remaining) const;

  void BeginPhase(const std::string& name);
  void EndPhase();

  const TrialSummary& RunOne(QualifyPhase phase, int c, int k, const std::string& move);

  // Stops the qualification when a trial is not navigation or evidence (correctness, setup,
  // interruption). Returns true when it stopped.
  bool StopOn(const TrialSummary& t);

  // Freeze, baseline, locate, confirm: the primary tier's search.
  void Execute();

  // 2. Baseline at level 1 (C = 1, or one rate step) with the row's warm-ups. Null when the
  // qualification stopped there.
  const TrialSummary* RunBaseline();

  // 3. Locate. The last passing level of the adjacent pass/fail pair, or nullopt when the search
  // ended the qualification (its status and message say how).
  std::optional<int> Locate(const TrialSummary& base);

  // The locator's probes, one trial each, until it has no next level. False when the
  // qualification stopped during them (the phase is then ended).
  bool Probe(Locator* loc);

  // The locator's reason for probing `next`, as the progress line and the trial record name it.
  std::string ProbeMove(const Locator& loc, int next) const;

  // Where the locator stopped. True at a boundary; otherwise the status and message say why not.
  bool AtBoundary(const Locator& loc, const TrialSummary& base);

  // The latest prediction's source, curve and parameters, as the capacity data keeps them.
  void TakePrediction(const BoundaryPrediction& p);

  // 2b. Without a hint, the engine model calibrated on the baseline predicts where to probe.
  void PredictFromBaseline(const TrialSummary& base);

  // Once, on the first probe that contradicts the baseline's prediction (a fail at or below it, a
  // pass above it): the prediction refined with the decode step that probe measured under load,
  // and the locator aimed at the refined boundary.
  void RefinePrediction(const TrialSummary& probe, Locator* loc);

  void Interrupt(const std::string& phase);

  bool CheckBaseline(const TrialSummary& base);

  // Runs trials at `c` until it has `n`, alternating with `c_up` when given.
  bool FillTo(int c, int n, int c_up, int n_up);

  // 4. Confirm `c` against `c` + 1 (qualify_confirm.cc).
  void Confirm(int c);

  // The sides of `c` overlapped: more trials on both, then the operating point at or below `c`.
  void Lower(int c);

  // A proven boundary `c` whose row requires a confidence (Row::confidence): one more trial at
  // `c` at a time until its pass side reaches it, a trial fails there (the proof is undone and
  // Lower decides), or the side holds max_per_side_ trials.
  void ReachConfidence(int c);
  // The pass side's lowest gate confidence at `c`, over its trials together (0 when unknown).
  double PassSideConfidence(int c) const;

  const Row& row_;
  LoadScale scale_;
  const TrialRunner& runner_;
  QualifyOptions opt_;
  MonoNs t0_;
  MonoNs phase_start_ns_ = 0;
  int trials_ = 3;
  int max_per_side_ = 6;
  RowQualification q_;
  bool from_baseline_ = false;  // the prediction came from the baseline (refinable)
};

}  // namespace capq::qualify_internal

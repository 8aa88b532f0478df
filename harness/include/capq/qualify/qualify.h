// capq qualify as a program (seed, Part VI): freeze, C = 1 baseline, locate, confirm, and the row's
// new expectation. The policy here is independent of how a trial runs: it takes a TrialRunner, so
// tests drive it with a fake and the command drives it with one process per trial.
//
// SLO tiers (Row::slo_tiers): after the primary (the row's own slo), each further tier is located
// and confirmed on its own gates, reusing every trial already run (capq/qualify/tiers.h); the
// result holds every tier side by side in `tiers`.
//
// Confirmation rule: trials.count independent trials at the candidate Cmax and at Cmax + 1 (run
// alternately so slow drift hits both sides alike); every Cmax trial must pass and every Cmax + 1
// trial must fail. If they overlap, both sides are extended up to `max_trials_per_side` to measure
// the noise; then the result is the lower operating point (the largest C at or below the candidate
// whose trials all passed), reported as "lowered" with the reason — never rounded toward more
// traffic. A correctness failure anywhere stops the qualification with the gate named: a broken
// stream is never counted as an SLO failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "capq/model/qualify_phase.h"
#include "capq/model/row.h"
#include "capq/qualify/locate.h"
#include "capq/qualify/predict.h"
#include "capq/record/capacity_data.h"

namespace capq {

struct TrialRequest {
  QualifyPhase phase = QualifyPhase::kConfirm;
  LoadLevel level = 1;
  int trial = 1;  // 1-based index within (phase, level)
  uint64_t seed = 0;
};

// Runs one trial and summarizes it. Must not throw; a trial that could not run returns outcome
// "could_not_run" with reasons. Timing fields are filled in by Qualify().
using TrialRunner = std::function<TrialSummary(const Row& row, const TrialRequest& request)>;

struct QualifyOptions {
  LoadLevel max_level = 256;    // --max-concurrency: on a rate row, in rate steps
  int trials = 0;               // per side; 0 = row.trials.count
  int max_trials_per_side = 0;  // when the sides overlap; 0 = 2 x trials
  int max_steps_down = 3;       // how far below the candidate to look for an operating point
  // A hint for the locator, navigation only: the predicted boundary level (Cmax, or Rmax in rate
  // steps; PredictFromProfile, PredictLevelFromClosedLoop).
  std::optional<int> predicted_cmax;
  std::string prediction_note;    // how it was predicted, recorded in the capacity data
  std::string prediction_source;  // where it came from (engine profile NAME)
  std::vector<PredictedPoint> predicted_curve;  // what it predicted per level
  // Without a hint: a prediction made from the C = 1 baseline trial once it has run (a real
  // server's calibrated engine model, PredictFromBaselineTrial). A failure is recorded and the
  // search starts blind.
  std::function<Result<BoundaryPrediction>(const TrialSummary& baseline)> predict_from_baseline;
  // After every probe above C = 1 the prediction made from the baseline is refitted on all the
  // probes so far (TrialPredictors::refine) and the locator aims at the refitted boundary.
  std::function<Result<BoundaryPrediction>(const TrialSummary& baseline,
                                           const std::vector<const TrialSummary*>& probes)>
      refine_prediction;
  // Points known without a probe (an SLO tier's view of trials already run): given to the locator
  // with the baseline before the search. Navigation only; confirmations still run at both sides.
  std::vector<ProbePoint> known_points;
  std::string url;  // recorded
  // --corpus-salt: mixed into every trial's seed (TrialSeed), so that every prompt differs from
  // those of a run without it or with another salt. 0: the row's own seeds.
  uint64_t corpus_salt = 0;
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(const std::string&)> progress;  // one line per event, no newline
};

// A rate row's first guess from a closed-loop qualification of the same identity and shape
// (`capq qualify --from-closed-loop`), by Little's law: a closed loop at Cmax sustained about Cmax
// / mean E2E requests per second, so the guess is floor(Cmax / mean E2E at Cmax (s) /
// rate_step_rps) levels (at least 1). Both rows measure in the server's (virtual) seconds. `closed`
// must hold a proven closed-loop row whose engine, image, model, model revision, hardware and input
// and output tokens are `row`'s; otherwise an InvalidArgument names the row and what differs.
// `source` (the file) goes into `note`, which says how the level was found, for the capacity data.
Result<int> PredictLevelFromClosedLoop(const Row& row, const CapacityData& closed,
                                       const std::string& source, std::string* note);

// The seed of a trial: confirm trial k uses row.trials.seeds[k-1] (the seeds the ctest suites use)
// and a derived seed beyond them; baseline and probes get seeds derived from the row, phase and C,
// so no two trials of a qualification share a prompt set by accident. A non-zero `salt` moves every
// seed, the row's confirm seeds too: a qualification run again against a server process whose
// cache survives the flush (llama.cpp's host prompt cache) then resends none of its prompts.
uint64_t TrialSeed(const Row& row, QualifyPhase phase, LoadLevel level, int trial,
                   uint64_t salt = 0);

RowQualification Qualify(const Row& row, const TrialRunner& runner, const QualifyOptions& options);

// One side of the boundary as the summary line writes it: the side's label, the figures of the
// gate that decided it (capq/qualify/deciding_gate.h) and its verdict:
//   "C=6 ttft p95 1.65/1.65/1.65 s pass"
//   "C=7 itl p95 52.0/55.1/51.0 ms fail"
//   "C=7 itl p95 52.0 ms / ttft p95 2.41 s / itl p95 55.1 ms fail"  (failed on different gates)
//   "C=5 ttft p95 2.38/2.52/2.61 s 1/3 pass"
//   "R=1.50 rps queue_bounded client in-flight 14.2 > 5.9, 13.1 > 5.1, 15 > 6 fail"  (a rate row
//   whose trials met the SLO but not a stability gate)
// `label` names the operating point (LoadLabel: "C=6", "R=1.25 rps"); every summary line builds
// its sides here.
std::string SideText(const std::string& label, const std::vector<const TrialSummary*>& trials);

// "sim_ref: Cmax = 4 — C=4 ttft p95 1.71/1.72/1.70 s pass, C=5 itl p95 52.0/55.1/51.0 ms fail"
// "sim_rate: Rmax = 1.25 rps — R=1.25 rps ttft p95 2.10/2.20/2.05 s pass, R=1.50 rps
//  queue_bounded client in-flight 14.2 > 5.9, 13.1 > 5.1, 15 > 6 fail"
std::string SummaryLine(const RowQualification& q);
// "baseline 1 trial 2.1 s, locate 4 probes 9.8 s, confirm 6 trials 15.2 s; 11 trials, 27.1 s"
std::string CostLine(const RowQualification& q);
// The sides of q's boundary (proven, or the operating point of a lowered one) from its
// confirmation trials: each gate's requests and misses summed over the side's trials.
std::vector<BoundarySide> BoundaryConfidence(const RowQualification& q);
// The predicted curve beside what the trials measured: each predicted level some trial with
// metrics ran at, its predicted gating value and the median of the trials' there.
std::vector<PredictionCheck> PredictionChecks(const RowQualification& q);
// "confidence, each side's trials together: C=6 ttft p95 vs 2500 ms: confidence 0.99 below
// (...); C=7 ...: confidence ... at or above (...)", the fail side naming only the gates that
// missed there, then what became of a required confidence ("required on the pass side 0.9: met:
// 0.954 over 3 trials at C=6"); "" when q has no boundary side.
std::string BoundaryConfidenceLine(const RowQualification& q,
                                   const std::vector<BoundarySide>& sides);

// The row with the new expectation: expect.cmax, or on a rate row expect.rmax_rps (the operating
// point's rate, a multiple of the step); provenance (qualified_on = `today`, source, notes with the
// margins of the deciding gates on both sides). REQUIRES: q.status is kProven or kLowered.
Row RowWithQualification(const Row& row, const RowQualification& q, const std::string& today,
                         const std::string& capacity_data_path);

// The row file's text with its `expect:` and `provenance:` blocks replaced by those of `updated`
// (as RowToYaml writes them); every other line, comments included, is kept. The result is loaded
// back (as if it were `row_path`) and must carry updated.expect.cmax or rmax_rps, or an error is
// returned.
Result<std::string> SpliceRowExpectation(const std::string& original_text, const Row& updated,
                                         const std::string& row_path);

// Runs each trial as its own process: `exe trial --row ROW --concurrency C --trial K --seed S
// --phase P --url URL --out DIR --no-progress` through posix_spawn (argv, no shell), its stdout and
// stderr going to DIR.log; then reads DIR. On cancel the child gets SIGINT and the trial ends as
// "interrupted". Trial directories: <out_dir>/<row id>/<phase>/c<C>-t<K>, on a rate row
// <phase>/r<rate>-t<K> (LoadScale::Slug: r1p25-t1).
struct ProcessTrialRunnerOptions {
  std::string exe;       // the capq executable (/proc/self/exe)
  std::string row_path;  // the row file the child loads
  std::string url;
  std::string out_dir;
  std::vector<std::string> extra_args;  // appended to every child's argv (e.g. --insecure)
  const std::atomic<bool>* cancel = nullptr;
  // A backstop against a trial process that never ends: after this many wall seconds it gets
  // SIGINT, 30 s later SIGKILL, and the trial counts as could not run. 0 = derived from the row:
  // 600 s of setup plus every warm-up and measured request at its full request timeout.
  double trial_deadline_s = 0;
};
TrialRunner MakeProcessTrialRunner(const ProcessTrialRunnerOptions& options);

}  // namespace capq

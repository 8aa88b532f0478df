// One trial, end to end: a row at one concurrency C with one seed, from a prepared server to a
// verdict with its raw proof on disk (seed, Parts III-IV; issue 4).
//
// RunTrial() prepares the server through its Target adapter (identity pinned, idle, cache flushed,
// readiness probed without generating, quiet period), sends the warm-up and measured lists, decodes
// the raw streams, validates every correctness gate, computes metrics, decides, and writes the
// trial directory (artifacts.h). It never throws and never returns without a directory: a trial
// that could not run still leaves verdict.json saying why.
//
// Thread safety: RunTrial() blocks its calling thread; separate calls share nothing. `on_progress`
// is called on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "capq/measurement/evidence_log.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/metrics.h"
#include "capq/measurement/stability.h"
#include "capq/measurement/validator.h"
#include "capq/model/qualify_phase.h"
#include "capq/model/row.h"
#include "capq/record/verdict.h"
#include "capq/status.h"

namespace capq {

inline constexpr int64_t kCompressEvidenceTokens = 100'000;

struct TrialOptions {
  std::string url;      // server base URL, e.g. "http://127.0.0.1:30000"
  std::string out_dir;  // the trial directory to create (atomically populated)
  LoadLevel level = 1;
  int trial_index = 1;  // 1-based; seed = row.trials.seeds[k-1] unless `seed` is set
  std::optional<uint64_t> seed;
  QualifyPhase phase = QualifyPhase::kConfirm;  // recorded in the plan and the verdict
  std::string api_key;                          // from CAPQ_API_KEY; never written anywhere
  bool insecure_tls = false;                    // recorded in the trial metadata when set
  bool skip_quiet_period = false;
  // Calibrate prompt lengths from the warm-ups' usage.prompt_tokens even when the server has a
  // tokenize endpoint (recorded as calibration "usage_prompt_tokens" in plan.json).
  bool ignore_tokenize_endpoint = false;
  double setup_timeout_s = 120;  // wall seconds from start for readiness, idle and flush together
  // The raw evidence: raw.jsonl.zst when compressed, else raw.jsonl. nullopt = compressed when the
  // plan streams at least kCompressEvidenceTokens output tokens (then it would pass ~25 MB).
  std::optional<EvidenceCompression> evidence_compression;
  std::string command_line;  // recorded (command.txt)
  const std::atomic<bool>* cancel = nullptr;
  std::function<void(const std::string&)> on_progress;  // one-line progress updates
  // The load's running counts ("measured C=6: 12/64 done, 6 in flight, 0 failed"), about four a
  // second: apart from on_progress, so that a log can keep the events without them.
  std::function<void(const std::string&)> on_load_progress;
  // Run every trial to its last request, even once its verdict is certain (early_decision.h):
  // for tables of the figures a failing load level reaches.
  bool full_trials = false;
  // The load generator's event loops (LoadSpec::loops): 1 by default, 0 = one per core.
  int loops = 1;
};

struct TrialReport {
  std::string dir;  // the trial directory (written even when the trial could not run)
  TrialVerdict verdict;
  std::optional<TrialMetrics> metrics;  // absent when nothing was measured
};

// Prepare the server (identity, idle, flush + retry while busy, readiness probe WITHOUT generation,
// quiet period), warm up, measure, decode, validate, decide, write the directory. Never throws.
TrialReport RunTrial(const Row& row, const TrialOptions& options);

// Pure: the verdict from metrics + correctness. Every SLO gate is strict ("below"; a value equal to
// the threshold fails, NaN fails); correctness is decided separately. A correctness failure wins
// over an SLO failure in `outcome`, but both flags and all reasons are kept. `stopped_at`: fail
// fast ended the load there, which is a correctness failure named first; latency over the
// requests that ran before it cannot pass. `decided`: the load stopped early once that gate could
// no longer pass; the gate fails at the least figure it could have ended at (at_least), and the
// decision is the first reason.
TrialVerdict Decide(const Row& row, const TrialMetrics& m, const CorrectnessReport& c,
                    const std::optional<StreamBreak>& stopped_at = std::nullopt,
                    const std::optional<StabilityVerdict>& stability = std::nullopt,
                    const std::optional<EarlyDecision>& decided = std::nullopt);

// capq validate: re-derive metrics and gates from raw records alone (raw.jsonl + plan.json +
// row.yaml); check SHA256SUMS. `complete` is false for a directory an interrupted or failed trial
// left behind; such a directory never yields a pass.
struct ValidateReport {
  bool checksums_ok = false;
  std::vector<std::string> problems;  // tampered files, missing files, disagreements, in words
  bool complete = false;
  TrialVerdict verdict;  // re-derived
};
Result<ValidateReport> ValidateTrialDir(const std::string& dir);

}  // namespace capq

// The row loader: rows/**/*.yaml -> Row, refusing every vague row (row-schema.md).
//
// Strictness, in short: unknown keys are errors at every level (a typo must not silently drop a
// gate); capacity-sensitive fields have no defaults; an SLO is a strict upper bound (`below_ms`);
// the measured sample must be large enough for the gated percentile; ids are unique across every
// file loaded together. Every error names file:line:column, the key path (`slo[0].below_ms`) and
// what was expected. No yaml-cpp exception leaves this module.
//
// Sample-size rule: a gate at percentile p (0 < p < 100) needs at least ceil(100 / (100 - p))
// measured requests, i.e. at least one request strictly in the tail above p (p95: 20, p99: 100,
// p99.9: 1000). It is checked against measured.min_requests, the smallest sample of any
// concurrency.
//
// SLO tiers (`slo_tiers`, closed-loop rows only): a non-empty list of {name, slo}, each a further
// contract judged on the same trials as the row's own `slo` (tier 0, "primary"). A tier's gates
// follow the rules of `slo` (the sample rule included); names match [a-z][a-z0-9_]*, are unique
// and are not "primary"; no two tiers (the primary included) have the same set of gates.
//
// Open-loop rows (arrival kind constant, poisson or gamma) name a rate resolution
// (arrival.rate_step_rps), a measured interval (exactly one of measured.duration_s and
// measured.requests, plus measured.ramp_s) and optionally their stability gates; closed-loop fields
// (measured.min_requests, per_concurrency, expect.cmax) are refused on them and open-loop fields on
// closed-loop rows. Their stability gates compare the first and last thirds of the interval, so the
// sample rule is per third: at the lowest rate (one step), each third must hold at least
// ceil(200 / (100 - p)) requests (two beyond the percentile: p95 40, so 120 in the interval). An
// open-loop claim, expect.rmax_rps, is a positive multiple of rate_step_rps.
//
// Defaults (filled by the loader; RowToYaml prints them): title = "", input/output_stddev_tokens =
// 0, prompt_corpus = synthetic, cache.verify_cold = true, warmup.concurrency = 1, percentile_method
// = linear, every correctness gate on (finish_reason = length), trials.quiet_period_s = 15,
// trials.seeds = DeriveTrialSeed(id, i), expect.baseline.tolerance_pct = 15, request_timeout_s =
// 21600, stability = {queue_growth_pct: 25, queue_slack: 2, latency_drift_factor: 1.5,
// max_send_lateness_ms: 2}. Everything else a row needs is required (ramp_s too: it may be 0),
// but for `confidence` (Row::confidence, in (0, 1)): a row without it requires none.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

// One refusal. line and column are 1-based; 0 when the error concerns the whole file (unreadable).
struct RowError {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key_path;  // "slo[0].below_ms"; empty for YAML syntax errors and file-level errors
  std::string message;   // what was expected (and what was found)

  // "rows/b70/x.yaml:14:5: slo[0].below_ms: expected a number > 0, got -1"
  std::string ToString() const;
};

// A further check of a parsed row by a layer that knows more than the schema: which limits the
// row's engine reports (targets/row_limits.h CheckServerExpect: the keys of identity.server_expect,
// their types, canonical values). It may rewrite the row; a refusal names the file and line.
using RowCheck = std::function<std::optional<RowError>(Row*)>;

// Loads one row file, then runs `check` (when given) on it. The error Status carries
// RowError::ToString() as its message.
Result<Row> LoadRow(const std::string& path, const RowCheck& check = {});

// Parses `text` as if it were the file `pseudo_path`: the path names the file in errors, gives the
// family (its parent folder's name) and anchors relative sim_profile paths (which must exist).
Result<Row> LoadRowFromString(const std::string& text, const std::string& pseudo_path,
                              const RowCheck& check = {});
// The same, with the structured error on failure (`error` may be null).
bool ParseRow(const std::string& text, const std::string& pseudo_path, Row* row, RowError* error);

// Every row file under `paths_or_dirs`: files are taken as given, directories are searched
// recursively for *.yaml (sorted, so results are deterministic), skipping folders named `profiles`
// (simulator profiles, not rows). A *.yml file found while searching is an error rather than a
// silent skip. Fails when a path does not exist.
Result<std::vector<std::string>> FindRowFiles(const std::vector<std::string>& paths_or_dirs);

// Loads every row under `paths_or_dirs`, failing on the first error (bad file, refused by `check`,
// or duplicate id).
Result<std::vector<Row>> LoadRows(const std::vector<std::string>& paths_or_dirs,
                                  const RowCheck& check = {});

// For `capq rows check`: every good row, and one error per bad file (the first found in it). A row
// whose id was already taken by an earlier file (in sorted order) is an error of the later file.
// No row file at all is an error too: an empty selection must not look like a pass.
struct RowSet {
  std::vector<Row> rows;
  std::vector<RowError> errors;
};
RowSet CheckRows(const std::vector<std::string>& paths_or_dirs, const RowCheck& check = {});

// The resolved row (defaults filled in) as YAML that LoadRowFromString accepts again with the same
// values. family and source_path are not keys of a row (they come from where the file lies).
std::string RowToYaml(const Row& row);

// The seed of trial `trial_index` (0-based) when a row gives none: a pure function of the row id
// and the index (FNV-1a), in [1, 2^31 - 1] so that every load generator accepts it.
uint64_t DeriveTrialSeed(const std::string& row_id, int trial_index);

// ceil(100 / (100 - percentile)): the smallest sample with at least one request above the
// percentile.
int MinRequestsForPercentile(double percentile);

// The measured requests of the C=1 baseline. It is the single-user check (the seed's baseline
// measured 10): it checks the server and calibrates the prediction, and no claim rests on it, so
// it measures the fewest the sample rule allows for every gate of every tier, at least
// kSeedBaselineRequests and at most the row's own sample at C=1. A C=1 confirmation, when C=1 is
// the boundary, measures the row's full sample; so does the baseline of a row with reuse, a mix or
// an open-loop schedule (its shares, reuse and thirds need it).
inline constexpr int kSeedBaselineRequests = 10;
int BaselineRequests(const Row& row);

// ceil(200 / (100 - percentile)): the smallest third of an open-loop interval with two requests
// above the percentile (p95: 40).
int MinRequestsPerThirdForPercentile(double percentile);

// The measured requests of an open-loop row at its lowest rate (one step): floor(duration_s *
// rate_step_rps) for a duration, else the declared count; 0 for a closed-loop row.
int64_t MeasuredRequestsAtOneStep(const Row& row);

}  // namespace capq

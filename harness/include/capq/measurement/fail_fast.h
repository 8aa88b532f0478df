// Fail fast: the first stream that can no longer pass a correctness gate ends the trial, so a
// broken server costs seconds, not every remaining request's timeout (docs/trial-and-artifacts.md).
//
// Which failure of a finished stream breaks which gate lives here, beside the decoder and the
// validator that judge the same streams after the trial; the load generator only asks (its
// on_complete_check hook and stall bound, loadgen.h). The same check re-derives the stop from the
// raw records in `capq validate`.
#pragma once

#include <optional>
#include <string>

#include "capq/measurement/decode.h"
#include "capq/measurement/loadgen.h"
#include "capq/model/row.h"

namespace capq {

struct StreamBreak {
  std::string gate;        // the gate the stream fails: "zero_errors", "no_cancellations", ...
  std::string request_id;  // "m12"
  bool warmup = false;
  std::string evidence;  // "error frame: ...", "stalled 61.2 s with no byte (the bound is 60 s)"
  // "stopped at the first broken stream: zero_errors on m12: event #3 at +41.0 ms: error frame:
  // ..."
  std::string Reason() const;
};

struct FailFastRules {
  bool enabled = false;             // the row's correctness.fail_fast
  double stall_timeout_wall_s = 0;  // correctness.stall_timeout_s / time_scale
  double time_scale = 1;            // evidence is given in the server's (virtual) seconds
  double stall_timeout_s = 0;       // the row's bound, for the evidence
  std::string served_model_name;    // "" = the model is not checked
  Correctness gates;                // which gates the row enables
};
// `served_model_name`: the name the trial sends (a sim row's comes from its profile).
FailFastRules FailFastRulesFor(const Row& row, const std::string& served_model_name);

// The gate `r` can no longer pass, if any: a finished record, or one the stall bound cut.
// Records the harness cut or never sent (cancelled_by_harness) break nothing; a stream an
// interrupt cut is never asked about (the run reports the interrupt). Decodes the record once:
// cheap enough for the load generator's completion hook, never per chunk.
std::optional<StreamBreak> FindStreamBreak(const RawRecord& r, const FailFastRules& rules);
// The same, with the stream already decoded (`r` then needs no events): what the load
// generator's recorder calls, having decoded each stream as it arrived.
std::optional<StreamBreak> FindStreamBreak(const RawRecord& r, const RequestResult& decoded,
                                           const FailFastRules& rules);

}  // namespace capq

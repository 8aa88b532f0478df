// RunTrial: prepare, measure, decode, validate, decide, write (issue 4; seed Parts III-IV). The
// phases run in the order RunTrialImpl lists them; each one's body is in the file of its concern:
// trial_prepare.cc (the server and the plan), trial_load.cc (warm-up and measured load),
// trial_readback.cc (the raw evidence read back and re-counted), trial_judge.cc (deciding) and
// trial_write.cc (the trial directory).
#include "capq/trial/trial.h"

#include <malloc.h>

#include "capq/clock.h"
#include "capq/model/row_loader.h"
#include "trial_internal.h"

namespace capq {
namespace internal {
namespace {

void StartTrial(Trial& t, const Row& row, const TrialOptions& opt) {
  t.s.row = &row;
  t.s.opt = &opt;
  t.effective = row;
  t.t0 = NowNs();
  t.scale = row.identity.time_scale > 0 ? row.identity.time_scale : 1.0;
  VerdictContext& c = t.s.ctx;
  c.row_id = row.id;
  c.level = opt.level;
  c.trial_index = opt.trial_index;
  c.phase = opt.phase;
  c.time_scale = t.scale;
  c.started_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
  c.insecure_tls = opt.insecure_tls;
  c.complete = false;
  if (opt.insecure_tls) t.s.identity["insecure_tls"] = true;
  t.topts.base_url = opt.url;
  t.topts.api_key = opt.api_key;
  t.topts.insecure_tls = opt.insecure_tls;
}

// prepare target -> plan -> quiet -> load -> judge -> seal.
TrialReport RunTrialImpl(const Row& row, const TrialOptions& opt) {
  Trial t;
  StartTrial(t, row, opt);
  for (PhaseEnd (*phase)(Trial&) : {PinIdentity, FlushAndProbe, PlanPrompts, QuietPeriod, Load}) {
    if (PhaseEnd end = phase(t)) return std::move(*end);
  }
  Decode(t);
  // The load's connections and its recorder's buffers are freed, most of them in the recorder
  // thread's arena, which the reading back on this thread does not reuse: give their pages back.
  malloc_trim(0);
  if (PhaseEnd end = ReadBackAndRecount(t)) return std::move(*end);
  Judge(t);
  if (PhaseEnd end = CheckCompleted(t)) return std::move(*end);
  t.s.ctx.complete = true;
  Progress(opt, std::string("verdict: ") + TrialOutcomeName(t.s.verdict.outcome));
  return Finish(t.s);
}

}  // namespace
}  // namespace internal

TrialReport RunTrial(const Row& row, const TrialOptions& options) {
  try {
    return internal::RunTrialImpl(row, options);
  } catch (const std::exception& e) {
    // Nothing may escape; a trial that hit a bug says so and is never green.
    TrialReport rep;
    rep.dir = options.out_dir;
    rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    rep.verdict.reasons.push_back(std::string("internal error: ") + e.what());
    return rep;
  }
}

}  // namespace capq

// SLO tiers: each further tier of a row located and confirmed on the trials of one qualification,
// every trial run once (capq/qualify/tiers.h).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "capq/qualify/tiers.h"

namespace capq {

namespace {

// The qualification stopped: nothing after this point is searched.
bool Stops(QualifyStatus s) {
  return s == QualifyStatus::kCorrectnessFail || s == QualifyStatus::kCouldNotRun ||
         s == QualifyStatus::kBaselineMismatch || s == QualifyStatus::kInterrupted;
}

// The row's own result as tier 0: every trial of the primary search was run for it.
TierQualification PrimaryTier(const Row& row, const RowQualification& q) {
  TierQualification t;
  t.name = kPrimaryTier;
  t.slo = row.slo;
  t.status = q.status;
  t.cmax = q.cmax;
  t.operating_point = q.operating_point;
  t.message = q.message;
  t.summary_line = q.summary_line;
  for (const auto& x : q.trials) {
    t.trials.push_back(TierTrial{x.phase, x.level, x.trial, x.outcome, false});
  }
  t.trials_run = static_cast<int>(q.trials.size());
  return t;
}

// A tier left unsearched because `by` stopped the qualification before it.
TierQualification NotSearched(const Row& row, const SloTier& tier, const TierQualification& by) {
  TierQualification t;
  t.name = tier.name;
  t.slo = tier.slo;
  t.status = by.status == QualifyStatus::kInterrupted ? QualifyStatus::kInterrupted
                                                      : QualifyStatus::kCouldNotRun;
  t.message = "not searched: tier " + by.name + " stopped the qualification (" +
              QualifyStatusName(by.status) + "): " + by.message;
  t.summary_line = row.id + " tier " + tier.name + ": " + t.message;
  return t;
}

// One further tier's search: Qualify() on the row judged by the tier's gates, through a runner
// that reuses every trial already run and runs (and keeps) only the new ones.
class TierRun {
 public:
  TierRun(const Row& row, const SloTier& tier, const TrialRunner& runner,
          const QualifyOptions& options, MonoNs t0, RowQualification* q)
      : row_(row), tier_(tier), runner_(runner), options_(options), t0_(t0), q_(q) {
    out_.name = tier.name;
    out_.slo = tier.slo;
  }

  TierQualification Go() {
    QualifyOptions o = options_;
    o.predicted_cmax.reset();
    o.prediction_note.clear();
    o.prediction_source.clear();
    o.predicted_curve.clear();
    o.predict_from_baseline = nullptr;  // the known points place this tier's probes
    o.refine_prediction = nullptr;
    o.known_points = KnownPoints();
    const size_t first_new = q_->tier_trials.size();
    TrialRunner judge = [this](const Row&, const TrialRequest& r) { return Judge(r); };
    RowQualification r = Qualify(TierRow(), judge, o);
    KeepMoves(r, first_new);
    out_.status = r.status;
    out_.cmax = r.cmax;
    out_.operating_point = r.operating_point;
    out_.message = r.message;
    out_.summary_line = r.summary_line;
    return std::move(out_);
  }

 private:
  // The row as this tier's search sees it: the tier's gates are its SLO. The id names the tier in
  // every progress and summary line; seeds are still the row's (RunNew).
  Row TierRow() const {
    Row r = row_;
    r.id = row_.id + " tier " + tier_.name;
    r.slo = tier_.slo;
    r.slo_tiers.clear();
    r.expect.cmax.reset();
    r.expect.rmax_rps.reset();
    return r;
  }

  // Every trial already run, as this tier judges it (the baseline excepted: the search reads it
  // itself).
  std::vector<ProbePoint> KnownPoints() {
    std::vector<ProbePoint> out;
    for (const auto* list : {&q_->trials, &q_->tier_trials}) {
      for (const auto& t : *list) {
        if (t.phase == QualifyPhase::kBaseline) continue;
        const TrialSummary v = TierView(t, tier_.slo);
        if (!IsSloVerdict(v.outcome)) continue;
        out.push_back(ProbePoint{t.level, v.passed() ? ProbeVerdict::kPass : ProbeVerdict::kSloFail,
                                 v.GateRatio(), ""});
        Use(t, true);
      }
    }
    return out;
  }

  TrialSummary Judge(const TrialRequest& r) {
    if (const TrialSummary* done = q_->FindTrial(r.phase, r.level, r.trial)) {
      Say("reusing " + std::string(PhaseName(r.phase)) + " " + LoadLabel(row_, r.level) +
          " trial " + std::to_string(r.trial) + " (already run, seed " +
          std::to_string(done->seed) + ")");
      Use(*done, true);
      return TierView(*done, tier_.slo);
    }
    TrialSummary fresh = RunNew(r);
    Use(fresh, false);
    TrialSummary view = TierView(fresh, tier_.slo);
    q_->tier_trials.push_back(std::move(fresh));
    return view;
  }

  // Runs the trial with the row's own seed and fills what the primary search fills for its trials.
  TrialSummary RunNew(const TrialRequest& r) {
    TrialRequest real = r;
    real.seed = TrialSeed(row_, r.phase, r.level, r.trial, options_.corpus_salt);
    const MonoNs start = NowNs();
    TrialSummary t = runner_(row_, real);
    t.phase = r.phase;
    t.level = r.level;
    t.rate_rps = RateAtLevel(row_, r.level);
    t.trial = r.trial;
    t.seed = real.seed;
    t.start_offset_s = NsToS(start - t0_);
    t.wall_s = NsToS(NowNs() - start);
    return t;
  }

  // Records a trial this tier judged, once.
  void Use(const TrialSummary& t, bool reused) {
    for (const auto& x : out_.trials) {
      if (x.phase == t.phase && x.level == t.level && x.trial == t.trial) return;
    }
    out_.trials.push_back(TierTrial{t.phase, t.level, t.trial, TierOutcome(t, tier_.slo), reused});
    (reused ? out_.trials_reused : out_.trials_run) += 1;
  }

  // Why the locator chose each new probe, as the tier's search recorded it.
  void KeepMoves(const RowQualification& r, size_t first_new) {
    for (size_t i = first_new; i < q_->tier_trials.size(); ++i) {
      TrialSummary& t = q_->tier_trials[i];
      for (const auto* seen : r.Trials(t.phase, t.level)) {
        if (seen->trial == t.trial) t.move = seen->move;
      }
    }
  }

  void Say(const std::string& line) const {
    if (options_.progress) options_.progress(row_.id + " tier " + tier_.name + ": " + line);
  }

  const Row& row_;
  const SloTier& tier_;
  const TrialRunner& runner_;
  const QualifyOptions& options_;
  MonoNs t0_;
  RowQualification* q_;
  TierQualification out_;
};

}  // namespace

void QualifyTiers(const Row& row, const TrialRunner& runner, const QualifyOptions& options,
                  MonoNs t0, RowQualification* q) {
  q->tiers = {PrimaryTier(row, *q)};
  std::optional<TierQualification> stopped;
  if (Stops(q->status)) stopped = q->tiers.front();
  for (const SloTier& tier : row.slo_tiers) {
    if (stopped) {
      q->tiers.push_back(NotSearched(row, tier, *stopped));
      continue;
    }
    q->tiers.push_back(TierRun(row, tier, runner, options, t0, q).Go());
    if (Stops(q->tiers.back().status)) stopped = q->tiers.back();
  }
}

std::string TierLine(const TierQualification& t) {
  return t.summary_line + " (" + std::to_string(t.trials_run) +
         (t.trials_run == 1 ? " trial run, " : " trials run, ") + std::to_string(t.trials_reused) +
         " reused)";
}

}  // namespace capq

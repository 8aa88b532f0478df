#include "capq/record/capacity_data.h"

#include <algorithm>
#include <cmath>

#include "capq/model/reuse.h"

namespace capq {

RowInfo RowInfoFromRow(const Row& row) {
  RowInfo r;
  r.id = row.id;
  r.title = row.title;
  r.family = row.family;
  r.source_path = row.source_path;
  r.engine = EngineName(row.identity.engine);
  r.image = row.identity.image;
  r.model = row.identity.model;
  r.model_revision = row.identity.model_revision;
  r.served_model_name = row.identity.served_model_name;
  r.hardware = row.identity.hardware;
  r.driver = row.identity.driver;
  r.sim_profile = row.identity.sim_profile;
  r.time_scale = row.identity.time_scale;
  r.input_tokens = row.workload.input_tokens;
  r.output_tokens = row.workload.output_tokens;
  r.slo = row.slo;
  r.percentile_method = PercentileMethodName(row.percentile_method);
  r.warmup_requests = row.warmup.requests;
  r.warmup_concurrency = row.warmup.concurrency;
  r.min_requests = row.measured.min_requests;
  r.per_concurrency = row.measured.per_concurrency;
  r.trials_count = row.trials.count;
  r.quiet_period_s = row.trials.quiet_period_s;
  r.expected_cmax = row.expect.cmax;
  r.confidence = row.confidence;
  r.arrival = row.workload.arrival_kind;
  if (row.open_loop()) {
    const OpenLoop& o = row.workload.open_loop;
    r.rate_step_rps = o.rate_step_rps;
    r.measured_duration_s = o.duration_s;
    r.measured_requests = o.requests;
    r.ramp_s = o.ramp_s;
    r.expected_rmax_rps = row.expect.rmax_rps;
  }
  if (row.mix) {
    r.mix = row.mix->classes;
    r.trace_file = row.mix->traffic.substr(row.mix->traffic.find_last_of('/') + 1);
    std::vector<std::pair<int, TracePoint>> lines;
    for (const MixClass& c : row.mix->classes) {
      for (const TrafficSample& s : c.samples) {
        lines.push_back(
            {s.line, {s.input_tokens, s.output_tokens, s.arrival_offset_s.value_or(NAN)}});
      }
    }
    std::sort(lines.begin(), lines.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& l : lines) r.trace.push_back(l.second);
  }
  if (row.sessions && row.sessions->blocks) {  // every turn, in file order, as fitted
    const std::string& t = row.sessions->trajectory;
    r.trace_file = t.substr(t.find_last_of('/') + 1);
    for (const auto& path : row.sessions->paths) {
      for (const TurnShape& turn : path) {
        r.trace.push_back({turn.input_tokens, turn.output_tokens, NAN});
      }
    }
  }
  for (MixClass& c : r.mix) c.samples.clear();
  r.reuse = ReuseInWords(row);
  return r;
}

const char* QualifyStatusName(QualifyStatus s) {
  switch (s) {
    case QualifyStatus::kProven:
      return "proven";
    case QualifyStatus::kLowered:
      return "lowered";
    case QualifyStatus::kNoFailUpToCap:
      return "no_fail_up_to_cap";
    case QualifyStatus::kFailsAtOne:
      return "fails_at_one";
    case QualifyStatus::kCorrectnessFail:
      return "correctness_fail";
    case QualifyStatus::kCouldNotRun:
      return "could_not_run";
    case QualifyStatus::kBaselineMismatch:
      return "baseline_mismatch";
    case QualifyStatus::kInterrupted:
      return "interrupted";
  }
  return "unknown";
}

Result<QualifyStatus> ParseQualifyStatus(const std::string& name) {
  for (QualifyStatus s :
       {QualifyStatus::kProven, QualifyStatus::kLowered, QualifyStatus::kNoFailUpToCap,
        QualifyStatus::kFailsAtOne, QualifyStatus::kCorrectnessFail, QualifyStatus::kCouldNotRun,
        QualifyStatus::kBaselineMismatch, QualifyStatus::kInterrupted}) {
    if (name == QualifyStatusName(s)) return s;
  }
  return Status::InvalidArgument("unknown qualification status '" + name + "'");
}

int QualifyExitCode(QualifyStatus s) {
  switch (s) {
    case QualifyStatus::kProven:
      return 0;
    case QualifyStatus::kLowered:
    case QualifyStatus::kNoFailUpToCap:
    case QualifyStatus::kFailsAtOne:
      return 1;
    case QualifyStatus::kCorrectnessFail:
      return 2;
    case QualifyStatus::kCouldNotRun:
    case QualifyStatus::kBaselineMismatch:
      return 3;
    case QualifyStatus::kInterrupted:
      return 130;
  }
  return 3;
}

std::optional<int> RowQualification::proven_level() const {
  if (cmax) return cmax;
  if (rmax_rps && row.rate_step_rps > 0) {
    return static_cast<int>(std::llround(*rmax_rps / row.rate_step_rps));
  }
  return std::nullopt;
}

std::vector<const TrialSummary*> RowQualification::Trials(QualifyPhase phase,
                                                          LoadLevel level) const {
  std::vector<const TrialSummary*> out;
  for (const auto& t : trials) {
    if (t.phase == phase && t.level == level) out.push_back(&t);
  }
  return out;
}

std::optional<int> TierQualification::admitted() const {
  if (status == QualifyStatus::kProven) return cmax;
  if (status == QualifyStatus::kLowered) return operating_point;
  return std::nullopt;
}

std::vector<const TierTrial*> TierQualification::DecidedBy() const {
  std::vector<const TierTrial*> out;
  const std::optional<int> level = admitted();
  for (const auto& t : trials) {
    if (level && t.phase == QualifyPhase::kConfirm &&
        (t.level == *level || t.level == *level + 1)) {
      out.push_back(&t);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const TierTrial* a, const TierTrial* b) {
    return a->level != b->level ? a->level < b->level : a->trial < b->trial;
  });
  return out;
}

const TrialSummary* RowQualification::FindTrial(QualifyPhase phase, LoadLevel level,
                                                int trial) const {
  for (const auto* list : {&trials, &tier_trials}) {
    for (const auto& t : *list) {
      if (t.phase == phase && t.level == level && t.trial == trial) return &t;
    }
  }
  return nullptr;
}

}  // namespace capq

// The trial directory written: whatever the trial has, with the raw evidence sealed and listed;
// a trial that could not run still leaves its verdict and why.
#include <string>
#include <vector>

#include "capq/measurement/decode.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/record/artifacts.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

void AppendJsonLine(const nlohmann::json& line, std::string* out) {
  *out += line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  *out += '\n';
}

std::string Jsonl(const std::vector<nlohmann::json>& lines) {
  std::string out;
  for (const auto& l : lines) AppendJsonLine(l, &out);
  return out;
}

// What `capq validate` needs to re-derive a fail-fast stop from the records: the rules the load
// ran under and the request that stopped it.
nlohmann::json FailFastHeader(const TrialState& s) {
  const FailFastRules& f = s.fail_fast;
  nlohmann::json j = {{"enabled", f.enabled},
                      {"stall_timeout_s", f.stall_timeout_s},
                      {"stall_timeout_wall_s", f.stall_timeout_wall_s},
                      {"served_model_name", f.served_model_name},
                      {"stopped_by", nullptr}};
  if (!s.load->stopped_by.empty()) {
    j["stopped_by"] = s.load->stopped_by;
    j["stop_reason"] = s.load->stop_reason;
  }
  return j;
}

// The raw evidence's last line: the load's times and what fail fast did.
// A load over more than one event loop keeps each loop's figures (loadgen.h) there too.
nlohmann::json RawEnd(const TrialState& s) {
  nlohmann::json j = {
      {"end",
       {{"anchor_mono_ns", s.load->anchor.mono_ns},
        {"anchor_unix_ns", s.load->anchor.unix_ns},
        {"start_ns", s.load->start_ns},
        {"measured_start_ns", s.load->measured_start_ns},
        {"end_ns", s.load->end_ns},
        {"interrupted", s.load->interrupted},
        {"recorder_wait_ns", s.load->recorder_wait_ns},
        {"fail_fast", FailFastHeader(s)},
        {"early_decision", EarlyDecisionHeader(s.early_decision, s.load->decided)}}}};
  if (s.load->loops.size() > 1) j["end"]["loops"] = LoopFiguresToJson(s.load->loops);
  return j;
}

// Ends the raw evidence (its last line, then fsync) and lists it in SHA256SUMS.
Status SealEvidence(TrialState& s) {
  if (!s.evidence) return Status::Ok();
  if (s.load) s.evidence->Append(RawEnd(s).dump());
  Status closed = s.evidence->Close();
  const std::string path = s.evidence->path();
  s.evidence.reset();
  CAPQ_RETURN_IF_ERROR(closed);
  return s.dir->Adopt(path.substr(path.find_last_of('/') + 1));
}

// Writes whatever the trial has: a trial that could not run still leaves its verdict and why.
Status WriteDirectory(TrialState& s, const std::string& dir) {
  if (!s.dir) {
    Result<TrialDirWriter> created = TrialDirWriter::Create(dir);
    if (!created.ok()) return created.status();
    s.dir = std::move(*created);
  }
  TrialDirWriter* w = &*s.dir;
  CAPQ_RETURN_IF_ERROR(SealEvidence(s));
  CAPQ_RETURN_IF_ERROR(w->Write("row.yaml", RowToYaml(*s.row)));
  CAPQ_RETURN_IF_ERROR(w->Write("command.txt", s.opt->command_line + "\n"));
  if (s.plan && !s.plan_written) CAPQ_RETURN_IF_ERROR(WritePlan(s));
  if (s.load) {
    // A line at a time: thousands of results held as JSON objects weigh four times their text.
    std::string res;
    for (const auto* phase : {&s.warm, &s.meas}) {
      for (const auto& r : *phase) AppendJsonLine(RequestResultToJson(r), &res);
    }
    CAPQ_RETURN_IF_ERROR(w->Write("results.jsonl", res));
  }
  if (s.metrics) {
    nlohmann::json m = MetricsToJson(*s.metrics);
    m["schema"] = kMetricsSchema;
    for (auto& [k, v] : s.metrics_extra.items()) m[k] = v;
    CAPQ_RETURN_IF_ERROR(w->Write("metrics.json", m.dump(1) + "\n"));
  }
  CAPQ_RETURN_IF_ERROR(w->Write("server_info.json", s.server_info.dump(1) + "\n"));
  if (!s.server_metrics.empty()) {
    CAPQ_RETURN_IF_ERROR(w->Write("server_metrics.jsonl", Jsonl(s.server_metrics)));
  }
  CAPQ_RETURN_IF_ERROR(w->Write("identity.json", s.identity.dump(1) + "\n"));
  if (!s.recount.is_null()) {
    CAPQ_RETURN_IF_ERROR(w->Write("recount.json", s.recount.dump(1) + "\n"));
  }
  CAPQ_RETURN_IF_ERROR(w->Write("verdict.json", VerdictToJson(s.verdict, s.ctx).dump(1) + "\n"));
  return w->Commit();
}

}  // namespace

Status WritePlan(TrialState& s) {
  CAPQ_RETURN_IF_ERROR(s.dir->Write("plan.json", PlanToJson(*s.plan).dump(1) + "\n"));
  s.plan_written = true;
  return Status::Ok();
}

TrialReport Finish(TrialState& s) {
  TrialReport rep;
  rep.verdict = s.verdict;
  rep.metrics = s.metrics;
  Status st = WriteDirectory(s, s.opt->out_dir);
  rep.dir = s.opt->out_dir;
  if (!st.ok()) {
    // The evidence could not be kept: a trial without its proof is not a result.
    rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    rep.verdict.reasons.push_back("the trial directory could not be written: " + st.message());
  }
  return rep;
}

TrialReport CouldNotRun(TrialState& s, const std::string& why, bool interrupted) {
  s.verdict.outcome = interrupted ? TrialOutcome::kInterrupted : TrialOutcome::kCouldNotRun;
  s.verdict.latency_pass = false;
  s.verdict.correctness_pass = false;
  s.verdict.reasons.push_back(why);
  s.ctx.complete = false;
  Progress(*s.opt, (interrupted ? "interrupted: " : "could not run: ") + why);
  return Finish(s);
}

}  // namespace capq::internal

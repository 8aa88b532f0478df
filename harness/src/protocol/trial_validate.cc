// capq validate: the verdict again, from the raw records alone (and the plan and row they came
// with).
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "capq/measurement/decode.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/loadgen.h"
#include "capq/model/row_loader.h"
#include "capq/protocol/artifacts.h"
#include "capq/protocol/trial.h"
#include "trial_internal.h"

namespace capq {
namespace {

bool Close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

Result<nlohmann::json> ReadJson(const std::string& path) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  try {
    return nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(path + ": not JSON (" + e.what() + ")");
  }
}

// A fail-fast stop, re-derived: the record the header names must itself break a gate under the
// row's rules, else the stop does not hold and that is a problem of the evidence.
std::optional<StreamBreak> DeriveStop(const Row& row, const nlohmann::json& fail_fast,
                                      const std::optional<RawRecord>& stopper,
                                      std::vector<std::string>* problems) {
  const nlohmann::json by = fail_fast.value("stopped_by", nlohmann::json());
  if (!by.is_string()) return std::nullopt;
  const std::string id = by.get<std::string>();
  std::string served = fail_fast.value("served_model_name", row.identity.served_model_name);
  std::optional<StreamBreak> b;
  if (stopper) b = FindStreamBreak(*stopper, FailFastRulesFor(row, served));
  if (!b) {
    problems->push_back("raw.jsonl says fail fast stopped at " + id + ", but " +
                        (stopper ? "its record breaks no gate" : "it has no record of that id"));
    b = StreamBreak{"fail_fast", id, false, fail_fast.value("stop_reason", "unproven")};
  }
  return b;
}

}  // namespace

Result<ValidateReport> ValidateTrialDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound(dir + ": not a directory");
  ValidateReport rep;
  ChecksumReport sums = VerifyChecksums(dir);
  rep.checksums_ok = sums.ok;
  rep.problems = sums.problems;

  Result<nlohmann::json> vj = ReadJson(dir + "/verdict.json");
  if (!vj.ok()) {
    rep.problems.push_back("verdict.json: " + vj.status().message());
    rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    rep.verdict.reasons.push_back("incomplete: no verdict.json");
    return rep;
  }
  Result<StoredVerdict> stored = VerdictFromJson(*vj);
  if (!stored.ok()) {
    rep.problems.push_back(stored.status().message());
    rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    rep.verdict.reasons.push_back("incomplete: unreadable verdict.json");
    return rep;
  }
  rep.complete = stored->context.complete && sums.ok;

  const bool has_raw = fs::exists(dir + "/raw.jsonl", ec);
  if (!has_raw) {
    // Setup failed before any load: nothing to re-derive; the recorded reasons stand.
    rep.verdict = stored->verdict;
    if (rep.complete) rep.problems.push_back("raw.jsonl: missing although the trial is complete");
    rep.complete = false;
    if (rep.verdict.outcome == TrialOutcome::kPass)
      rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    return rep;
  }

  Result<Row> row = LoadRow(dir + "/row.yaml");
  if (!row.ok()) return row.status().WithContext("row.yaml");
  Result<nlohmann::json> pj = ReadJson(dir + "/plan.json");
  if (!pj.ok()) return pj.status();
  Result<TrialPlan> plan = PlanFromJson(*pj);
  if (!plan.ok()) return plan.status();

  Result<std::string> raw = ReadWholeFile(dir + "/raw.jsonl");
  if (!raw.ok()) return raw.status();
  std::vector<RequestResult> warm, meas;
  nlohmann::json fail_fast = nlohmann::json::object();  // the header's rules and stop
  std::optional<RawRecord> stopper;                     // the record the stop names
  std::istringstream lines(*raw);
  std::string line;
  int lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      return Status::InvalidArgument("raw.jsonl:" + std::to_string(lineno) + ": " + e.what());
    }
    if (j.contains("schema")) {  // the header line
      if (j.contains("fail_fast") && j["fail_fast"].is_object()) fail_fast = j["fail_fast"];
      continue;
    }
    Result<RawRecord> rec = RawRecordFromJson(j);
    if (!rec.ok()) return rec.status().WithContext("raw.jsonl:" + std::to_string(lineno));
    const nlohmann::json stopped_by = fail_fast.value("stopped_by", nlohmann::json());
    if (stopped_by.is_string() && stopped_by.get<std::string>() == rec->id) stopper = *rec;
    RequestResult r = DecodeRecord(*rec);
    (r.phase == Phase::kWarmup ? warm : meas).push_back(std::move(r));
  }

  nlohmann::json identity = nlohmann::json::object(), recount;
  if (Result<nlohmann::json> ij = ReadJson(dir + "/identity.json"); ij.ok()) identity = *ij;
  if (fs::exists(dir + "/recount.json", ec)) {
    Result<nlohmann::json> rj = ReadJson(dir + "/recount.json");
    if (!rj.ok()) return rj.status();
    recount = *rj;
  }
  internal::Evidence evidence = internal::EvidenceFromJson(identity, recount);
  internal::ColdPrefix cold =
      internal::EstimateColdPrefix(*plan, warm, meas, evidence.template_prefix_tokens);
  ValidationInput vin = internal::MakeValidationInput(*row, *plan, warm, meas, cold, evidence);
  CorrectnessReport correctness = Validate(vin);
  TrialMetrics metrics =
      ComputeMetrics(meas, plan->concurrency, row->identity.time_scale, row->percentile_method);
  std::optional<StreamBreak> stop = DeriveStop(*row, fail_fast, stopper, &rep.problems);
  TrialVerdict derived = Decide(*row, metrics, correctness, stop);

  const TrialVerdict& was = stored->verdict;
  for (size_t i = 0; i < derived.slo.size() && i < was.slo.size(); ++i) {
    if (!Close(derived.slo[i].measured_ms, was.slo[i].measured_ms)) {
      std::ostringstream o;
      o << "verdict.json records " << SloMetricName(was.slo[i].gate.metric) << " p"
        << was.slo[i].gate.percentile << " = " << was.slo[i].measured_ms
        << " ms, the raw records give " << derived.slo[i].measured_ms << " ms";
      rep.problems.push_back(o.str());
    }
  }
  const auto stop_words = [](const std::optional<StreamBreak>& b) {
    return b ? b->gate + " on " + b->request_id : std::string("no fail-fast stop");
  };
  if (stop_words(derived.stopped_at) != stop_words(was.stopped_at)) {
    rep.problems.push_back("verdict.json records " + stop_words(was.stopped_at) +
                           ", the raw records give " + stop_words(derived.stopped_at));
  }
  if (derived.slo.size() != was.slo.size()) {
    rep.problems.push_back("verdict.json has " + std::to_string(was.slo.size()) +
                           " SLO gates, the row has " + std::to_string(derived.slo.size()));
  }
  if (stored->context.complete && derived.outcome != was.outcome &&
      was.outcome != TrialOutcome::kCouldNotRun) {
    rep.problems.push_back(std::string("verdict.json says ") + TrialOutcomeName(was.outcome) +
                           ", the raw records give " + TrialOutcomeName(derived.outcome));
  }
  rep.verdict = derived;
  if (was.outcome == TrialOutcome::kCouldNotRun || was.outcome == TrialOutcome::kInterrupted) {
    // A lost server or a signal is not visible in the records' gates alone: the recorded
    // outcome stands, with its reasons first.
    rep.verdict.outcome = was.outcome;
    rep.verdict.reasons = was.reasons;
  }
  if (!rep.complete) {
    rep.verdict.reasons.insert(
        rep.verdict.reasons.begin(),
        sums.ok ? "incomplete: the trial did not finish" : "incomplete: the checksums do not hold");
    if (rep.verdict.outcome == TrialOutcome::kPass) {
      rep.verdict.outcome = stored->context.complete ? TrialOutcome::kCouldNotRun : was.outcome;
      if (rep.verdict.outcome == TrialOutcome::kPass)
        rep.verdict.outcome = TrialOutcome::kCouldNotRun;
    }
  }
  return rep;
}

}  // namespace capq

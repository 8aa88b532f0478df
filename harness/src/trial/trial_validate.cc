// capq validate: the verdict again, from the raw records alone (and the plan and row they came
// with).
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include "capq/measurement/decode.h"
#include "capq/measurement/fail_fast.h"
#include "capq/measurement/loadgen.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/model/row_loader.h"
#include "capq/record/artifacts.h"
#include "capq/targets/row_limits.h"
#include "capq/text.h"
#include "capq/trial/class_gates.h"
#include "capq/trial/trial.h"
#include "trial_internal.h"

namespace capq {
namespace {

bool Close(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::fabs(a - b) <= 1e-6 * std::max(1.0, std::max(std::fabs(a), std::fabs(b)));
}

// Each recorded gate against the one the raw records give; `what` names the list ("SLO gates",
// "tier gates").
void CompareGates(const std::vector<SloGateResult>& derived, const std::vector<SloGateResult>& was,
                  const std::string& what, std::vector<std::string>* problems) {
  for (size_t i = 0; i < derived.size() && i < was.size(); ++i) {
    if (!Close(derived[i].measured_ms, was[i].measured_ms)) {
      std::ostringstream o;
      o << "verdict.json records " << SloMetricName(was[i].gate.metric) << " p"
        << was[i].gate.percentile << " = " << was[i].measured_ms << " ms, the raw records give "
        << derived[i].measured_ms << " ms";
      problems->push_back(o.str());
    }
  }
  if (derived.size() != was.size()) {
    problems->push_back("verdict.json has " + std::to_string(was.size()) + " " + what +
                        ", the row has " + std::to_string(derived.size()));
  }
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

// server_metrics.jsonl's lines, or none when the trial kept no samples; a line that is not JSON
// is a problem of the directory, named with its line number.
std::vector<nlohmann::json> ReadServerMetrics(const std::string& dir,
                                              std::vector<std::string>* problems) {
  std::vector<nlohmann::json> lines;
  std::error_code ec;
  const std::string path = dir + "/server_metrics.jsonl";
  if (!std::filesystem::exists(path, ec)) return lines;
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    problems->push_back(text.status().message());
    return lines;
  }
  std::istringstream in(*text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      lines.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      problems->push_back(path + ":" + std::to_string(n) + ": not JSON (" + e.what() + ")");
    }
  }
  return lines;
}

// The raw evidence file of a trial directory: raw.jsonl.zst or raw.jsonl; "" = neither.
std::string RawEvidenceName(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"raw.jsonl.zst", "raw.jsonl"}) {
    if (std::filesystem::exists(dir + "/" + name, ec)) return name;
  }
  return "";
}

// What re-deriving a fail-fast stop needs of a record, kept for every record because the stop is
// named in the evidence's last line, after all of them were read: no text (the caller drops it),
// no chunk gaps, the first 512 bytes of an error body (the evidence quotes fewer).
struct SlimRecord {
  RawRecord meta;
  RequestResult decoded;
};
SlimRecord Slim(const RawRecord& r, const RequestResult& d) {
  SlimRecord b{r, d};
  b.meta.body.resize(std::min<size_t>(b.meta.body.size(), 512));
  b.decoded.text_gaps_ms.clear();
  return b;
}

// A fail-fast stop, re-derived: the record the header names must itself break a gate under the
// row's rules, else the stop does not hold and that is a problem of the evidence.
std::optional<StreamBreak> DeriveStop(const Row& row, const nlohmann::json& fail_fast,
                                      const std::vector<SlimRecord>& records,
                                      std::vector<std::string>* problems) {
  const nlohmann::json by = fail_fast.value("stopped_by", nlohmann::json());
  if (!by.is_string()) return std::nullopt;
  const std::string id = by.get<std::string>();
  std::string served = fail_fast.value("served_model_name", row.identity.served_model_name);
  std::optional<StreamBreak> b;
  const FailFastRules rules = FailFastRulesFor(row, served);
  bool found = false;
  for (const SlimRecord& r : records) {
    if (r.meta.id != id) continue;
    found = true;
    b = FindStreamBreak(r.meta, r.decoded, rules);
  }
  if (!b) {
    problems->push_back("the raw evidence says fail fast stopped at " + id + ", but " +
                        (found ? "its record breaks no gate" : "it has no record of that id"));
    b = StreamBreak{"fail_fast", id, false, fail_fast.value("stop_reason", "unproven")};
  }
  return b;
}

// The per-class values verdict.json records against those the raw records give.
void CompareClasses(const std::vector<ClassVerdict>& derived, const std::vector<ClassVerdict>& was,
                    std::vector<std::string>* problems) {
  if (derived.size() != was.size()) {
    problems->push_back("verdict.json has " + std::to_string(was.size()) +
                        " traffic classes, the row and plan give " +
                        std::to_string(derived.size()));
    return;
  }
  for (size_t k = 0; k < derived.size(); ++k) {
    const ClassVerdict &d = derived[k], &w = was[k];
    bool same = d.name == w.name && d.requests == w.requests && d.passed() == w.passed() &&
                d.gate_ms.size() == w.gate_ms.size();
    for (size_t i = 0; same && i < d.gate_ms.size(); ++i) same = Close(d.gate_ms[i], w.gate_ms[i]);
    if (!same) {
      problems->push_back("verdict.json records class " + w.name +
                          " otherwise than the raw records give for class " + d.name);
    }
  }
}

// A directory without a verdict: a trial killed before it sealed (its staging folder) or a
// damaged one. Never a pass; the reasons say how many requests its raw evidence kept whole.
ValidateReport Unfinished(const std::string& dir, const std::string& why, ValidateReport rep) {
  rep.problems.push_back("verdict.json: " + why);
  rep.complete = false;
  rep.verdict.outcome = TrialOutcome::kCouldNotRun;
  rep.verdict.reasons.push_back("incomplete: no verdict.json (the trial did not finish)");
  const std::string raw_name = RawEvidenceName(dir);
  if (raw_name.empty()) return rep;
  int64_t measured = 0, ok = 0;
  Result<RawEvidenceSummary> raw =
      ReadRawEvidence(dir + "/" + raw_name, [&](RawRecord&& meta, RequestResult&& d) {
        if (meta.phase != Phase::kMeasured) return;
        ++measured;
        ok += (d.errors.empty() && !d.cancelled) ? 1 : 0;
      });
  if (!raw.ok()) {
    rep.problems.push_back(raw.status().message());
    return rep;
  }
  if (!raw->cut.empty()) rep.problems.push_back(raw->cut);
  rep.verdict.reasons.push_back(raw_name + " keeps " + std::to_string(raw->records) +
                                " ended requests whole (" + std::to_string(measured) +
                                " measured, " + std::to_string(ok) + " of them complete); " +
                                std::to_string(raw->unfinished) + " were still in flight");
  return rep;
}

// verdict.json that does not read as a verdict: the directory can say nothing.
ValidateReport Unreadable(const Status& why, ValidateReport rep) {
  rep.problems.push_back(why.message());
  rep.verdict.outcome = TrialOutcome::kCouldNotRun;
  rep.verdict.reasons.push_back("incomplete: unreadable verdict.json");
  return rep;
}

// Setup failed before any load: nothing to re-derive; the recorded reasons stand.
ValidateReport WithoutEvidence(const StoredVerdict& stored, ValidateReport rep) {
  rep.verdict = stored.verdict;
  if (rep.complete) rep.problems.push_back("raw.jsonl: missing although the trial is complete");
  rep.complete = false;
  if (rep.verdict.outcome == TrialOutcome::kPass) rep.verdict.outcome = TrialOutcome::kCouldNotRun;
  return rep;
}

// The raw evidence read back: the streams by phase, every record slim for the fail-fast stop, and
// the fail-fast header of its end line. A cut file or a missing end line is a problem of the
// directory and leaves it incomplete.
struct RawRead {
  std::vector<RequestResult> warm, meas;
  std::vector<SlimRecord> records;  // every record, slim, for the fail-fast stop
  nlohmann::json fail_fast;
  nlohmann::json early_decision;  // the end line's record of it (null: a load without the rule)
  MonoNs measured_start_ns = 0;
};
Result<RawRead> ReadRecords(const std::string& dir, const std::string& raw_name,
                            ValidateReport* rep) {
  RawRead b;
  Result<RawEvidenceSummary> raw =
      ReadRawEvidence(dir + "/" + raw_name, [&](RawRecord&& meta, RequestResult&& d) {
        d.output_text.clear();  // re-counted during the trial: recount.json has the counts
        d.output_text.shrink_to_fit();
        std::string().swap(d.content_text);
        b.records.push_back(Slim(meta, d));
        (d.phase == Phase::kWarmup ? b.warm : b.meas).push_back(std::move(d));
      });
  if (!raw.ok()) return raw.status();
  if (!raw->cut.empty()) rep->problems.push_back(raw->cut);
  const nlohmann::json& end = raw->end;
  if (end.is_null()) rep->problems.push_back(raw_name + ": no end line (the load did not finish)");
  if (!raw->cut.empty() || end.is_null()) rep->complete = false;
  b.fail_fast = end.is_object() && end.contains("fail_fast") && end["fail_fast"].is_object()
                    ? end["fail_fast"]
                    : nlohmann::json::object();
  if (end.is_object()) {
    b.early_decision = end.value("early_decision", nlohmann::json());
    b.measured_start_ns = end.value("measured_start_ns", MonoNs{0});
  }
  return b;
}

// The early decision the end line records, re-derived from the measured streams at its moment.
std::optional<EarlyDecision> DeriveDecision(const Row& row, int level, const RawRead& b,
                                            std::string* problem) {
  if (!b.early_decision.is_object()) return std::nullopt;
  const nlohmann::json d = b.early_decision.value("decided", nlohmann::json());
  if (!d.is_object()) return std::nullopt;
  if (!d.contains("at_ns") || !d["at_ns"].is_number_integer()) {
    *problem = "the raw evidence records an early decision without its moment (at_ns)";
    return std::nullopt;
  }
  return internal::RederiveDecision(row, level, b.meas, d["at_ns"].get<MonoNs>(),
                                    b.measured_start_ns, problem);
}

// What the verdict needs besides the records: identity.json (none when unreadable) and
// recount.json (when the trial re-counted).
Result<internal::Evidence> ReadEvidence(const std::string& dir) {
  std::error_code ec;
  nlohmann::json identity = nlohmann::json::object(), recount;
  if (Result<nlohmann::json> ij = ReadJson(dir + "/identity.json"); ij.ok()) identity = *ij;
  if (std::filesystem::exists(dir + "/recount.json", ec)) {
    Result<nlohmann::json> rj = ReadJson(dir + "/recount.json");
    if (!rj.ok()) return rj.status();
    recount = *rj;
  }
  return internal::EvidenceFromJson(identity, recount);
}

// The verdict again from the records, through the code that decided it (trial_internal.h).
TrialVerdict DeriveVerdict(const std::string& dir, const Row& row, const TrialPlan& plan,
                           internal::Evidence evidence, RawRead* b,
                           std::vector<std::string>* problems) {
  evidence.counted_as_zero =
      internal::ApplyCacheCounterRule(evidence.cache_counter, &b->warm, &b->meas);
  internal::ColdPrefix cold =
      internal::EstimateColdPrefix(plan, b->warm, b->meas, evidence.template_prefix_tokens);
  ValidationInput vin = internal::MakeValidationInput(row, plan, b->warm, b->meas, cold, evidence);
  CorrectnessReport correctness = Validate(vin);
  std::string undecided;
  std::optional<EarlyDecision> decided = DeriveDecision(row, plan.level, *b, &undecided);
  internal::LatencyJudgement lat = internal::JudgeLatency(
      row, plan, &b->meas, internal::ServerLoadSamples(ReadServerMetrics(dir, problems)),
      row.identity.time_scale);
  std::optional<StreamBreak> stop = DeriveStop(row, b->fail_fast, b->records, problems);
  TrialVerdict derived = Decide(row, lat.metrics, correctness, stop, lat.stability, decided);
  ApplyClassGates(row, JudgeClasses(row, plan, b->meas, row.identity.time_scale), &derived);
  if (!undecided.empty()) {
    problems->push_back(undecided);
    internal::UnprovenDecision(undecided, &derived);
  }
  return derived;
}

// What verdict.json records against what the raw records give: each difference is a problem.
void CompareVerdicts(const TrialVerdict& derived, const StoredVerdict& stored,
                     std::vector<std::string>* problems) {
  CompareClasses(derived.classes, stored.verdict.classes, problems);
  const TrialVerdict& was = stored.verdict;
  CompareGates(derived.slo, was.slo, "SLO gates", problems);
  CompareGates(derived.tier_slo, was.tier_slo, "tier gates", problems);
  const auto stop_words = [](const std::optional<StreamBreak>& b) {
    return b ? b->gate + " on " + b->request_id : std::string("no fail-fast stop");
  };
  const auto decision_words = [](const std::optional<EarlyDecision>& d) {
    return d ? "an early decision on p" + FormatShortest(d->gate.percentile) + " " +
                   SloMetricName(d->gate.metric) + " at " + std::to_string(d->at_ns)
             : std::string("no early decision");
  };
  if (decision_words(derived.decided) != decision_words(was.decided)) {
    problems->push_back("verdict.json records " + decision_words(was.decided) +
                        ", the raw records give " + decision_words(derived.decided));
  }
  if (stop_words(derived.stopped_at) != stop_words(was.stopped_at)) {
    problems->push_back("verdict.json records " + stop_words(was.stopped_at) +
                        ", the raw records give " + stop_words(derived.stopped_at));
  }
  if (stored.context.complete && derived.outcome != was.outcome &&
      was.outcome != TrialOutcome::kCouldNotRun) {
    problems->push_back(std::string("verdict.json says ") + TrialOutcomeName(was.outcome) +
                        ", the raw records give " + TrialOutcomeName(derived.outcome));
  }
}

// The verdict validate reports: the derived one, except that a recorded lost server or signal
// stands and an incomplete directory never passes.
void SettleVerdict(TrialVerdict derived, const StoredVerdict& stored, bool sums_ok,
                   ValidateReport* rep) {
  const TrialVerdict& was = stored.verdict;
  rep->verdict = std::move(derived);
  if (was.outcome == TrialOutcome::kCouldNotRun || was.outcome == TrialOutcome::kInterrupted) {
    // A lost server or a signal is not visible in the records' gates alone: the recorded
    // outcome stands, with its reasons first.
    rep->verdict.outcome = was.outcome;
    rep->verdict.reasons = was.reasons;
    rep->verdict.misses = was.misses;
  }
  if (!rep->complete) {
    rep->verdict.reasons.insert(
        rep->verdict.reasons.begin(),
        sums_ok ? "incomplete: the trial did not finish" : "incomplete: the checksums do not hold");
    if (rep->verdict.outcome == TrialOutcome::kPass) {
      rep->verdict.outcome = stored.context.complete ? TrialOutcome::kCouldNotRun : was.outcome;
      if (rep->verdict.outcome == TrialOutcome::kPass)
        rep->verdict.outcome = TrialOutcome::kCouldNotRun;
    }
  }
}

// A trial with raw evidence: its row and plan, the records read back, the verdict re-derived and
// set against the recorded one.
Result<ValidateReport> Rederive(const std::string& dir, const std::string& raw_name,
                                const StoredVerdict& stored, bool sums_ok, ValidateReport rep) {
  Result<Row> row = LoadRow(dir + "/row.yaml", CheckServerExpect);
  if (!row.ok()) return row.status().WithContext("row.yaml");
  Result<nlohmann::json> pj = ReadJson(dir + "/plan.json");
  if (!pj.ok()) return pj.status();
  Result<TrialPlan> plan = PlanFromJson(*pj);
  if (!plan.ok()) return plan.status();
  Result<RawRead> records = ReadRecords(dir, raw_name, &rep);
  if (!records.ok()) return records.status();
  Result<internal::Evidence> evidence = ReadEvidence(dir);
  if (!evidence.ok()) return evidence.status();
  TrialVerdict derived =
      DeriveVerdict(dir, *row, *plan, std::move(*evidence), &*records, &rep.problems);
  CompareVerdicts(derived, stored, &rep.problems);
  SettleVerdict(std::move(derived), stored, sums_ok, &rep);
  return rep;
}

}  // namespace

Result<ValidateReport> ValidateTrialDir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return Status::NotFound(dir + ": not a directory");
  ValidateReport rep;
  ChecksumReport sums = VerifyChecksums(dir);
  rep.checksums_ok = sums.ok;
  rep.problems = sums.problems;

  Result<nlohmann::json> vj = ReadJson(dir + "/verdict.json");
  if (!vj.ok()) return Unfinished(dir, vj.status().message(), std::move(rep));
  Result<StoredVerdict> stored = VerdictFromJson(*vj);
  if (!stored.ok()) return Unreadable(stored.status(), std::move(rep));
  rep.complete = stored->context.complete && sums.ok;
  const std::string raw_name = RawEvidenceName(dir);
  if (raw_name.empty()) return WithoutEvidence(*stored, std::move(rep));
  return Rederive(dir, raw_name, *stored, sums.ok, std::move(rep));
}

}  // namespace capq

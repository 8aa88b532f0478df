// The row parser's walk of a document: one YAML document, its top-level keys in the order their
// rules depend on, and the rules across sections, each reported where the fix belongs. The
// sections themselves are read in row_reader_*.cc (row_reader_internal.h lists them).
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "capq/model/row_loader.h"
#include "row_reader_internal.h"

namespace capq {
namespace row_reader {

namespace fs = std::filesystem;

namespace {

// Counts documents without building them; remembers where the second one starts and whether a
// document held anything but nulls.
class DocumentCounter : public YAML::EventHandler {
 public:
  YAML::Mark second_start = YAML::Mark::null_mark();
  bool any_content = false;
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents_ == 2) second_start = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { any_content = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    any_content = true;
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    any_content = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    any_content = true;
  }
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
};

}  // namespace

bool RowParser::Parse(const std::string& text, Row* row) {
  YAML::Node doc;
  if (!LoadDocument(text, &doc)) return false;
  try {
    if (!RefuseTodo(doc, "", 0)) return false;
    MapView top;
    if (!OpenMap(doc, doc.Mark(), "", "a capq/row/v1 row", &top)) return false;
    if (!CheckKeys(top, {"schema",      "id",        "title",
                         "identity",    "workload",  "cache",
                         "warmup",      "measured",  "stability",
                         "slo",         "slo_tiers", "percentile_method",
                         "correctness", "trials",    "request_timeout_s",
                         "confidence",  "expect",    "provenance",
                         "mix",         "prefix",    "sessions"})) {
      return false;
    }
    YAML::Mark ignore_eos_at;
    SampleAt sample_at;
    if (!ParseHeader(top, row) || !ParseServing(top, row, &ignore_eos_at) ||
        !ParseSampleAndSlo(top, row, &sample_at) || !ParseGatesAndTrials(top, row) ||
        !ParseReuse(top, row) || !CheckAcrossSections(*row, top, sample_at, ignore_eos_at)) {
      return false;
    }
  } catch (const std::exception& ex) {
    // The walk above only calls non-throwing yaml-cpp accessors; this is the last fence.
    return Fail(YAML::Mark::null_mark(), "",
                std::string("internal error reading row: ") + ex.what());
  }
  return true;
}

// The one document of `text`, refused when empty, when not YAML and when followed by another.
bool RowParser::LoadDocument(const std::string& text, YAML::Node* doc) {
  try {
    // yaml-cpp 0.7 can yield empty documents without end on some malformed input (a stray ','
    // at the start of a line), so LoadAll would never return: count at most two documents with
    // the event parser, then build the first one.
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentCounter counter;
    int documents = 0;
    while (documents < 2 && parser.HandleNextDocument(counter)) ++documents;
    if (documents == 2) {
      if (!counter.any_content) {
        return Fail(counter.second_start, "",
                    "YAML syntax error: stray text where a mapping of row keys was expected");
      }
      return Fail(counter.second_start, "", "one row per file: found a second YAML document");
    }
    if (documents == 1) *doc = YAML::Load(text);
  } catch (const YAML::Exception& ex) {
    return Fail(ex.mark, "", "YAML syntax error: " + ex.msg);
  } catch (const std::exception& ex) {
    return Fail(YAML::Mark::null_mark(), "", std::string("YAML could not be read: ") + ex.what());
  }
  if (!doc->IsDefined() || doc->IsNull()) {
    return Fail(YAML::Mark::null_mark(), "", "empty file: expected a capq/row/v1 row (a mapping)");
  }
  return true;
}

bool RowParser::RefuseTodo(const YAML::Node& node, const std::string& path, int depth) {
  // A row's keys nest a few levels deep; deeper nesting is refused by the key checks, and must
  // not cost a stack frame per level here.
  if (depth > 8) return true;
  if (node.IsScalar()) {
    if (node.Scalar().rfind("TODO", 0) != 0) return true;
    return Fail(node.Mark(), path,
                "not filled in: \"" + node.Scalar() + "\" (capq rows new could not read it)");
  }
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (!RefuseTodo(node[i], path + "[" + std::to_string(i) + "]", depth + 1)) return false;
    }
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : "?";
      if (!RefuseTodo(kv.second, path.empty() ? key : path + "." + key, depth + 1)) return false;
    }
  }
  return true;
}

// schema, id and title.
bool RowParser::ParseHeader(const MapView& top, Row* row) {
  const Entry* e = nullptr;
  if (!Required(top, "schema", std::string("expected ") + kSchema, &e)) return false;
  if (!e->value.IsScalar() || e->value.Scalar() != kSchema) {
    return Fail(ValueMark(*e), "schema",
                std::string("expected ") + kSchema + ", got " + Describe(e->value));
  }
  row->schema = kSchema;
  if (!Required(top, "id", "the row id, [a-z][a-z0-9_]*", &e)) return false;
  id_mark_ = ValueMark(*e);
  if (!e->value.IsScalar() || !IsValidId(e->value.Scalar())) {
    return Fail(ValueMark(*e), "id",
                "expected an id matching [a-z][a-z0-9_]* (at most 128 characters), got " +
                    Describe(e->value));
  }
  row->id = e->value.Scalar();
  if ((e = top.Find("title")) && !GetString(*e, "title", &row->title)) return false;
  return true;
}

// What is served and how: identity, workload, cache and warmup.
bool RowParser::ParseServing(const MapView& top, Row* row, YAML::Mark* ignore_eos_at) {
  const Entry* e = nullptr;
  if (!Required(top, "identity", "engine, image or sim_profile, model, ...", &e)) return false;
  if (!ParseIdentity(*e, &row->identity)) return false;

  if (!Required(top, "workload", "input_tokens, output_tokens, sampling, arrival", &e))
    return false;
  if (!ParseWorkload(*e, &row->workload, ignore_eos_at)) return false;
  if (!Required(top, "cache", "prefix_cache, flush_before_trial", &e)) return false;
  if (!ParseCache(*e, &row->cache)) return false;
  if (row->identity.engine == Engine::kOpenai && row->cache.flush_before_trial) {
    const Entry* flush = nullptr;
    MapView cache;
    if (OpenMap(*e, "cache", "the cache policy", &cache)) flush = cache.Find("flush_before_trial");
    return Fail(flush ? ValueMark(*flush) : e->key_mark, "cache.flush_before_trial",
                "engine openai has no flush endpoint: set flush_before_trial: false (cold then "
                "rests on prompts no earlier request sent)");
  }
  if (!Required(top, "warmup", "requests, concurrency", &e)) return false;
  return ParseWarmup(*e, &row->warmup);
}

// The measured sample (and where its size is declared), the stability gates, slo and slo_tiers.
bool RowParser::ParseSampleAndSlo(const MapView& top, Row* row, SampleAt* sample_at) {
  const Entry* e = nullptr;
  const bool open_loop = row->open_loop();
  if (!Required(top, "measured",
                open_loop ? "duration_s or requests, and ramp_s" : "min_requests, per_concurrency",
                &e)) {
    return false;
  }
  if (!ParseMeasured(*e, &row->workload, &row->measured, sample_at)) return false;
  if ((e = top.Find("stability"))) {
    if (!open_loop) {
      return Fail(e->key_mark, "stability",
                  "stability gates (a bounded queue, stationary latency, a schedule kept) are "
                  "for open-loop rows; a closed_loop row has no arrival schedule");
    }
    if (!ParseStability(*e, &row->stability)) return false;
  }
  if (!Required(top, "slo", "a list of {metric, percentile, below_ms}", &e)) return false;
  if (!ParseSlo(*e, "slo", &row->slo)) return false;
  if ((e = top.Find("slo_tiers"))) {
    if (open_loop) {
      return Fail(e->key_mark, "slo_tiers",
                  "SLO tiers are for closed-loop rows: a rate row's stability gates are "
                  "judged on its own slo only");
    }
    if (top.Find("mix") || top.Find("sessions")) {
      return Fail(e->key_mark, "slo_tiers",
                  "SLO tiers are judged over all requests, and a mixed or session row's gates "
                  "hold per class or turn: give such a row one slo");
    }
    if (!ParseSloTiers(*e, row->slo, &row->slo_tiers)) return false;
  }
  return true;
}

// percentile_method, correctness, trials, request_timeout_s, confidence, expect and provenance.
bool RowParser::ParseGatesAndTrials(const MapView& top, Row* row) {
  const Entry* e = nullptr;
  if ((e = top.Find("percentile_method"))) {
    std::string m;
    if (!GetEnum(*e, "percentile_method", {"linear", "nearest_rank"}, &m)) return false;
    row->percentile_method =
        m == "linear" ? PercentileMethod::kLinear : PercentileMethod::kNearestRank;
  }
  if ((e = top.Find("correctness")) && !ParseCorrectness(*e, &row->correctness)) return false;
  if (!Required(top, "trials", "count, quiet_period_s, seeds", &e)) return false;
  if (!ParseTrials(*e, row->id, &row->trials)) return false;
  if ((e = top.Find("request_timeout_s")) &&
      !GetNumber(*e, "request_timeout_s", "a number of seconds > 0", Positive,
                 &row->request_timeout_s)) {
    return false;
  }
  if ((e = top.Find("confidence"))) {
    double c = 0;
    if (!GetNumber(*e, "confidence", "a confidence strictly between 0 and 1 (0.9, 0.95)",
                   OpenUnitInterval, &c)) {
      return false;
    }
    row->confidence = c;
  }
  if ((e = top.Find("expect")) && !ParseExpect(*e, row->workload, &row->expect)) return false;
  if ((e = top.Find("provenance")) && !ParseProvenance(*e, &row->provenance)) return false;
  return true;
}

// mix, prefix and sessions, and what a row that declares cache hits may combine with.
bool RowParser::ParseReuse(const MapView& top, Row* row) {
  const Entry* e = nullptr;
  if ((e = top.Find("mix")) && !ParseMix(*e, row)) return false;
  if (row->workload.arrival_kind == ArrivalKind::kReplay && !row->mix) {
    return Fail(top.Find("workload")->key_mark, "workload.arrival.kind",
                "a replay sends a trace: the row needs mix.traffic and its classes");
  }
  if ((e = top.Find("prefix")) && !ParsePrefix(*e, row)) return false;
  if ((e = top.Find("sessions")) && !ParseSessions(*e, row)) return false;
  return CheckReuseRow(*row, top);
}

// Cross-field rules, reported where the fix belongs.
bool RowParser::CheckAcrossSections(const Row& row, const MapView& top, const SampleAt& sample_at,
                                    const YAML::Mark& ignore_eos_at) {
  if (!CheckSloSamples(row, sample_at)) return false;
  if (!CheckTierSamples(row, sample_at)) return false;
  if (!CheckTurnSamples(row, sample_at)) return false;
  if (!CheckThirdSamples(row, sample_at)) return false;
  if (!row.workload.sampling.ignore_eos) {
    const Correctness& c = row.correctness;
    if (c.exact_completion_tokens.enabled ||
        (c.finish_reason.enabled && c.finish_reason_value == "length")) {
      return Fail(ignore_eos_at, "workload.sampling.ignore_eos",
                  "ignore_eos: false lets a stream stop early, so exact_completion_tokens and "
                  "finish_reason: length cannot hold; expected ignore_eos: true, or switch "
                  "those gates off with a reason");
    }
  }
  if (row.warmup.requests > 0 && row.warmup.concurrency > row.warmup.requests) {
    return Fail(top.Find("warmup")->value.Mark(), "warmup.concurrency",
                "expected warmup.concurrency <= warmup.requests");
  }
  return true;
}

// A closed-loop row's gates each need the sample their percentile needs.
bool RowParser::CheckSloSamples(const Row& row, const SampleAt& sample_at) {
  for (size_t i = 0; i < row.slo.size() && !row.open_loop(); ++i) {
    int need = MinRequestsForPercentile(row.slo[i].percentile);
    if (row.measured.min_requests < need) {
      std::ostringstream msg;
      msg << "slo[" << i << "] gates p" << row.slo[i].percentile << ", which needs at least "
          << need << " measured requests (ceil(100 / (100 - p)), so that one request lies above"
          << " the percentile); got " << row.measured.min_requests;
      return Fail(sample_at.mark, sample_at.path, msg.str());
    }
  }
  return true;
}

// An open-loop trial compares the first and last thirds of its interval, so each third must
// hold a sample of its own for every gated percentile, at the lowest rate a trial can run.
bool RowParser::CheckThirdSamples(const Row& row, const SampleAt& sample_at) {
  for (size_t i = 0; i < row.slo.size() && row.open_loop(); ++i) {
    const OpenLoop& o = row.workload.open_loop;
    const double p = row.slo[i].percentile;
    const int64_t per_third = MinRequestsPerThirdForPercentile(p);
    const int64_t have = MeasuredRequestsAtOneStep(row);
    if (have < 3 * per_third) {
      std::ostringstream msg;
      msg << "slo[" << i << "] gates p" << Num(p)
          << "; the stability gates compare the thirds of the measured interval, so each third"
          << " needs at least " << per_third << " requests (ceil(200 / (100 - p)): two beyond"
          << " the percentile), i.e. at least " << 3 * per_third
          << " measured requests at the lowest rate, one step (" << Num(o.rate_step_rps)
          << " requests/s); ";
      if (o.duration_s) {
        const double need_s = static_cast<double>(3 * per_third) / o.rate_step_rps;
        msg << "duration_s " << Num(*o.duration_s) << " holds floor(" << Num(*o.duration_s)
            << " s * " << Num(o.rate_step_rps) << " requests/s) = " << have
            << "; expected duration_s >= " << Num(std::ceil(need_s - 1e-9 * need_s))
            << " or a larger rate_step_rps";
      } else {
        msg << "got requests: " << have;
      }
      return Fail(sample_at.mark, sample_at.path, msg.str());
    }
  }
  return true;
}

namespace {

std::string FamilyOf(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::path(path);
  if (!p.has_parent_path()) {
    fs::path abs = fs::absolute(p, ec);
    if (!ec) p = abs;
  }
  return p.parent_path().filename().string();
}

}  // namespace

bool ParseRowImpl(const std::string& text, const std::string& pseudo_path, Row* row,
                  RowError* error, int* id_line, int* id_column) {
  Row parsed;
  RowParser parser(pseudo_path, error);
  if (!parser.Parse(text, &parsed)) return false;
  parsed.family = FamilyOf(pseudo_path);
  parsed.source_path = pseudo_path;
  if (id_line) *id_line = parser.id_mark().line + 1;
  if (id_column) *id_column = parser.id_mark().column + 1;
  *row = std::move(parsed);
  return true;
}

}  // namespace row_reader

std::string RowError::ToString() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key_path.empty()) out += key_path + ": ";
  return out + message;
}

bool ParseRow(const std::string& text, const std::string& pseudo_path, Row* row, RowError* error) {
  RowError scratch;
  return row_reader::ParseRowImpl(text, pseudo_path, row, error ? error : &scratch, nullptr,
                                  nullptr);
}

Result<Row> LoadRowFromString(const std::string& text, const std::string& pseudo_path,
                              const RowCheck& check) {
  Row row;
  RowError error;
  if (!ParseRow(text, pseudo_path, &row, &error)) {
    return Status::InvalidArgument(error.ToString());
  }
  if (check) {
    if (std::optional<RowError> refused = check(&row)) {
      return Status::InvalidArgument(refused->ToString());
    }
  }
  return row;
}

}  // namespace capq

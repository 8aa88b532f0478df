#include "capq/model/row_loader.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>

#include "capq/hash.h"
#include "capq/model/engine_limits.h"
#include "capq/model/reuse.h"
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
    if (documents == 1) doc = YAML::Load(text);
  } catch (const YAML::Exception& ex) {
    return Fail(ex.mark, "", "YAML syntax error: " + ex.msg);
  } catch (const std::exception& ex) {
    return Fail(YAML::Mark::null_mark(), "", std::string("YAML could not be read: ") + ex.what());
  }
  if (!doc.IsDefined() || doc.IsNull()) {
    return Fail(YAML::Mark::null_mark(), "", "empty file: expected a capq/row/v1 row (a mapping)");
  }
  try {
    MapView top;
    if (!OpenMap(doc, doc.Mark(), "", "a capq/row/v1 row", &top)) return false;
    if (!CheckKeys(top, {"schema",      "id",         "title",
                         "identity",    "workload",   "cache",
                         "warmup",      "measured",   "stability",
                         "slo",         "slo_tiers",  "percentile_method",
                         "correctness", "trials",     "request_timeout_s",
                         "expect",      "provenance", "mix",
                         "prefix",      "sessions"})) {
      return false;
    }
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

    if (!Required(top, "identity", "engine, image or sim_profile, model, ...", &e)) return false;
    if (!ParseIdentity(*e, &row->identity)) return false;

    YAML::Mark ignore_eos_at;
    if (!Required(top, "workload", "input_tokens, output_tokens, sampling, arrival", &e))
      return false;
    if (!ParseWorkload(*e, &row->workload, &ignore_eos_at)) return false;
    if (!Required(top, "cache", "prefix_cache, flush_before_trial", &e)) return false;
    if (!ParseCache(*e, &row->cache)) return false;
    if (row->identity.engine == Engine::kOpenai && row->cache.flush_before_trial) {
      const Entry* flush = nullptr;
      MapView cache;
      if (OpenMap(*e, "cache", "the cache policy", &cache))
        flush = cache.Find("flush_before_trial");
      return Fail(flush ? ValueMark(*flush) : e->key_mark, "cache.flush_before_trial",
                  "engine openai has no flush endpoint: set flush_before_trial: false (cold then "
                  "rests on prompts no earlier request sent)");
    }
    if (!Required(top, "warmup", "requests, concurrency", &e)) return false;
    if (!ParseWarmup(*e, &row->warmup)) return false;
    SampleAt sample_at;
    const bool open_loop = row->open_loop();
    if (!Required(
            top, "measured",
            open_loop ? "duration_s or requests, and ramp_s" : "min_requests, per_concurrency",
            &e)) {
      return false;
    }
    if (!ParseMeasured(*e, &row->workload, &row->measured, &sample_at)) return false;
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
    if ((e = top.Find("expect")) && !ParseExpect(*e, row->workload, &row->expect)) return false;
    if ((e = top.Find("provenance")) && !ParseProvenance(*e, &row->provenance)) return false;
    if ((e = top.Find("mix")) && !ParseMix(*e, row)) return false;
    if ((e = top.Find("prefix")) && !ParsePrefix(*e, row)) return false;
    if ((e = top.Find("sessions")) && !ParseSessions(*e, row)) return false;
    if (!CheckReuseRow(*row, top)) return false;

    // Cross-field rules, reported where the fix belongs.
    for (size_t i = 0; i < row->slo.size() && !open_loop; ++i) {
      int need = MinRequestsForPercentile(row->slo[i].percentile);
      if (row->measured.min_requests < need) {
        std::ostringstream msg;
        msg << "slo[" << i << "] gates p" << row->slo[i].percentile << ", which needs at least "
            << need << " measured requests (ceil(100 / (100 - p)), so that one request lies above"
            << " the percentile); got " << row->measured.min_requests;
        return Fail(sample_at.mark, sample_at.path, msg.str());
      }
    }
    if (!CheckTierSamples(*row, sample_at)) return false;
    if (!CheckTurnSamples(*row, sample_at)) return false;
    // An open-loop trial compares the first and last thirds of its interval, so each third must
    // hold a sample of its own for every gated percentile, at the lowest rate a trial can run.
    for (size_t i = 0; i < row->slo.size() && open_loop; ++i) {
      const OpenLoop& o = row->workload.open_loop;
      const double p = row->slo[i].percentile;
      const int64_t per_third = MinRequestsPerThirdForPercentile(p);
      const int64_t have = MeasuredRequestsAtOneStep(*row);
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
    if (!row->workload.sampling.ignore_eos) {
      const Correctness& c = row->correctness;
      if (c.exact_completion_tokens.enabled ||
          (c.finish_reason.enabled && c.finish_reason_value == "length")) {
        return Fail(ignore_eos_at, "workload.sampling.ignore_eos",
                    "ignore_eos: false lets a stream stop early, so exact_completion_tokens and "
                    "finish_reason: length cannot hold; expected ignore_eos: true, or switch "
                    "those gates off with a reason");
      }
    }
    if (row->warmup.requests > 0 && row->warmup.concurrency > row->warmup.requests) {
      return Fail(top.Find("warmup")->value.Mark(), "warmup.concurrency",
                  "expected warmup.concurrency <= warmup.requests");
    }
  } catch (const std::exception& ex) {
    // The walk above only calls non-throwing yaml-cpp accessors; this is the last fence.
    return Fail(YAML::Mark::null_mark(), "",
                std::string("internal error reading row: ") + ex.what());
  }
  return true;
}

bool RowParser::ParseMixClass(const Entry& entry, const std::string& path, MixClass* c) {
  MapView m;
  if (!OpenMap(entry, path, "a traffic class {name, share}", &m)) return false;
  if (!CheckKeys(m, {"name", "share", "match", "max_input_tokens", "max_output_tokens"})) {
    return false;
  }
  const Entry* e = nullptr;
  if (!Required(m, "name", "the class name, [a-z][a-z0-9_]*", &e)) return false;
  if (!GetString(*e, path + ".name", &c->name)) return false;
  if (!IsValidId(c->name)) {
    return Fail(ValueMark(*e), path + ".name", "expected [a-z][a-z0-9_]*, got " + Shown(c->name));
  }
  int64_t share = 0;
  if (!Required(m, "share", "an integer weight >= 1", &e)) return false;
  if (!GetInt(*e, path + ".share", 1, 1000, &share)) return false;
  c->share = static_cast<int>(share);
  c->match = c->name;
  if ((e = m.Find("match")) && !GetString(*e, path + ".match", &c->match)) return false;
  int64_t v = 0;
  if ((e = m.Find("max_input_tokens"))) {
    if (m.Find("match")) return Fail(e->key_mark, path, "expected either match or bins, not both");
    if (!GetInt(*e, path + ".max_input_tokens", 1, kMaxTokens, &v)) return false;
    c->max_input_tokens = v;
  }
  if ((e = m.Find("max_output_tokens"))) {
    if (m.Find("match")) return Fail(e->key_mark, path, "expected either match or bins, not both");
    if (!GetInt(*e, path + ".max_output_tokens", 1, kMaxTokens, &v)) return false;
    c->max_output_tokens = v;
  }
  return true;
}

// A class too small for a gated percentile would pass on no tail at all: refused at its share.
bool RowParser::CheckMixSample(const Row& row, const MapView& m) {
  const Mix& mix = *row.mix;
  const int n = row.measured.min_requests;
  const YAML::Node list = m.Find("classes")->value;
  for (size_t k = 0; k < mix.classes.size(); ++k) {
    for (size_t i = 0; i < row.slo.size(); ++i) {
      const int need = MinRequestsForPercentile(row.slo[i].percentile);
      const int have = MixMinClassRequests(mix, static_cast<int>(k), n);
      if (have >= need) continue;
      std::ostringstream msg;
      msg << "class " << mix.classes[k].name << " (share " << mix.classes[k].share << " of "
          << mix.Period() << ") is sure of only " << have << " of the " << n
          << " measured requests, but slo[" << i << "] gates p" << Num(row.slo[i].percentile)
          << " in every class, which needs " << need << "; the row would need measured."
          << "min_requests >= " << MixRequestsNeeded(mix, static_cast<int>(k), need)
          << " at these shares";
      const YAML::Node share = list[k]["share"];
      return Fail(share.Mark(), "mix.classes[" + std::to_string(k) + "].share", msg.str());
    }
  }
  return true;
}

// workload.input_tokens / output_tokens of a mixed row name its heaviest pair: what listings
// show and what anything sized by the row's lengths must fit.
bool RowParser::CheckMixPeak(const Row& row, const Mix& mix, const Entry& traffic_at) {
  int64_t in = 0, out = 0;
  for (const MixClass& c : mix.classes) {
    for (const TrafficSample& s : c.samples) {
      in = std::max(in, s.input_tokens);
      out = std::max(out, s.output_tokens);
    }
  }
  if (in == row.workload.input_tokens && out == row.workload.output_tokens) return true;
  return Fail(ValueMark(traffic_at), "mix.traffic",
              "a mixed row's workload.input_tokens / output_tokens are the largest lengths its "
              "classes replay: expected " +
                  std::to_string(in) + " / " + std::to_string(out) + ", got " +
                  std::to_string(row.workload.input_tokens) + " / " +
                  std::to_string(row.workload.output_tokens));
}

bool RowParser::ParseMix(const Entry& entry, Row* row) {
  MapView m;
  if (!OpenMap(entry, "mix", "a mixed-class replay {traffic, classes}", &m)) return false;
  if (!CheckKeys(m, {"traffic", "classes"})) return false;
  if (row->open_loop()) {
    return Fail(entry.key_mark, "mix",
                "a mixed replay is closed loop only (its load level is the total concurrency); "
                "expected workload.arrival.kind: closed_loop");
  }
  const Entry* e = nullptr;
  Mix mix;
  if (!Required(m, "traffic", "a capq/traffic/v1 file, relative to this row's folder", &e)) {
    return false;
  }
  std::string rel;
  if (!GetString(*e, "mix.traffic", &rel)) return false;
  const fs::path p =
      fs::path(rel).is_absolute() ? fs::path(rel) : fs::path(file_).parent_path() / rel;
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  mix.traffic = (ec ? p : abs).lexically_normal().string();
  Result<std::vector<TrafficSample>> samples = LoadTraffic(mix.traffic);
  if (!samples.ok()) return Fail(ValueMark(*e), "mix.traffic", samples.status().message());
  const Entry* traffic_at = e;
  if (!Required(m, "classes", "a list of {name, share}", &e)) return false;
  if (!e->value.IsSequence() || e->value.size() == 0) {
    return Fail(ValueMark(*e), "mix.classes", "expected a list of {name, share}");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < e->value.size(); ++i) {
    Entry item{"", e->value[i].Mark(), e->value[i]};
    const std::string path = "mix.classes[" + std::to_string(i) + "]";
    MixClass c;
    if (!ParseMixClass(item, path, &c)) return false;
    if (!names.insert(c.name).second)
      return Fail(ValueMark(item), path, "duplicate class " + c.name);
    mix.classes.push_back(std::move(c));
  }
  if (Status s = AssignTraffic(*samples, &mix); !s.ok()) {
    return Fail(ValueMark(*traffic_at), "mix.traffic", s.message());
  }
  if (!CheckMixPeak(*row, mix, *traffic_at)) return false;
  row->mix = std::move(mix);
  return CheckMixSample(*row, m);
}

bool RowParser::ParseReuseTolerance(const MapView& m, const std::string& path, ReuseTolerance* t) {
  const Entry* e = m.Find("reuse_tolerance");
  if (!e) return true;
  MapView r;
  const std::string at = path + ".reuse_tolerance";
  if (!OpenMap(*e, at, "{tokens, ratio_pct}", &r)) return false;
  if (!CheckKeys(r, {"tokens", "ratio_pct"})) return false;
  if ((e = r.Find("tokens")) && !GetInt(*e, at + ".tokens", 0, kMaxTokens, &t->tokens)) {
    return false;
  }
  return !(e = r.Find("ratio_pct")) ||
         GetNumber(*e, at + ".ratio_pct", "a number of percentage points in (0, 100)", OpenPercent,
                   &t->ratio_pct);
}

bool RowParser::ParsePrefixGroup(const Entry& entry, const std::string& path, int64_t input_tokens,
                                 PrefixGroup* g) {
  MapView m;
  if (!OpenMap(entry, path, "a prefix group {prefixes, tokens, share}", &m)) return false;
  if (!CheckKeys(m, {"prefixes", "tokens", "share"})) return false;
  const Entry* e = nullptr;
  int64_t v = 0;
  if (!Required(m, "prefixes", "how many distinct shared prefixes, an integer >= 1", &e) ||
      !GetInt(*e, path + ".prefixes", 1, 10000, &v)) {
    return false;
  }
  g->prefixes = static_cast<int>(v);
  if (!Required(m, "tokens", "each prefix's length in the server's tokens", &e) ||
      !GetInt(*e, path + ".tokens", 1, kMaxTokens, &g->tokens)) {
    return false;
  }
  if (g->tokens >= input_tokens) {
    return Fail(ValueMark(*e), path + ".tokens",
                "a prefix is the start of a prompt of workload.input_tokens " +
                    std::to_string(input_tokens) +
                    ", and every prompt keeps a unique rest: expected tokens < " +
                    std::to_string(input_tokens));
  }
  return Required(m, "share", "the share of measured prompts that use the group, in (0, 1]", &e) &&
         GetNumber(*e, path + ".share", "a share in (0, 1]", UnitInterval, &g->share);
}

bool RowParser::ParsePrefix(const Entry& entry, Row* row) {
  MapView m;
  if (!OpenMap(entry, "prefix", "prefix groups {groups, reuse_tolerance}", &m)) return false;
  if (!CheckKeys(m, {"groups", "reuse_tolerance"})) return false;
  const Entry* e = nullptr;
  if (!Required(m, "groups", "a list of {prefixes, tokens, share}", &e)) return false;
  if (!e->value.IsSequence() || e->value.size() == 0) {
    return Fail(ValueMark(*e), "prefix.groups", "expected a list of {prefixes, tokens, share}");
  }
  PrefixReuse prefix;
  double total = 0;
  for (size_t i = 0; i < e->value.size(); ++i) {
    Entry item{"", e->value[i].Mark(), e->value[i]};
    PrefixGroup g;
    const std::string path = "prefix.groups[" + std::to_string(i) + "]";
    if (!ParsePrefixGroup(item, path, row->workload.input_tokens, &g)) return false;
    total += g.share;
    if (total > 1 + 1e-9) {
      return Fail(ValueMark(item), path + ".share",
                  "the groups' shares add up to " + Num(total) + ", more than every prompt");
    }
    prefix.groups.push_back(g);
  }
  if (!ParseReuseTolerance(m, "prefix", &prefix.tolerance)) return false;
  row->prefix = std::move(prefix);
  return true;
}

bool RowParser::ParseThinkTime(const Entry& entry, Sessions* s) {
  MapView m;
  if (!OpenMap(entry, "sessions.think_time", "{distribution, mean_s}", &m)) return false;
  if (!CheckKeys(m, {"distribution", "mean_s"})) return false;
  const Entry* e = nullptr;
  if (!Required(m, "distribution", "constant or exponential", &e) ||
      !GetEnum(*e, "sessions.think_time.distribution", {"constant", "exponential"}, &s->think)) {
    return false;
  }
  return Required(m, "mean_s", "the mean think time in the server's seconds, >= 0", &e) &&
         GetNumber(*e, "sessions.think_time.mean_s", "a number of seconds >= 0", NonNegative,
                   &s->think_mean_s);
}

bool RowParser::ParseTrajectoryPath(const Entry& e, Sessions* s) {
  std::string rel;
  if (!GetString(e, "sessions.trajectory", &rel)) return false;
  const fs::path p =
      fs::path(rel).is_absolute() ? fs::path(rel) : fs::path(file_).parent_path() / rel;
  std::error_code ec;
  const fs::path abs = fs::absolute(p, ec);
  s->trajectory = (ec ? p : abs).lexically_normal().string();
  Result<std::vector<std::vector<TurnShape>>> paths = LoadTrajectory(s->trajectory);
  if (!paths.ok()) return Fail(ValueMark(e), "sessions.trajectory", paths.status().message());
  s->paths = std::move(*paths);
  return true;
}

bool RowParser::ParseSessions(const Entry& entry, Row* row) {
  MapView m;
  if (!OpenMap(entry, "sessions", "the session shape", &m)) return false;
  if (!CheckKeys(m, {"turns", "user_tokens", "think_time", "trajectory", "reuse_tolerance"})) {
    return false;
  }
  if (row->workload.arrival_kind != ArrivalKind::kSessions) {
    return Fail(entry.key_mark, "sessions",
                "sessions: is the shape of workload.arrival.kind: sessions; expected that kind");
  }
  Sessions s;
  const Entry* e = nullptr;
  if ((e = m.Find("trajectory"))) {
    for (const char* k : {"turns", "user_tokens", "think_time"}) {
      if (const Entry* x = m.Find(k)) {
        return Fail(x->key_mark, std::string("sessions.") + k,
                    "a trajectory file gives every turn's lengths and delays: expected either "
                    "trajectory or turns, user_tokens and think_time");
      }
    }
    if (!ParseTrajectoryPath(*e, &s)) return false;
  } else {
    int64_t v = 0;
    if (!Required(m, "turns", "turns per session, an integer >= 2", &e) ||
        !GetInt(*e, "sessions.turns", 2, 1000, &v)) {
      return false;
    }
    s.turns = static_cast<int>(v);
    if (!Required(m, "user_tokens", "the new user message of each later turn, in tokens", &e) ||
        !GetInt(*e, "sessions.user_tokens", 1, kMaxTokens, &s.user_tokens)) {
      return false;
    }
    if (!Required(m, "think_time", "{distribution: constant | exponential, mean_s}", &e) ||
        !ParseThinkTime(*e, &s)) {
      return false;
    }
  }
  if (!ParseReuseTolerance(m, "sessions", &s.tolerance)) return false;
  row->sessions = std::move(s);
  return true;
}

// Reuse rows measure a warm cache on purpose, so what they combine with is narrow.
bool RowParser::CheckReuseRow(const Row& row, const MapView& top) {
  if (row.workload.arrival_kind == ArrivalKind::kSessions && !row.sessions) {
    return Fail(top.Find("workload")->key_mark, "workload.arrival.kind",
                "kind: sessions needs a top-level sessions: block (turns, user_tokens, "
                "think_time, or a trajectory file)");
  }
  if (!row.reuse()) return true;
  const Entry* at = top.Find(row.prefix ? "prefix" : "sessions");
  const std::string what = row.prefix ? "a prefix row" : "a session row";
  if (row.prefix && row.sessions) {
    return Fail(at->key_mark, "prefix", "expected either prefix groups or sessions, not both");
  }
  if (row.mix) return Fail(at->key_mark, at->key, what + " replays no traffic mix");
  if (row.open_loop()) {
    return Fail(at->key_mark, at->key,
                what +
                    " is closed loop (its load level is a concurrency); expected "
                    "workload.arrival.kind: " +
                    (row.prefix ? "closed_loop" : "sessions"));
  }
  if (!row.cache.prefix_cache) {
    return Fail(at->key_mark, at->key,
                what + " declares cache hits, so it needs cache.prefix_cache: enabled");
  }
  if (row.workload.input_stddev_tokens > 0 || row.workload.output_stddev_tokens > 0) {
    return Fail(at->key_mark, at->key,
                what +
                    " declares exact lengths (the hits follow from them): expected "
                    "input_stddev_tokens and output_stddev_tokens 0");
  }
  return true;
}

// Every turn index is gated like a class, so each must hold a tail of its own at C = 1.
bool RowParser::CheckTurnSamples(const Row& row, const SampleAt& at) {
  if (!row.sessions) return true;
  const std::vector<int> counts = TurnCounts(SessionShapes(row, 1, 1));
  for (size_t i = 0; i < row.slo.size(); ++i) {
    const int need = MinRequestsForPercentile(row.slo[i].percentile);
    for (size_t t = 0; t < counts.size(); ++t) {
      if (counts[t] >= need) continue;
      std::ostringstream msg;
      msg << "slo[" << i << "] gates p" << Num(row.slo[i].percentile)
          << " at every turn index, which needs " << need << " requests per turn; at C=1 the "
          << "row runs " << counts[0] << " sessions and only " << counts[t] << " reach turn "
          << t + 1 << "; expected a larger measured.min_requests";
      return Fail(at.mark, at.path, msg.str());
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

Result<Row> LoadRowFromString(const std::string& text, const std::string& pseudo_path) {
  Row row;
  RowError error;
  if (!ParseRow(text, pseudo_path, &row, &error)) {
    return Status::InvalidArgument(error.ToString());
  }
  return row;
}

}  // namespace capq

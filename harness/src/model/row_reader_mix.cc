// The mix section of a row: a recorded traffic file replayed as classes with shares, each class
// gated on its own.
#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "capq/model/mix.h"
#include "capq/model/traffic.h"
#include "row_reader_internal.h"

namespace capq::row_reader {

namespace fs = std::filesystem;

bool RowParser::ParseMixClass(const Entry& entry, const std::string& path, bool replay,
                              MixClass* c) {
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
  if (replay) {
    if ((e = m.Find("share"))) {
      return Fail(e->key_mark, path + ".share",
                  "a replay sends the trace in its own order, so its classes have the trace's "
                  "shares; remove share");
    }
  } else {
    if (!Required(m, "share", "an integer weight >= 1", &e)) return false;
    if (!GetInt(*e, path + ".share", 1, 1000, &share)) return false;
    c->share = static_cast<int>(share);
  }
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

// mix.lengths: how the trace's lengths are fitted to the server (mix.h, LengthFit).
bool RowParser::ParseMixLengths(const Entry& entry, LengthFit* fit) {
  MapView m;
  if (!OpenMap(entry, "mix.lengths", "{scale, cap_input_tokens, context_tokens}", &m)) return false;
  if (!CheckKeys(m, {"scale", "cap_input_tokens", "context_tokens"})) return false;
  const Entry* e = nullptr;
  if ((e = m.Find("scale")) &&
      !GetNumber(*e, "mix.lengths.scale", "a number in (0, 1]", UnitInterval, &fit->scale)) {
    return false;
  }
  int64_t v = 0;
  if ((e = m.Find("cap_input_tokens"))) {
    if (!GetInt(*e, "mix.lengths.cap_input_tokens", 1, kMaxTokens, &v)) return false;
    fit->cap_input_tokens = v;
  }
  if ((e = m.Find("context_tokens"))) {
    if (!GetInt(*e, "mix.lengths.context_tokens", 2, kMaxTokens, &v)) return false;
    fit->context_tokens = v;
  }
  return true;
}

// A replay's class too small for a gated percentile in some trial: refused at its class.
bool RowParser::CheckReplaySample(const Row& row, const MapView& m) {
  const Mix& mix = *row.mix;
  if (!row.workload.open_loop.requests) {
    return Fail(m.Find("classes")->key_mark, "mix",
                "a replay measures a number of replayed requests: expected measured.requests, "
                "not duration_s");
  }
  const int n = *row.workload.open_loop.requests;
  const YAML::Node list = m.Find("classes")->value;
  for (size_t k = 0; k < mix.classes.size(); ++k) {
    const int have = ReplayMinClassRequests(mix, static_cast<int>(k), n);  // a pass over the trace
    for (size_t i = 0; i < row.slo.size(); ++i) {
      const int need = MinRequestsForPercentile(row.slo[i].percentile);
      if (have >= need) continue;
      return Fail(list[k].Mark(), "mix.classes[" + std::to_string(k) + "]",
                  "class " + mix.classes[k].name + " has only " + std::to_string(have) +
                      " requests in some " + std::to_string(n) +
                      " consecutive requests of the trace, but slo[" + std::to_string(i) +
                      "] gates p" + Num(row.slo[i].percentile) + " in every class, which needs " +
                      std::to_string(need) + "; raise measured.requests or widen the class");
    }
  }
  return true;
}

// A class too small for a gated percentile would pass on no tail at all: refused at its share.
bool RowParser::CheckMixSample(const Row& row, const MapView& m) {
  const Mix& mix = *row.mix;
  if (mix.replay()) return CheckReplaySample(row, m);
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
  if (!CheckKeys(m, {"traffic", "lengths", "prefix_blocks", "classes"})) return false;
  const bool replay = row->workload.arrival_kind == ArrivalKind::kReplay;
  if (row->open_loop() && !replay) {
    return Fail(entry.key_mark, "mix",
                "a mixed replay draws its classes in shares closed loop (its load level is the "
                "total concurrency), or replays the trace in order at its own rhythm; expected "
                "workload.arrival.kind: closed_loop or replay");
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
    if (!ParseMixClass(item, path, replay, &c)) return false;
    if (!names.insert(c.name).second)
      return Fail(ValueMark(item), path, "duplicate class " + c.name);
    mix.classes.push_back(std::move(c));
  }
  if (Status s = AssignTraffic(*samples, &mix); !s.ok()) {
    return Fail(ValueMark(*traffic_at), "mix.traffic", s.message());
  }
  if ((e = m.Find("prefix_blocks"))) {
    MapView b;
    if (!OpenMap(*e, "mix.prefix_blocks", "{reuse_tolerance}", &b)) return false;
    if (!CheckKeys(b, {"reuse_tolerance"})) return false;
    mix.blocks.emplace();
    if (!ParseReuseTolerance(b, "mix.prefix_blocks", &mix.blocks->tolerance)) return false;
  }
  const Entry* fit_at = m.Find("lengths");
  if (fit_at && !ParseMixLengths(*fit_at, &mix.lengths)) return false;
  if (fit_at || mix.blocks) {
    if (Status s = FitTraffic(&mix); !s.ok()) {
      return Fail(ValueMark(fit_at ? *fit_at : *traffic_at), fit_at ? "mix.lengths" : "mix.traffic",
                  s.message());
    }
  }
  if (replay) {
    if (Status s = OrderReplay(&mix, samples->size()); !s.ok()) {
      return Fail(ValueMark(*traffic_at), "mix.traffic", s.message());
    }
  }
  if (!CheckMixPeak(*row, mix, *traffic_at)) return false;
  row->mix = std::move(mix);
  return CheckMixSample(*row, m);
}

}  // namespace capq::row_reader

// The reuse sections of a row: prefix groups (prompts that share a start) and sessions (turns that
// resend the conversation so far), and what rows that declare cache hits may combine with.
#include <filesystem>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include "capq/model/reuse.h"
#include "capq/model/trajectory_fit.h"
#include "row_reader_internal.h"

namespace capq::row_reader {

namespace fs = std::filesystem;

bool RowParser::ParseReuseTolerance(const MapView& m, const std::string& path, ReuseTolerance* t) {
  const Entry* e = m.Find("reuse_tolerance");
  if (!e) return true;
  MapView r;
  const std::string at = path + ".reuse_tolerance";
  if (!OpenMap(*e, at, "{tokens, ratio_pct, misses_pct}", &r)) return false;
  if (!CheckKeys(r, {"tokens", "ratio_pct", "misses_pct"})) return false;
  if ((e = r.Find("tokens")) && !GetInt(*e, at + ".tokens", 0, kMaxTokens, &t->tokens)) {
    return false;
  }
  if ((e = r.Find("ratio_pct")) &&
      !GetNumber(*e, at + ".ratio_pct", "a number of percentage points in (0, 100)", OpenPercent,
                 &t->ratio_pct)) {
    return false;
  }
  return !(e = r.Find("misses_pct")) ||
         GetNumber(*e, at + ".misses_pct", "a percentage of measured requests in (0, 100)",
                   OpenPercent, &t->misses_pct);
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
  Result<std::vector<std::vector<TurnShape>>> paths = LoadTrajectory(s->trajectory, &s->starts);
  if (!paths.ok()) return Fail(ValueMark(e), "sessions.trajectory", paths.status().message());
  s->paths = std::move(*paths);
  return true;
}

// sessions.scale: {tokens, times, context_tokens}, a trajectory fitted to the server.
bool RowParser::ParseSessionScale(const Entry& entry, Sessions* s) {
  MapView m;
  if (!OpenMap(entry, "sessions.scale", "{tokens, times, context_tokens}", &m)) return false;
  if (!CheckKeys(m, {"tokens", "times", "context_tokens"})) return false;
  const Entry* e = nullptr;
  if ((e = m.Find("tokens")) && !GetNumber(*e, "sessions.scale.tokens", "a number in (0, 1]",
                                           UnitInterval, &s->token_scale)) {
    return false;
  }
  if ((e = m.Find("times")) &&
      !GetNumber(*e, "sessions.scale.times", "a number in (0, 1]", UnitInterval, &s->time_scale)) {
    return false;
  }
  int64_t v = 0;
  if ((e = m.Find("context_tokens"))) {
    if (!GetInt(*e, "sessions.scale.context_tokens", 2, kMaxTokens, &v)) return false;
    s->context_tokens = v;
  }
  return true;
}

// sessions.prefix_blocks: {merge}, every turn's whole prompt built from its recorded blocks.
bool RowParser::ParseSessionBlocks(const Entry& entry, Sessions* s) {
  MapView m;
  if (!OpenMap(entry, "sessions.prefix_blocks", "{merge}", &m)) return false;
  if (!CheckKeys(m, {"merge"})) return false;
  s->blocks.emplace();
  int64_t v = 1;
  const Entry* e = m.Find("merge");
  if (e && !GetInt(*e, "sessions.prefix_blocks.merge", 1, 4096, &v)) return false;
  s->blocks->merge = static_cast<int>(v);
  return true;
}

// The trajectory's options (scale, prefix_blocks, gate_turns), then its fit to the server.
bool RowParser::ParseTrajectoryFit(const MapView& m, Sessions* s) {
  const Entry* e = nullptr;
  if ((e = m.Find("scale")) && !ParseSessionScale(*e, s)) return false;
  if ((e = m.Find("prefix_blocks")) && !ParseSessionBlocks(*e, s)) return false;
  std::string gate = "every";
  if ((e = m.Find("gate_turns")) &&
      !GetEnum(*e, "sessions.gate_turns", {"every", "first_and_later"}, &gate)) {
    return false;
  }
  s->gate_every_turn = gate == "every";
  const Status st = FitTrajectory(s);
  if (st.ok()) return true;
  const Entry* at = m.Find("prefix_blocks") ? m.Find("prefix_blocks") : m.Find("scale");
  return Fail(at ? ValueMark(*at) : ValueMark(*m.Find("trajectory")), "sessions.trajectory",
              st.message());
}

bool RowParser::ParseSessions(const Entry& entry, Row* row) {
  MapView m;
  if (!OpenMap(entry, "sessions", "the session shape", &m)) return false;
  if (!CheckKeys(m, {"turns", "user_tokens", "think_time", "trajectory", "scale", "prefix_blocks",
                     "gate_turns", "reuse_tolerance"})) {
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
    if (!ParseTrajectoryPath(*e, &s) || !ParseTrajectoryFit(m, &s)) return false;
  } else {
    for (const char* k : {"scale", "prefix_blocks", "gate_turns"}) {
      if (const Entry* x = m.Find(k)) {
        return Fail(x->key_mark, std::string("sessions.") + k,
                    "fits a recorded trajectory to the server: expected sessions.trajectory");
      }
    }
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
  if (row.mix && row.mix->blocks && !row.prefix && !row.sessions) {
    if (row.cache.prefix_cache) return true;
    return Fail(top.Find("mix")->key_mark, "mix.prefix_blocks",
                "a replay of prefix blocks declares cache hits, so it needs cache.prefix_cache: "
                "enabled");
  }
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

// Every turn class (each turn index, or turn 1 and the later turns) is gated like a mixed row's
// class, so each must hold a tail of its own at C = 1.
bool RowParser::CheckTurnSamples(const Row& row, const SampleAt& at) {
  if (!row.sessions) return true;
  std::vector<int> counts = TurnCounts(SessionShapes(row, 1, 1));
  if (!row.sessions->gate_every_turn && counts.size() > 1) {  // turn 1, then all later turns
    int later = 0;
    for (size_t t = 1; t < counts.size(); ++t) later += counts[t];
    counts = {counts[0], later};
  }
  for (size_t i = 0; i < row.slo.size(); ++i) {
    const int need = MinRequestsForPercentile(row.slo[i].percentile);
    for (size_t t = 0; t < counts.size(); ++t) {
      if (counts[t] >= need) continue;
      const std::string which = row.sessions->gate_every_turn
                                    ? "reach turn " + std::to_string(t + 1)
                                : t == 0 ? "are first turns"
                                         : "are later turns";
      std::ostringstream msg;
      msg << "slo[" << i << "] gates p" << Num(row.slo[i].percentile)
          << " in every turn class, which needs " << need << " requests each; at C=1 the "
          << "row runs " << counts[0] << " sessions and only " << counts[t] << " " << which
          << "; expected a larger measured.min_requests";
      return Fail(at.mark, at.path, msg.str());
    }
  }
  return true;
}

}  // namespace capq::row_reader

// The gates of a row that declares cache reuse: the cached tokens the server served are the ones
// the row declares (cache_reuse), and every later session turn resent exactly the conversation so
// far, with the text the server streamed (session_history).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "validator_internal.h"

namespace capq::validator_internal {
namespace {

std::string Pct(double ratio) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f%%", ratio * 100);
  return buf;
}

GateResult NotApplicable(const char* name, const char* why) {
  GateResult g = NewGate(name);
  g.enabled = false;
  g.passed = true;
  g.evidence = why;
  return g;
}

struct ReuseTally {
  int64_t declared = 0, served = 0, prompt = 0;
  size_t judged = 0;
  std::vector<std::string> over, missed, no_counter;
  std::vector<std::string> missed_ids;
};

// One request: served within [declared - tol, declared + template allowance + tol]; above it the
// cache was warmer than the row (over), below it the request missed its declared reuse (missed).
void TallyOne(const ValidationInput& in, const RequestResult& r, int64_t declared, ReuseTally* t,
              GateResult* g) {
  if (!r.cached_tokens || !r.prompt_tokens) {
    t->no_counter.push_back(r.id);
    g->offending_ids.push_back(r.id);
    return;
  }
  ++t->judged;
  t->declared += declared;
  t->served += *r.cached_tokens;
  t->prompt += *r.prompt_tokens;
  const int64_t tol = in.reuse_tolerance.tokens;
  const int64_t lo = declared - tol, hi = declared + in.cold_prefix_tokens_allowed + tol;
  const std::string what = r.id + " (" + std::to_string(*r.cached_tokens) + " cached, declared " +
                           std::to_string(declared) + ")";
  if (*r.cached_tokens > hi) {
    t->over.push_back(what);
    g->offending_ids.push_back(r.id);
  } else if (*r.cached_tokens < lo) {
    t->missed.push_back(what);
    t->missed_ids.push_back(r.id);
  }
}

// Whether the misses may stand beside a served ratio within tolerance: the engine's cache model
// explains them (Target::MissHint), or they are within the row's misses_pct. Says which in `g`.
bool MissesAllowed(const ValidationInput& in, const ReuseTally& t, GateResult* g) {
  if (t.missed.empty()) return true;
  const double pct = 100.0 * static_cast<double>(t.missed.size()) /
                     static_cast<double>(std::max<size_t>(1, in.measured.size()));
  const bool explained = !in.miss_hint.empty();
  const bool within = pct <= in.reuse_tolerance.misses_pct;
  char share[96];
  std::snprintf(share, sizeof share, "%.1f%% of measured requests, the row allows %.1f%%", pct,
                in.reuse_tolerance.misses_pct);
  g->evidence += "; " + Of(t.missed.size(), in.measured.size(), "requests") +
                 " missed their declared reuse: " + Join(t.missed) +
                 (explained ? " (reported, not failed: " + in.miss_hint + ")"
                  : within  ? std::string(" (within the row's allowance: ") + share + ")"
                            : std::string(" (not allowed: ") + share + ")");
  if (explained || within) return true;
  g->offending_ids.insert(g->offending_ids.end(), t.missed_ids.begin(), t.missed_ids.end());
  return false;
}

}  // namespace

GateResult CacheReuse(const ValidationInput& in) {
  if (!in.reuse_row) {
    return NotApplicable("cache_reuse",
                         "the row declares no cache reuse (prefix groups or "
                         "sessions); verify_cold judges its cold cache");
  }
  GateResult g = NewGate("cache_reuse");
  g.capacity = true;
  ReuseTally t;
  std::vector<std::string> undeclared;
  for (const RequestResult& r : in.measured) {
    auto it = in.declared_cached_tokens.find(r.id);
    if (it == in.declared_cached_tokens.end()) {
      undeclared.push_back(r.id);
      g.offending_ids.push_back(r.id);
      continue;
    }
    TallyOne(in, r, it->second, &t, &g);
  }
  const double declared = t.prompt > 0 ? static_cast<double>(t.declared) / t.prompt : 0;
  const double served = t.prompt > 0 ? static_cast<double>(t.served) / t.prompt : 0;
  const bool ratio_ok = std::fabs(served - declared) * 100 <= in.reuse_tolerance.ratio_pct;
  g.evidence = "hit ratio served " + Pct(served) + ", declared " + Pct(declared) + " (within " +
               Pct(in.reuse_tolerance.ratio_pct / 100) + " points: " + (ratio_ok ? "yes" : "no") +
               ") over " + std::to_string(t.judged) + " measured requests, " + Count(t.served) +
               " of " + Count(t.prompt) + " prompt tokens cached";
  if (!t.over.empty()) {
    g.evidence += "; " + Of(t.over.size(), in.measured.size(), "requests") +
                  " served more than [declared - " + std::to_string(in.reuse_tolerance.tokens) +
                  ", declared + " +
                  std::to_string(in.cold_prefix_tokens_allowed + in.reuse_tolerance.tokens) +
                  "]: " + Join(t.over);
    if (!in.cold_hint.empty()) g.evidence += ". " + in.cold_hint;
  }
  const bool misses_ok = MissesAllowed(in, t, &g);
  g.passed = t.over.empty() && misses_ok && t.no_counter.empty() && undeclared.empty() &&
             t.judged > 0 && ratio_ok;
  if (!t.no_counter.empty()) {
    g.evidence += "; no per-request cached or prompt tokens (fail closed): " + Join(t.no_counter);
    if (!in.counter_hint.empty()) g.evidence += " (" + in.counter_hint + ")";
  }
  if (!undeclared.empty()) {
    g.evidence += "; no declared reuse could be derived (the previous turn gave no usage): " +
                  Join(undeclared);
  }
  return g;
}

GateResult SessionHistory(const ValidationInput& in) {
  if (!in.session_row) {
    return NotApplicable("session_history",
                         "every body is the plan's (not a session row, or one whose turns are "
                         "whole prompts built from "
                         "prefix blocks)");
  }
  GateResult g = NewGate("session_history");
  std::vector<std::string> words;
  size_t judged = 0;
  for (const RequestResult& r : in.measured) {
    auto it = in.expected_history.find(r.id);
    if (it == in.expected_history.end()) continue;
    ++judged;
    if (!r.sent_messages_error.empty()) {
      words.push_back(r.id + " (" + r.sent_messages_error + ")");
    } else if (r.sent_messages != it->second) {
      size_t k = 0;
      while (k < r.sent_messages.size() && k < it->second.size() &&
             r.sent_messages[k] == it->second[k]) {
        ++k;
      }
      words.push_back(r.id + " (message " + std::to_string(k) + " of " +
                      std::to_string(it->second.size()) + " differs)");
    } else {
      continue;
    }
    g.offending_ids.push_back(r.id);
  }
  g.passed = words.empty();
  g.evidence = words.empty()
                   ? Of(judged, judged, "later turns") +
                         " resent their session's prompts and the exact text streamed in each "
                         "earlier turn"
                   : Of(words.size(), judged, "later turns") +
                         " did not resend their conversation exactly: " + Join(words);
  return g;
}

}  // namespace capq::validator_internal

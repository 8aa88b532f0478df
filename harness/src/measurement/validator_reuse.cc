// The gates of a row that declares cache reuse: the cached tokens the server served are the ones
// the row declares (cache_reuse), and every later session turn resent exactly the conversation so
// far, with the text the server streamed (session_history).
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
  std::vector<std::string> off, no_counter;
};

// One request: served within [declared - tol, declared + template allowance + tol].
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
  if (*r.cached_tokens < lo || *r.cached_tokens > hi) {
    t->off.push_back(r.id + " (" + std::to_string(*r.cached_tokens) + " cached, declared " +
                     std::to_string(declared) + ")");
    g->offending_ids.push_back(r.id);
  }
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
  g.passed =
      t.off.empty() && t.no_counter.empty() && undeclared.empty() && t.judged > 0 && ratio_ok;
  g.evidence = "hit ratio served " + Pct(served) + ", declared " + Pct(declared) + " (within " +
               Pct(in.reuse_tolerance.ratio_pct / 100) + " points: " + (ratio_ok ? "yes" : "no") +
               ") over " + std::to_string(t.judged) + " measured requests, " + Count(t.served) +
               " of " + Count(t.prompt) + " prompt tokens cached";
  if (!t.off.empty()) {
    g.evidence += "; " + Of(t.off.size(), in.measured.size(), "requests") +
                  " served outside [declared - " + std::to_string(in.reuse_tolerance.tokens) +
                  ", declared + " +
                  std::to_string(in.cold_prefix_tokens_allowed + in.reuse_tolerance.tokens) +
                  "]: " + Join(t.off);
    if (!in.cold_hint.empty() && t.served > t.declared) g.evidence += ". " + in.cold_hint;
  }
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
    return NotApplicable("session_history", "not a session row: every body is the plan's");
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

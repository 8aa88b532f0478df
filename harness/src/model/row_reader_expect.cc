// The sections of a row about its trials and its claim: the confirmation trials and their seeds,
// the expectation (a concurrency or a rate, and the C=1 baseline) and where it came from.
#include <cmath>
#include <set>
#include <string>

#include "row_reader_internal.h"

namespace capq::row_reader {

bool RowParser::ParseTrials(const Entry& entry, const std::string& row_id, Trials* t) {
  MapView m;
  if (!OpenMap(entry, "trials", "the confirmation trials", &m)) return false;
  if (!CheckKeys(m, {"count", "quiet_period_s", "seeds"})) return false;
  const Entry* e = nullptr;
  int64_t count = 0;
  if (!Required(m, "count", "an integer >= 1", &e)) return false;
  if (!GetInt(*e, "trials.count", 1, kMaxTrials, &count)) return false;
  t->count = static_cast<int>(count);
  if ((e = m.Find("quiet_period_s")) &&
      !GetNumber(*e, "trials.quiet_period_s", "a number of seconds >= 0", NonNegative,
                 &t->quiet_period_s)) {
    return false;
  }
  t->seeds.clear();
  if ((e = m.Find("seeds"))) {
    if (!e->value.IsSequence()) {
      return Fail(ValueMark(*e), "trials.seeds",
                  "expected a list of trials.count integers, got " + Describe(e->value));
    }
    if (static_cast<int64_t>(e->value.size()) != count) {
      return Fail(ValueMark(*e), "trials.seeds",
                  "expected one seed per trial (trials.count = " + std::to_string(count) +
                      "), got " + std::to_string(e->value.size()));
    }
    std::set<uint64_t> seen;
    for (size_t i = 0; i < e->value.size(); ++i) {
      Entry item{"", e->value[i].Mark().is_null() ? ValueMark(*e) : e->value[i].Mark(),
                 e->value[i]};
      const std::string path = "trials.seeds[" + std::to_string(i) + "]";
      uint64_t seed = 0;
      if (!GetUint(item, path, &seed)) return false;
      if (!seen.insert(seed).second) {
        return Fail(
            ValueMark(item), path,
            "duplicate seed " + std::to_string(seed) + ": independent trials need different seeds");
      }
      t->seeds.push_back(seed);
    }
  } else {
    std::set<uint64_t> seen;
    for (int i = 0; i < t->count; ++i) {
      uint64_t seed = DeriveTrialSeed(row_id, i);
      // A collision in 2^31 is improbable but must not hand two trials one prompt set.
      while (!seen.insert(seed).second) seed = seed % 2147483647 + 1;
      t->seeds.push_back(seed);
    }
  }
  return true;
}

bool RowParser::ParseExpect(const Entry& entry, const Workload& w, Expect* x) {
  MapView m;
  if (!OpenMap(entry, "expect", "the row's expectation", &m)) return false;
  if (!CheckKeys(m, {"cmax", "rmax_rps", "baseline"})) return false;
  const Entry* e = nullptr;
  const bool open_loop =
      w.arrival_kind != ArrivalKind::kClosedLoop && w.arrival_kind != ArrivalKind::kSessions;
  if ((e = m.Find("cmax"))) {
    if (open_loop) {
      return Fail(e->key_mark, "expect.cmax",
                  "cmax is a closed-loop claim (a concurrency); an open-loop (" +
                      std::string(ArrivalKindName(w.arrival_kind)) +
                      ") row claims a rate: expect.rmax_rps");
    }
    int64_t cmax = 0;
    if (!GetInt(*e, "expect.cmax", 1, kMaxConcurrency, &cmax)) return false;
    x->cmax = static_cast<int>(cmax);
  }
  if ((e = m.Find("rmax_rps"))) {
    if (!open_loop) {
      return Fail(e->key_mark, "expect.rmax_rps",
                  "rmax_rps is an open-loop claim (a rate); a closed_loop row claims a "
                  "concurrency: expect.cmax");
    }
    if (!ParseRateClaim(*e, w, x)) return false;
  }
  if ((e = m.Find("baseline")) && !ParseBaseline(*e, x)) return false;
  return true;
}

// expect.rmax_rps: a whole number of rate steps.
bool RowParser::ParseRateClaim(const Entry& e, const Workload& w, Expect* x) {
  const double step = w.open_loop.rate_step_rps;
  double rmax = 0;
  if (!GetNumber(e, "expect.rmax_rps",
                 "a rate in requests/s > 0, a multiple of rate_step_rps (" + Num(step) + ")",
                 Positive, &rmax)) {
    return false;
  }
  const double steps = std::round(rmax / step);
  if (steps < 1 || std::fabs(rmax - steps * step) > 1e-9 * rmax ||
      steps > static_cast<double>(kMaxConcurrency)) {
    const double below = std::floor(rmax / step) * step;
    std::string msg = "expected a positive multiple of workload.arrival.rate_step_rps (" +
                      Num(step) + " requests/s, the claim's resolution), got " + Num(rmax);
    if (steps > static_cast<double>(kMaxConcurrency)) {
      msg += " (more than " + std::to_string(kMaxConcurrency) + " steps)";
    } else if (below > 0) {
      msg += " (between " + Num(below) + " and " + Num(below + step) + ")";
    } else {
      msg += " (below one step)";
    }
    return Fail(ValueMark(e), "expect.rmax_rps", msg);
  }
  x->rmax_rps = rmax;
  return true;
}

// expect.baseline: the C=1 medians, at least one of them.
bool RowParser::ParseBaseline(const Entry& entry, Expect* x) {
  MapView b;
  if (!OpenMap(entry, "expect.baseline", "the C=1 baseline", &b)) return false;
  if (!CheckKeys(b, {"ttft_p50_ms", "itl_p50_ms", "tolerance_pct", "prompt_tokens"})) {
    return false;
  }
  const Entry* e = nullptr;
  Baseline base;
  double v = 0;
  if ((e = b.Find("ttft_p50_ms"))) {
    if (!GetNumber(*e, "expect.baseline.ttft_p50_ms", "a number of ms > 0", Positive, &v)) {
      return false;
    }
    base.ttft_p50_ms = v;
  }
  if ((e = b.Find("itl_p50_ms"))) {
    if (!GetNumber(*e, "expect.baseline.itl_p50_ms", "a number of ms > 0", Positive, &v)) {
      return false;
    }
    base.itl_p50_ms = v;
  }
  if ((e = b.Find("prompt_tokens"))) {
    int64_t n = 0;
    if (!GetInt(*e, "expect.baseline.prompt_tokens", 1, kMaxTokens, &n)) return false;
    base.prompt_tokens = n;
  }
  if (!base.ttft_p50_ms && !base.itl_p50_ms) {
    return Fail(b.missing_at, "expect.baseline",
                "expected at least one of ttft_p50_ms, itl_p50_ms in a baseline");
  }
  if ((e = b.Find("tolerance_pct")) &&
      !GetNumber(*e, "expect.baseline.tolerance_pct", "a percentage > 0", Positive,
                 &base.tolerance_pct)) {
    return false;
  }
  x->baseline = base;
  return true;
}

bool RowParser::ParseProvenance(const Entry& entry, Provenance* p) {
  MapView m;
  if (!OpenMap(entry, "provenance", "where the expectation came from", &m)) return false;
  if (!CheckKeys(m, {"qualified_on", "source", "notes"})) return false;
  const Entry* e = nullptr;
  if (!Required(m, "source", "where the expectation came from", &e)) return false;
  if (!GetString(*e, "provenance.source", &p->source)) return false;
  if ((e = m.Find("qualified_on"))) {
    if (!GetString(*e, "provenance.qualified_on", &p->qualified_on)) return false;
    if (!IsDate(p->qualified_on)) {
      return Fail(ValueMark(*e), "provenance.qualified_on",
                  "expected a date YYYY-MM-DD, got " + Shown(p->qualified_on));
    }
  }
  if ((e = m.Find("notes")) && !GetString(*e, "provenance.notes", &p->notes)) return false;
  return true;
}

}  // namespace capq::row_reader

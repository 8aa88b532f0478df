// The workload section of a row and the sections that size its trials: the request shape and
// sampling, the arrival model, the cache policy, the warm-up, the measured interval and an
// open-loop row's stability gates.
#include <string>

#include "row_reader_internal.h"

namespace capq::row_reader {

bool RowParser::ParseWorkload(const Entry& entry, Workload* w, YAML::Mark* ignore_eos_at) {
  MapView m;
  if (!OpenMap(entry, "workload", "the workload shape", &m)) return false;
  if (!CheckKeys(m, {"input_tokens", "input_stddev_tokens", "output_tokens", "output_stddev_tokens",
                     "sampling", "arrival", "prompt_corpus"})) {
    return false;
  }
  const Entry* e = nullptr;
  if (!Required(m, "input_tokens", "an integer > 0", &e)) return false;
  if (!GetInt(*e, "workload.input_tokens", 1, kMaxTokens, &w->input_tokens)) return false;
  if ((e = m.Find("input_stddev_tokens")) &&
      !GetInt(*e, "workload.input_stddev_tokens", 0, kMaxTokens, &w->input_stddev_tokens)) {
    return false;
  }
  if (!Required(m, "output_tokens", "an integer > 0", &e)) return false;
  if (!GetInt(*e, "workload.output_tokens", 1, kMaxTokens, &w->output_tokens)) return false;
  if ((e = m.Find("output_stddev_tokens")) &&
      !GetInt(*e, "workload.output_stddev_tokens", 0, kMaxTokens, &w->output_stddev_tokens)) {
    return false;
  }

  if (!Required(m, "sampling", "{temperature, ignore_eos}", &e)) return false;
  MapView s;
  if (!OpenMap(*e, "workload.sampling", "the sampling policy", &s)) return false;
  if (!CheckKeys(s, {"temperature", "ignore_eos", "top_p"})) return false;
  if (!Required(s, "temperature", "a number >= 0", &e)) return false;
  if (!GetNumber(*e, "workload.sampling.temperature", "a number >= 0", NonNegative,
                 &w->sampling.temperature)) {
    return false;
  }
  if (!Required(s, "ignore_eos", "true or false", &e)) return false;
  *ignore_eos_at = ValueMark(*e);
  if (!GetBool(*e, "workload.sampling.ignore_eos", &w->sampling.ignore_eos)) return false;
  if ((e = s.Find("top_p"))) {
    double top_p = 0;
    if (!GetNumber(*e, "workload.sampling.top_p", "a number in (0, 1]", UnitInterval, &top_p)) {
      return false;
    }
    w->sampling.top_p = top_p;
  }

  if (!Required(m, "arrival", "{kind: closed_loop} or an open-loop kind with rate_step_rps", &e)) {
    return false;
  }
  if (!ParseArrival(*e, w)) return false;
  if ((e = m.Find("prompt_corpus")) &&
      !GetEnum(*e, "workload.prompt_corpus", {"synthetic"}, &w->prompt_corpus)) {
    return false;
  }
  return true;
}

bool RowParser::ParseArrival(const Entry& entry, Workload* w) {
  MapView a;
  if (!OpenMap(entry, "workload.arrival", "the arrival model", &a)) return false;
  const Entry* e = nullptr;
  if (!Required(a, "kind", "closed_loop, constant, poisson or gamma", &e)) return false;
  if (e->value.IsScalar() && e->value.Scalar() == "open_loop") {
    return Fail(ValueMark(*e), "workload.arrival.kind",
                "open_loop is not a kind: an open-loop row names the distribution of its "
                "inter-arrival gaps; expected one of: constant, poisson, gamma (or closed_loop "
                "for a fixed number of concurrent sessions)");
  }
  std::string kind;
  if (!GetEnum(*e, "workload.arrival.kind",
               {"closed_loop", "constant", "poisson", "gamma", "sessions", "replay"}, &kind)) {
    return false;
  }
  if (!CheckKeys(a, {"kind", "rate_step_rps", "cv"})) return false;
  w->arrival_kind = *ParseArrivalKind(kind);
  const Entry* cv = a.Find("cv");
  if (w->arrival_kind == ArrivalKind::kClosedLoop || w->arrival_kind == ArrivalKind::kSessions) {
    if ((e = a.Find("rate_step_rps"))) {
      return Fail(e->key_mark, "workload.arrival.rate_step_rps",
                  "rate_step_rps is for open-loop arrival (constant, poisson, gamma); a "
                  "closed_loop row's load level is its concurrency, not a rate");
    }
    if (cv) {
      return Fail(cv->key_mark, "workload.arrival.cv",
                  "cv (the coefficient of variation of inter-arrival gaps) is declared only for "
                  "kind: gamma; a closed_loop row has no arrival schedule");
    }
    return true;
  }
  return ParseOpenLoopArrival(a, cv, w);
}

// An open-loop arrival: the resolution of its rate, and the gaps' coefficient of variation
// (chosen for gamma, fixed by the others).
bool RowParser::ParseOpenLoopArrival(const MapView& a, const Entry* cv, Workload* w) {
  const Entry* e = nullptr;
  OpenLoop& o = w->open_loop;
  if (!Required(a, "rate_step_rps",
                "the resolution of a rate claim in requests/s, > 0: a trial's rate is a whole "
                "number of steps",
                &e)) {
    return false;
  }
  if (!GetNumber(*e, "workload.arrival.rate_step_rps",
                 "a rate step in requests/s > 0 (the resolution of the rate claim)", Positive,
                 &o.rate_step_rps)) {
    return false;
  }
  if (o.rate_step_rps > kMaxRateStepRps) {
    return Fail(ValueMark(*e), "workload.arrival.rate_step_rps",
                "expected a rate step of at most " + Num(kMaxRateStepRps) + " requests/s, got " +
                    Num(o.rate_step_rps));
  }
  if (w->arrival_kind == ArrivalKind::kGamma) {
    if (!Required(a, "cv",
                  "the coefficient of variation of the inter-arrival gaps, > 0 (1 is Poisson, "
                  "above 1 burstier)",
                  &cv)) {
      return false;
    }
    if (!GetNumber(
            *cv, "workload.arrival.cv",
            "a coefficient of variation in (0, " + Num(kMaxCv) +
                "] (the gaps' standard deviation over their mean)",
            [](double v) { return v > 0 && v <= kMaxCv; }, &o.cv)) {
      return false;
    }
  } else if (w->arrival_kind == ArrivalKind::kReplay) {
    if (cv) {
      return Fail(cv->key_mark, "workload.arrival.cv",
                  "a replay's gaps are the trace's own; cv is declared only for kind: gamma");
    }
    o.cv = 0;
  } else {
    if (cv) {
      return Fail(cv->key_mark, "workload.arrival.cv",
                  "cv is declared only for kind: gamma; " +
                      std::string(ArrivalKindName(w->arrival_kind)) + " gaps have cv " +
                      (w->arrival_kind == ArrivalKind::kConstant ? "0" : "1") +
                      " by definition (use kind: gamma to choose one)");
    }
    o.cv = w->arrival_kind == ArrivalKind::kConstant ? 0 : 1;
  }
  return true;
}

bool RowParser::ParseCache(const Entry& entry, CachePolicy* c) {
  MapView m;
  if (!OpenMap(entry, "cache", "the cache policy", &m)) return false;
  if (!CheckKeys(m, {"prefix_cache", "flush_before_trial", "verify_cold"})) return false;
  const Entry* e = nullptr;
  std::string prefix;
  if (!Required(m, "prefix_cache", "enabled or disabled", &e)) return false;
  if (!GetEnum(*e, "cache.prefix_cache", {"enabled", "disabled"}, &prefix)) return false;
  c->prefix_cache = prefix == "enabled";
  if (!Required(m, "flush_before_trial", "true or false", &e)) return false;
  if (!GetBool(*e, "cache.flush_before_trial", &c->flush_before_trial)) return false;
  if ((e = m.Find("verify_cold")) && !GetBool(*e, "cache.verify_cold", &c->verify_cold))
    return false;
  return true;
}

bool RowParser::ParseWarmup(const Entry& entry, Warmup* w) {
  MapView m;
  if (!OpenMap(entry, "warmup", "the warm-up set", &m)) return false;
  if (!CheckKeys(m, {"requests", "concurrency"})) return false;
  const Entry* e = nullptr;
  int64_t v = 0;
  if (!Required(m, "requests", "an integer >= 0", &e)) return false;
  if (!GetInt(*e, "warmup.requests", 0, kMaxRequests, &v)) return false;
  w->requests = static_cast<int>(v);
  if ((e = m.Find("concurrency"))) {
    if (!GetInt(*e, "warmup.concurrency", 1, kMaxConcurrency, &v)) return false;
    w->concurrency = static_cast<int>(v);
  }
  return true;
}

bool RowParser::ParseMeasured(const Entry& entry, Workload* w, Measured* out, SampleAt* sample_at) {
  MapView m;
  if (!OpenMap(entry, "measured", "the measured sample size", &m)) return false;
  if (!CheckKeys(m, {"min_requests", "per_concurrency", "duration_s", "requests", "ramp_s"})) {
    return false;
  }
  if (w->arrival_kind != ArrivalKind::kClosedLoop && w->arrival_kind != ArrivalKind::kSessions) {
    return ParseOpenLoopMeasured(m, w, sample_at);
  }
  return ParseClosedLoopMeasured(m, out, sample_at);
}

bool RowParser::ParseOpenLoopMeasured(const MapView& m, Workload* w, SampleAt* sample_at) {
  const Entry* e = nullptr;
  const std::string kind = ArrivalKindName(w->arrival_kind);
  for (const char* k : {"min_requests", "per_concurrency"}) {
    if ((e = m.Find(k))) {
      return Fail(e->key_mark, std::string("measured.") + k,
                  std::string(k) + " is a closed-loop field (requests = max(min_requests, " +
                      "per_concurrency * C)); an open-loop (" + kind +
                      ") row measures duration_s or requests after ramp_s");
    }
  }
  OpenLoop& o = w->open_loop;
  if (!ParseMeasuredInterval(m, &o, sample_at)) return false;
  if (!Required(m, "ramp_s",
                "seconds of schedule sent before the measured interval and excluded from the "
                "metrics like warm-ups, >= 0",
                &e)) {
    return false;
  }
  if (!GetNumber(*e, "measured.ramp_s",
                 "a number of (virtual) seconds >= 0 (requests scheduled before it are sent "
                 "but not measured)",
                 NonNegative, &o.ramp_s)) {
    return false;
  }
  if (o.ramp_s > kMaxDurationS) {
    return Fail(ValueMark(*e), "measured.ramp_s",
                "expected at most " + Num(kMaxDurationS) + " s (a week), got " + Num(o.ramp_s));
  }
  return true;
}

// Exactly one of duration_s and requests: how much of an open-loop schedule is measured.
bool RowParser::ParseMeasuredInterval(const MapView& m, OpenLoop* o, SampleAt* sample_at) {
  const Entry* duration = m.Find("duration_s");
  const Entry* requests = m.Find("requests");
  if (duration && requests) {
    const Entry* second = duration->key_mark.line > requests->key_mark.line ||
                                  (duration->key_mark.line == requests->key_mark.line &&
                                   duration->key_mark.column > requests->key_mark.column)
                              ? duration
                              : requests;
    return Fail(second->key_mark, "measured." + second->key,
                "expected exactly one of duration_s (seconds of schedule) or requests (a "
                "count) in an open-loop measured interval; got both");
  }
  if (!duration && !requests) {
    return Fail(m.missing_at, "measured",
                "expected exactly one of duration_s (seconds of schedule) or requests (a "
                "count) in an open-loop measured interval; got neither");
  }
  if (duration) {
    sample_at->mark = ValueMark(*duration);
    sample_at->path = "measured.duration_s";
    double d = 0;
    if (!GetNumber(*duration, "measured.duration_s",
                   "a number of (virtual) seconds > 0: the sustained measured interval", Positive,
                   &d)) {
      return false;
    }
    if (d > kMaxDurationS) {
      return Fail(ValueMark(*duration), "measured.duration_s",
                  "expected at most " + Num(kMaxDurationS) + " s (a week), got " + Num(d));
    }
    o->duration_s = d;
    return true;
  }
  sample_at->mark = ValueMark(*requests);
  sample_at->path = "measured.requests";
  int64_t v = 0;
  if (!GetInt(*requests, "measured.requests", 1, kMaxRequests, &v)) return false;
  o->requests = static_cast<int>(v);
  return true;
}

bool RowParser::ParseClosedLoopMeasured(const MapView& m, Measured* out, SampleAt* sample_at) {
  const Entry* e = nullptr;
  int64_t v = 0;
  for (const char* k : {"duration_s", "requests", "ramp_s"}) {
    if ((e = m.Find(k))) {
      return Fail(e->key_mark, std::string("measured.") + k,
                  std::string(k) +
                      " is an open-loop field (constant, poisson, gamma arrival); a closed_loop "
                      "row measures max(min_requests, per_concurrency * C) requests");
    }
  }
  if (!Required(m, "min_requests", "an integer >= 1", &e)) return false;
  sample_at->mark = ValueMark(*e);
  sample_at->path = "measured.min_requests";
  if (!GetInt(*e, "measured.min_requests", 1, kMaxRequests, &v)) return false;
  out->min_requests = static_cast<int>(v);
  if (!Required(m, "per_concurrency",
                "an integer >= 0: requests = max(min_requests, per_concurrency * C)", &e)) {
    return false;
  }
  if (!GetInt(*e, "measured.per_concurrency", 0, 1000, &v)) return false;
  out->per_concurrency = static_cast<int>(v);
  return true;
}

bool RowParser::ParseStability(const Entry& entry, Stability* out) {
  MapView m;
  if (!OpenMap(entry, "stability", "the stability gates of an open-loop trial", &m)) return false;
  if (!CheckKeys(
          m, {"queue_growth_pct", "queue_slack", "latency_drift_factor", "max_send_lateness_ms"})) {
    return false;
  }
  const Entry* e = nullptr;
  if ((e = m.Find("queue_growth_pct")) &&
      !GetNumber(*e, "stability.queue_growth_pct",
                 "a percentage >= 0 (how far the last third's mean queue depth may exceed the "
                 "first third's)",
                 NonNegative, &out->queue_growth_pct)) {
    return false;
  }
  if ((e = m.Find("queue_slack")) &&
      !GetNumber(*e, "stability.queue_slack",
                 "a number of requests >= 0 (added to the queue bound, so that a near-empty "
                 "queue is not growth)",
                 NonNegative, &out->queue_slack)) {
    return false;
  }
  if ((e = m.Find("latency_drift_factor")) &&
      !GetNumber(
          *e, "stability.latency_drift_factor",
          "a factor >= 1 (the last third's gated percentile over the first third's)",
          [](double v) { return v >= 1; }, &out->latency_drift_factor)) {
    return false;
  }
  if ((e = m.Find("max_send_lateness_ms")) &&
      !GetNumber(*e, "stability.max_send_lateness_ms",
                 "a number of ms > 0 (the p99 send lateness beyond which the client fell behind)",
                 Positive, &out->max_send_lateness_ms)) {
    return false;
  }
  return true;
}

}  // namespace capq::row_reader

// What a trial's verdict is decided from besides the raw records: the cold allowance (the
// template prefix measured on the server), the evidence recorded in identity.json and recount.json,
// and the validator input built from them, shared by RunTrial() and capq validate.
#include <algorithm>

#include "trial_internal.h"

namespace capq::internal {

size_t ApplyCacheCounterRule(const CacheCounterRule& rule, std::vector<RequestResult>* warmup,
                             std::vector<RequestResult>* measured) {
  if (!rule.absent_means_zero) return 0;
  const auto lists = {warmup, measured};
  if (rule.only_if_any_reported) {
    bool any = false;
    for (const auto* list : lists) {
      for (const RequestResult& r : *list) any = any || r.cached_tokens.has_value();
    }
    if (!any) return 0;
  }
  size_t read_as_zero = 0;
  for (auto* list : lists) {
    for (RequestResult& r : *list) {
      // Only a stream that finished with usage: a broken one has no counter to read.
      if (r.cached_tokens || !r.prompt_tokens || r.http_status != 200) continue;
      r.cached_tokens = 0;
      ++read_as_zero;
    }
  }
  return read_as_zero;
}

ColdPrefix EstimateColdPrefix(const TrialPlan& plan, const std::vector<RequestResult>& warmup,
                              const std::vector<RequestResult>& measured,
                              std::optional<int64_t> template_prefix) {
  ColdPrefix c;
  c.template_prefix_tokens = template_prefix;
  std::map<std::string, int64_t> message_tokens;
  const bool calibrated = plan.calibration == "tokenize";
  for (const auto* list : {&plan.warmup, &plan.measured}) {
    for (const auto& r : *list) message_tokens[r.id] = r.prompt.message_tokens;
  }
  for (const auto* list : {&warmup, &measured}) {
    for (const auto& r : *list) {
      if (r.cached_tokens) c.counter_available = true;
      if (calibrated && r.prompt_tokens && message_tokens.count(r.id)) {
        int64_t t = *r.prompt_tokens - message_tokens[r.id];
        if (t >= 0) c.template_tokens = c.template_tokens ? std::min(*c.template_tokens, t) : t;
      }
    }
  }
  for (const auto& r : measured) {
    if (r.cached_tokens)
      c.max_cached_tokens = std::max(c.max_cached_tokens.value_or(0), *r.cached_tokens);
  }
  if (template_prefix) {
    c.allowed_tokens = *template_prefix;
    c.source = "the chat template's shared prefix, measured on the server";
  } else if (c.template_tokens) {
    c.allowed_tokens = *c.template_tokens;
    c.source =
        "the server renders no chat template: the whole template overhead (server prompt_tokens "
        "minus the calibrated message tokens), an upper bound on its shared prefix";
  } else {
    c.allowed_tokens = 0;
    c.source =
        "the template prefix could not be measured and the plan is not calibrated: no cached "
        "token is allowed (fail closed)";
  }
  if (!c.counter_available) c.source += "; the server reported no per-request cached-token counter";
  return c;
}

nlohmann::json ColdPrefixToJson(const ColdPrefix& c) {
  auto opt = [](const std::optional<int64_t>& v) { return v ? nlohmann::json(*v) : nullptr; };
  return {{"allowed_tokens", c.allowed_tokens},
          {"counter_available", c.counter_available},
          {"source", c.source},
          {"template_prefix_tokens", opt(c.template_prefix_tokens)},
          {"template_tokens", opt(c.template_tokens)},
          {"max_cached_tokens", opt(c.max_cached_tokens)}};
}

namespace {

// usage.prompt_tokens must be the planned message plus the template the server wraps around it.
void ExpectPromptTokens(const Row& row, const TrialPlan& plan, const Evidence& ev,
                        ValidationInput* in) {
  in->prompt_tokens_tolerance = row.correctness.prompt_tokens_tolerance;
  if (!ev.template_overhead_tokens) {
    in->prompt_expectation_unavailable =
        "the server renders no chat template, so the tokens it wraps around a message are unknown";
    return;
  }
  const int64_t overhead = *ev.template_overhead_tokens;
  const bool exact = plan.calibration == "tokenize";
  for (const auto& r : plan.measured) {
    // A session's later turn resends a conversation the plan cannot count: session_history proves
    // its body and cache_reuse its served context.
    if (BuiltWhenSent(row, r)) continue;
    const int64_t want = r.prompt.message_tokens + overhead;
    in->expected_prompt_tokens[r.id] = want;
    // Without the server's tokenizer message lengths are estimates: allow 10 %, still far from a
    // prompt cut to a quarter.
    if (!exact) {
      in->prompt_tokens_tolerance = std::max(in->prompt_tokens_tolerance, want / 10);
    }
  }
  in->prompt_expectation_note =
      "planned = message tokens (" +
      std::string(exact ? "exact in the server's tokenizer" : "estimated: no tokenize endpoint") +
      ") + " + std::to_string(overhead) + " template tokens measured on the server";
}

// The validator's copy of the streams: without their texts and chunk gaps, which no gate reads
// (the re-count has its counts already) and which at thousands of long streams are most of them.
std::vector<RequestResult> WithoutTextAndGaps(const std::vector<RequestResult>& streams) {
  std::vector<RequestResult> out;
  out.reserve(streams.size());
  for (const RequestResult& r : streams) {
    RequestResult& c = out.emplace_back(r);
    std::vector<float>().swap(c.text_gaps_ms);
    std::string().swap(c.output_text);
    std::string().swap(c.content_text);
  }
  return out;
}

}  // namespace

ValidationInput MakeValidationInput(const Row& row, const TrialPlan& plan,
                                    const std::vector<RequestResult>& warmup,
                                    const std::vector<RequestResult>& measured,
                                    const ColdPrefix& cold, const Evidence& ev) {
  ValidationInput in;
  in.row = &row;
  in.level = plan.level;
  in.warmup = WithoutTextAndGaps(warmup);
  in.measured = WithoutTextAndGaps(measured);
  for (const auto& r : plan.warmup) in.warmup_prompt_hashes.push_back(r.prompt.sha256);
  for (const auto& r : plan.measured) {
    in.measured_prompt_hashes.push_back(r.prompt.sha256);
    in.expected_completion_tokens[r.id] = r.max_tokens;
  }
  // Open loop: every scheduled stream is proven correct, the ramp's too.
  in.expected_measured =
      plan.open_loop() ? static_cast<int>(plan.measured.size()) : plan.expected_measured;
  in.cold_prefix_tokens_allowed = cold.allowed_tokens;
  in.cold_counter_available = cold.counter_available || ev.server_cached_tokens_total.has_value();
  in.server_cached_tokens_total = ev.server_cached_tokens_total;
  in.server_cached_window_requests = ev.server_cached_window_requests;
  in.cold_hint = ev.cold_hint;
  in.miss_hint = ev.miss_hint;
  in.counter_hint = ev.cache_counter.launch_hint;
  in.cold_by_unique_prompts = ev.cache_counter.cold_by_unique_prompts;
  if (in.cold_by_unique_prompts) in.counter_note = ev.cache_counter.source;
  if (ev.counted_as_zero > 0) {
    in.counter_note =
        std::to_string(ev.counted_as_zero) +
        " streams with usage but no cached-token count read as 0: " + ev.cache_counter.source;
  }
  in.served_model_name = ev.served_model_name;
  const nlohmann::json& rc = ev.recount;
  in.recount_method = rc.value("method", "");
  in.recount_unavailable = rc.value("unavailable", "");
  if (rc.contains("counts") && rc["counts"].is_object()) {
    for (const auto& [id, n] : rc["counts"].items()) {
      if (n.is_number_integer()) in.recounted_tokens[id] = n.get<int64_t>();
    }
  } else if (in.recount_unavailable.empty()) {
    in.recount_unavailable = "the trial recorded no re-count (recount.json)";
  }
  ExpectPromptTokens(row, plan, ev, &in);
  ExpectReuse(row, plan, measured, &in);
  return in;
}

Evidence EvidenceFromJson(const nlohmann::json& identity, const nlohmann::json& recount) {
  Evidence e;
  auto number = [](const nlohmann::json& obj, const char* key) -> std::optional<int64_t> {
    if (obj.is_object() && obj.contains(key) && obj[key].is_number_integer()) {
      return obj[key].get<int64_t>();
    }
    return std::nullopt;
  };
  if (identity.contains("template_prefix")) {
    e.template_prefix_tokens = number(identity["template_prefix"], "tokens");
    e.template_overhead_tokens = number(identity["template_prefix"], "overhead_tokens");
  }
  if (identity.contains("cold_prefix")) {
    e.server_cached_tokens_total = number(identity["cold_prefix"], "server_cached_tokens_total");
    e.server_cached_window_requests =
        number(identity["cold_prefix"], "server_cached_window_requests").value_or(0);
  }
  if (identity.contains("flush") && identity["flush"].is_object()) {
    e.cold_hint = identity["flush"].value("cold_hint", "");
  }
  if (identity.contains("cache_misses") && identity["cache_misses"].is_object()) {
    e.miss_hint = identity["cache_misses"].value("explained_by", "");
  }
  if (identity.contains("cache_counter"))
    e.cache_counter = CacheCounterRuleFromJson(identity["cache_counter"]);
  e.served_model_name = identity.value("served_model_name", "");
  if (recount.is_object()) e.recount = recount;
  return e;
}

namespace {

// The wall moment the schedule started, from any sent stream counted from its intended send
// (CountFromIntendedSend): that send less its offset.
MonoNs ScheduleStartNs(const TrialPlan& plan, const std::vector<RequestResult>& meas,
                       double time_scale) {
  for (const RequestResult& r : meas) {
    const size_t i = static_cast<size_t>(r.index);
    if (r.start_ns == 0 || i >= plan.send_offsets_ns.size()) continue;
    return r.start_ns -
           static_cast<MonoNs>(static_cast<double>(plan.send_offsets_ns[i]) / time_scale);
  }
  return 0;
}

}  // namespace

LatencyJudgement JudgeLatency(const Row& row, const TrialPlan& plan,
                              std::vector<RequestResult>* meas,
                              const std::vector<ServerLoadSample>& server, double time_scale) {
  LatencyJudgement j;
  const PercentileMethod m = row.percentile_method;
  if (!plan.open_loop()) {
    j.metrics = ComputeMetrics(*meas, plan.level, time_scale, m);
    return j;
  }
  std::vector<const RequestResult*> scheduled, measured;
  for (const RequestResult& r : *meas) {
    scheduled.push_back(&r);
    if (r.index >= plan.ramp_requests) measured.push_back(&r);
  }
  j.actual_send = ComputeMetricsOf(measured, 0, time_scale, m);
  for (RequestResult& r : *meas) CountFromIntendedSend(&r);
  const MonoNs start = ScheduleStartNs(plan, *meas, time_scale);
  j.metrics = ComputeMetricsOf(measured, 0, time_scale, m);
  StabilityInputs in;
  in.scheduled = scheduled;
  in.measured = measured;
  in.server = server;
  const auto wall = [&](int64_t virtual_ns) {
    return start + static_cast<MonoNs>(static_cast<double>(virtual_ns) / time_scale);
  };
  in.interval_start_ns = wall(plan.measured_start_ns);
  in.interval_end_ns = wall(plan.measured_end_ns);
  in.rule = row.stability;
  in.slo = row.slo;
  in.method = m;
  in.time_scale = time_scale;
  j.stability = JudgeStability(in);
  return j;
}

std::vector<ServerLoadSample> ServerLoadSamples(const std::vector<nlohmann::json>& lines) {
  std::vector<ServerLoadSample> out;
  for (const nlohmann::json& l : lines) {
    if (!l.is_object() || l.value("kind", "") != "sample" || !l.contains("t_ns")) continue;
    ServerLoadSample s;
    s.t_ns = l["t_ns"].get<MonoNs>();
    if (l.contains("running") && l["running"].is_number()) s.running = l["running"].get<double>();
    if (l.contains("waiting") && l["waiting"].is_number()) s.waiting = l["waiting"].get<double>();
    out.push_back(s);
  }
  return out;
}

}  // namespace capq::internal

#include "capq/model/plan.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "capq/hash.h"
#include "capq/model/arrival.h"
#include "capq/model/prefix_blocks.h"
#include "capq/model/reuse.h"
#include "capq/model/row_loader.h"

namespace capq {
namespace {

// A seeded normal draw (Box-Muller over splitmix64), rounded and kept >= 1; stddev 0 -> mean.
int64_t DrawLength(int64_t mean, int64_t stddev, uint64_t seed, uint64_t salt, int index) {
  if (stddev <= 0) return mean;
  uint64_t s = SplitMix64(seed ^ SplitMix64(salt ^ SplitMix64(static_cast<uint64_t>(index) + 7)));
  uint64_t s2 = SplitMix64(s);
  double u1 = (static_cast<double>(s >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
  double u2 = static_cast<double>(s2 >> 11) / 9007199254740992.0;
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  return std::max<int64_t>(1, std::llround(static_cast<double>(mean) + z * stddev));
}

nlohmann::json PromptToJson(const Prompt& p) {
  return {{"text", p.text},
          {"generator_index", p.generator_index},
          {"sha256", p.sha256},
          {"lead_word", p.lead_word},
          {"target_tokens", p.target_tokens},
          {"message_tokens", p.message_tokens},
          {"calibrated", p.calibrated}};
}

nlohmann::json RequestToJson(const PlanRequest& r) {
  nlohmann::json j = {{"id", r.id},
                      {"index", r.index},
                      {"max_tokens", r.max_tokens},
                      {"prompt", PromptToJson(r.prompt)},
                      {"body", r.body}};
  if (!r.traffic_class.empty()) j["class"] = r.traffic_class;
  if (r.prefix >= 0) j["prefix"] = r.prefix;
  if (r.prime) j["prime"] = true;
  if (r.declared_cached_tokens) j["declared_cached_tokens"] = *r.declared_cached_tokens;
  if (r.session >= 0) {
    j["session"] = r.session;
    j["turn"] = r.turn;
    j["think_s"] = r.think_s;
  }
  if (r.parent_session >= 0) {
    j["parent_session"] = r.parent_session;
    j["start_after_s"] = r.start_after_s;
  }
  return j;
}

// What one request of a plan asks for, before its prompt is written.
struct RequestShape {
  int64_t in = 0, out = 0;
  std::string cls;
  int prefix = -1;
  int session = -1, turn = 0;
  double think_s = 0;
  PathStart start;                           // a sub-agent's first turn: the session it runs beside
  const TrafficSample* blocks = nullptr;     // a block replay's measured request: its fitted sample
  std::optional<TrafficSample> turn_blocks;  // a block session's turn: its prompt's blocks
};

// A mixed row's request takes its sample's lengths and class (and, in a block replay, its blocks:
// measured requests only, so warm-ups keep prompts of their own).
void TakeSample(const Mix& mix, const TrafficSample& s, int cls, bool measured, RequestShape* r) {
  r->in = s.input_tokens;
  r->out = s.output_tokens;
  r->cls = mix.classes[static_cast<size_t>(cls)].name;
  if (mix.blocks && measured) r->blocks = &s;
}

// A mixed row's requests take whole traffic samples in the mix's order: measured slots first (so
// their proportions do not depend on the warm-up count), warm-ups after them.
void ApplyMix(const Mix& mix, uint64_t seed, int warm_n, std::vector<RequestShape>* shapes) {
  const int n = static_cast<int>(shapes->size());
  if (mix.replay()) {  // measured (ramp first) in the trace's order, warm-ups from its end
    const auto size = static_cast<int64_t>(mix.order.size());
    for (int i = 0; i < n; ++i) {
      const int64_t k = i < warm_n ? size - 1 - i % size : i - warm_n;
      int cls = 0;
      const TrafficSample& s = ReplaySample(mix, k, &cls);
      TakeSample(mix, s, cls, i >= warm_n, &(*shapes)[static_cast<size_t>(i)]);
    }
    return;
  }
  const std::vector<int> seq = MixSequence(mix, seed, n);
  for (int i = 0; i < n; ++i) {
    const int slot = i < warm_n ? n - warm_n + i : i - warm_n;
    const int k = seq[static_cast<size_t>(slot)];
    TakeSample(mix, MixSample(mix, k, seed, slot), k, i >= warm_n,
               &(*shapes)[static_cast<size_t>(i)]);
  }
}

// A block session's turn as a sample of its prompt's blocks. Each top-level session of the trial
// and its sub-agents (a family) are one run of the trajectory, so their block ids are made the
// family's own: a cycled path shares nothing with its earlier run.
TrafficSample TurnBlocks(const TurnShape& turn, int family) {
  TrafficSample out;
  out.input_tokens = turn.input_tokens;
  out.output_tokens = turn.output_tokens;
  out.line = turn.line;
  out.block_tokens = turn.block_tokens;
  for (int64_t id : turn.block_ids) out.block_ids.push_back(id * 65536 + family);
  return out;
}

// The measured requests of a session row: every turn of SessionShapes, session by session.
void ShapeSessions(const Row& row, TrialPlan* plan, std::vector<RequestShape>* shapes) {
  std::vector<PathStart> starts;
  const auto sessions = SessionShapes(row, plan->level, plan->schedule_seed, &starts);
  const size_t before = shapes->size();
  std::vector<int> family(sessions.size());
  for (size_t k = 0; k < sessions.size(); ++k) {
    const int parent = starts[k].parent;
    family[k] = parent < 0 ? static_cast<int>(k) : family[static_cast<size_t>(parent)];
    for (size_t t = 0; t < sessions[k].size(); ++t) {
      const TurnShape& turn = sessions[k][t];
      RequestShape r;
      r.in = turn.input_tokens;
      r.out = turn.output_tokens;
      r.session = static_cast<int>(k);
      r.turn = static_cast<int>(t) + 1;
      r.cls = TurnClass(*row.sessions, r.turn);
      if (row.sessions->blocks) r.turn_blocks = TurnBlocks(turn, family[k]);
      r.think_s = t == 0 ? 0 : sessions[k][t - 1].think_s;
      if (t == 0) r.start = starts[k];
      shapes->push_back(r);
    }
  }
  plan->expected_measured = static_cast<int>(shapes->size() - before);
}

// Warm-ups first, then the measured (ramp first); lengths drawn per request.
std::vector<RequestShape> DrawShapes(const Row& row, TrialPlan* plan, int warm_n) {
  const int meas_n = plan->ramp_requests + plan->expected_measured;
  std::vector<RequestShape> shapes(static_cast<size_t>(warm_n + (row.sessions ? 0 : meas_n)));
  for (int i = 0; i < static_cast<int>(shapes.size()); ++i) {
    shapes[i].in = DrawLength(row.workload.input_tokens, row.workload.input_stddev_tokens,
                              plan->seed, 0x696e, i);
    shapes[i].out = DrawLength(row.workload.output_tokens, row.workload.output_stddev_tokens,
                               plan->seed, 0x6f7574, i);
  }
  if (row.sessions) ShapeSessions(row, plan, &shapes);
  return shapes;
}

// A prefix row: which measured prompts start with which prefix (their own part shortened by it);
// returns the prefixes' lengths.
std::vector<int64_t> ApplyPrefixes(const Row& row, uint64_t seed, int warm_n,
                                   std::vector<RequestShape>* shapes) {
  std::vector<int64_t> lengths;
  if (!row.prefix) return lengths;
  for (const PrefixGroup& g : row.prefix->groups)
    lengths.insert(lengths.end(), g.prefixes, g.tokens);
  const int meas_n = static_cast<int>(shapes->size()) - warm_n;
  const std::vector<int> slots = AssignPrefixes(*row.prefix, meas_n, seed);
  for (int i = 0; i < meas_n; ++i) {
    RequestShape& r = (*shapes)[static_cast<size_t>(warm_n + i)];
    r.prefix = slots[static_cast<size_t>(i)];
    if (r.prefix >= 0) r.in -= lengths[static_cast<size_t>(r.prefix)];
  }
  return lengths;
}

// A prompt that starts with a shared prefix: the prefix, a space, then its own unique text.
Prompt Prefixed(const Prompt& prefix, const Prompt& own, int64_t target_tokens) {
  Prompt p = own;
  p.text = prefix.text + " " + own.text;
  p.lead_word = prefix.lead_word;
  p.target_tokens = target_tokens;
  p.message_tokens = prefix.message_tokens + own.message_tokens;
  p.calibrated = prefix.calibrated && own.calibrated;
  p.sha256 = TextSha256Hex(p.text);
  return p;
}

// A block replay's measured request `m`: its blocks' texts in order, one space apart.
Prompt BlockPrompt(const BlockLayout& layout, size_t m, const std::vector<Prompt>& block_text,
                   int64_t target_tokens) {
  const std::vector<int>& blocks = layout.blocks[m];
  Prompt p = block_text[static_cast<size_t>(blocks.front())];
  p.target_tokens = target_tokens;
  for (size_t j = 1; j < blocks.size(); ++j) {
    const Prompt& b = block_text[static_cast<size_t>(blocks[j])];
    p.text += " " + b.text;
    p.message_tokens += b.message_tokens;
    p.calibrated = p.calibrated && b.calibrated;
  }
  p.sha256 = TextSha256Hex(p.text);
  return p;
}

// The cached tokens a block replay's measured request `m` declares: its shared leading blocks'.
int64_t SharedBlockTokens(const BlockLayout& layout, size_t m,
                          const std::vector<Prompt>& block_text) {
  int64_t tokens = 0;
  for (int j = 0; j < layout.shared[m]; ++j) {
    tokens +=
        block_text[static_cast<size_t>(layout.blocks[m][static_cast<size_t>(j)])].message_tokens;
  }
  return tokens;
}

// A block replay's layout over its measured requests (ramp first); empty for any other row.
BlockLayout LayOutPlanBlocks(const std::vector<RequestShape>& shapes) {
  std::vector<const TrafficSample*> requests;
  for (const RequestShape& r : shapes) {
    if (r.blocks) requests.push_back(r.blocks);
    if (r.turn_blocks) requests.push_back(&*r.turn_blocks);
  }
  return LayOutBlocks(requests);
}

// A prefix row's priming requests, one per prefix, after the warm-ups: each puts its prefix in
// the cache and asks for one token.
void AddPrimes(const Row& row, uint64_t seed, std::vector<Prompt> prefixes, TrialPlan* plan) {
  for (size_t j = 0; j < prefixes.size(); ++j) {
    PlanRequest r;
    r.warmup = true;
    r.prime = true;
    r.prefix = static_cast<int>(j);
    r.index = static_cast<int>(plan->warmup.size());
    r.id = "p" + std::to_string(j);
    r.prompt = std::move(prefixes[j]);
    r.max_tokens = 1;
    r.declared_cached_tokens = 0;
    r.body = ChatRequestBody(row, r.prompt.text, r.max_tokens, seed);
    plan->warmup.push_back(std::move(r));
  }
}

// The schedule of an open-loop plan: plan->send_offsets_ns (ramp first), ramp_requests, the
// measured interval and expected_measured.
Status ScheduleOpenLoop(const Row& row, TrialPlan* plan) {
  const OpenLoop& o = row.workload.open_loop;
  const ArrivalKind kind = row.workload.arrival_kind;
  const double rate = plan->rate_rps;
  if (!(rate > 0) || !std::isfinite(rate)) {
    return Status::InvalidArgument("row " + row.id + " has no rate at level " +
                                   std::to_string(plan->level) + " (rate_step_rps must be > 0)");
  }
  if (o.duration_s.has_value() == o.requests.has_value()) {
    return Status::InvalidArgument("row " + row.id +
                                   ": an open-loop interval needs exactly one of duration_s and "
                                   "requests");
  }
  const double expected = rate * o.ramp_s + (o.duration_s ? rate * *o.duration_s : *o.requests);
  if (expected > static_cast<double>(kMaxScheduledRequests)) {
    return Status::InvalidArgument(
        "row " + row.id + " at " + std::to_string(rate) + " requests/s would schedule about " +
        std::to_string(static_cast<int64_t>(expected)) + " requests, more than " +
        std::to_string(kMaxScheduledRequests) + " in one trial");
  }
  const uint64_t seed = plan->schedule_seed;
  const int64_t ramp_ns = std::llround(o.ramp_s * 1e9);
  std::vector<int64_t> offsets;
  if (kind == ArrivalKind::kReplay) {  // the row reader makes a replay count requests
    const double speed = ReplaySpeed(*row.mix, rate, o.ramp_s, *o.requests);
    const int64_t total = ReplayRampRequests(*row.mix, speed, ramp_ns) + *o.requests;
    for (int64_t k = 0; k < total; ++k) offsets.push_back(ReplayOffsetNs(*row.mix, speed, k));
  } else if (o.duration_s) {
    offsets =
        ArrivalOffsetsForDurationNs(kind, rate, plan->arrival_cv, o.ramp_s + *o.duration_s, seed);
  } else {
    const size_t ramp_n =
        o.ramp_s > 0
            ? ArrivalOffsetsForDurationNs(kind, rate, plan->arrival_cv, o.ramp_s, seed).size()
            : 0;
    offsets = ArrivalOffsetsNs(kind, rate, plan->arrival_cv,
                               static_cast<int64_t>(ramp_n) + *o.requests, seed);
  }
  const int64_t ramp_n =
      std::lower_bound(offsets.begin(), offsets.end(), ramp_ns) - offsets.begin();
  plan->ramp_requests = static_cast<int>(ramp_n);
  plan->expected_measured = static_cast<int>(offsets.size()) - plan->ramp_requests;
  plan->measured_start_ns = ramp_ns;
  plan->measured_end_ns = o.duration_s      ? std::llround((o.ramp_s + *o.duration_s) * 1e9)
                          : offsets.empty() ? ramp_ns
                                            : std::max(ramp_ns, offsets.back() + 1);
  plan->send_offsets_ns = std::move(offsets);
  return Status::Ok();
}

// The generator indices of a trial's `n` prompts: 0, 1, 2, ... skipping any whose lead word starts
// with a server token an earlier prompt already starts with.
Result<std::vector<int>> PickLeads(const PromptGenerator& gen, int n,
                                   const FirstTokenFn* first_token, TrialPlan* plan) {
  std::vector<int> out;
  out.reserve(n);
  if (first_token == nullptr) {
    for (int i = 0; i < n; ++i) out.push_back(i);
    return out;
  }
  std::map<int64_t, std::string> taken;  // first token -> the lead that took it
  for (int index = 0; static_cast<int>(out.size()) < n; ++index) {
    if (index >= 4 * n + 64) {
      return Status::FailedPrecondition(
          "only " + std::to_string(out.size()) + " of " + std::to_string(n) +
          " prompts could be given a first token of their own in the server's tokenizer");
    }
    const std::string lead = gen.LeadWord(index);
    Result<int64_t> token = (*first_token)(lead);
    if (!token.ok()) return token.status().WithContext("the first token of '" + lead + "'");
    auto [it, fresh] = taken.emplace(*token, lead);
    if (fresh) {
      out.push_back(index);
    } else {
      plan->skipped_leads.push_back(lead + ": token " + std::to_string(*token) + ", as " +
                                    it->second);
    }
  }
  return out;
}

}  // namespace

Result<uint64_t> TrialSeed(const Row& row, int trial_index, std::optional<uint64_t> override_seed) {
  if (override_seed) return *override_seed;
  if (trial_index < 1 || static_cast<size_t>(trial_index) > row.trials.seeds.size()) {
    return Status::InvalidArgument("row " + row.id + " has no seed for trial " +
                                   std::to_string(trial_index) + " (trials.seeds has " +
                                   std::to_string(row.trials.seeds.size()) +
                                   "); pass --seed to run it");
  }
  return row.trials.seeds[trial_index - 1];
}

std::string ChatRequestBody(const Row& row, const std::string& prompt, int64_t max_tokens,
                            uint64_t seed) {
  const Sampling& s = row.workload.sampling;
  nlohmann::json body = {
      {"model", row.identity.served_model_name},
      {"messages", nlohmann::json::array({{{"role", "user"}, {"content", prompt}}})},
      {"stream", true},
      {"stream_options", {{"include_usage", true}}},
      {"temperature", s.temperature},
      {"max_tokens", max_tokens},
      {"max_completion_tokens", max_tokens},
      {"ignore_eos", s.ignore_eos},
      {"seed", seed},
  };
  if (s.top_p) body["top_p"] = *s.top_p;
  return body.dump();
}

bool BuiltWhenSent(const Row& row, const PlanRequest& r) {
  return r.turn > 1 && row.sessions && !row.sessions->blocks;
}

std::string SessionTurnBody(const Row& row, const std::vector<std::string>& prompts,
                            const std::vector<std::string>& answers, int64_t max_tokens,
                            uint64_t seed) {
  nlohmann::json body = nlohmann::json::parse(ChatRequestBody(row, "", max_tokens, seed));
  nlohmann::json messages = nlohmann::json::array();
  for (size_t t = 0; t < prompts.size(); ++t) {
    messages.push_back({{"role", "user"}, {"content", prompts[t]}});
    if (t < answers.size()) messages.push_back({{"role", "assistant"}, {"content", answers[t]}});
  }
  body["messages"] = std::move(messages);
  return body.dump();
}

uint64_t CorpusSeed(uint64_t seed, QualifyPhase phase, LoadLevel level) {
  uint64_t x = SplitMix64(seed ^ 0x636f72707573ULL);  // "corpus"
  x = SplitMix64(x ^ Fnv1a64(PhaseName(phase)));
  return SplitMix64(x ^ static_cast<uint64_t>(level));
}

uint64_t ScheduleSeed(uint64_t seed, QualifyPhase phase, LoadLevel level) {
  uint64_t x = SplitMix64(seed ^ 0x7363686564756c65ULL);  // "schedule"
  x = SplitMix64(x ^ Fnv1a64(PhaseName(phase)));
  return SplitMix64(x ^ static_cast<uint64_t>(level));
}

namespace {

// Everything a plan says before its requests: the trial, its corpus, its arrival, its calibration.
Result<TrialPlan> PlanHeader(const Row& row, const PlanInputs& in) {
  if (in.level < 1) return Status::InvalidArgument("concurrency must be at least 1");
  Result<uint64_t> seed = TrialSeed(row, in.trial_index, in.seed);
  if (!seed.ok()) return seed.status();
  TrialPlan plan;
  plan.row_id = row.id;
  plan.engine = EngineName(row.identity.engine);
  plan.level = in.level;
  plan.trial_index = in.trial_index;
  plan.seed = *seed;
  plan.phase = in.phase;
  plan.corpus_seed = CorpusSeed(plan.seed, plan.phase, plan.level);
  plan.corpus_id = PhaseName(plan.phase) + std::string("/c") + std::to_string(plan.level) + "/s" +
                   std::to_string(plan.seed);
  plan.warmup_concurrency = std::max(1, row.warmup.concurrency);
  plan.arrival = row.workload.arrival_kind;
  if (row.open_loop()) {
    plan.rate_rps = RateAtLevel(row, in.level);
    plan.arrival_cv = row.workload.open_loop.cv;
    plan.schedule_seed = ScheduleSeed(plan.seed, plan.phase, plan.level);
    if (Status s = ScheduleOpenLoop(row, &plan); !s.ok()) return s;
  } else {
    plan.expected_measured = in.phase == QualifyPhase::kBaseline && in.level == 1
                                 ? BaselineRequests(row)
                                 : row.measured.RequestsAt(in.level);
    if (row.sessions) plan.schedule_seed = ScheduleSeed(plan.seed, plan.phase, plan.level);
  }
  if (in.counter) {
    plan.calibration = "tokenize";
    plan.calibration_note =
        "message lengths are exact in the server's tokenizer (its tokenize endpoint)";
  } else {
    plan.calibration = "word_count";
    plan.calibration_note =
        "the server has no tokenize endpoint: a word was taken as one token; the server's "
        "usage.prompt_tokens range in metrics.json is the authority on input length";
  }
  return plan;
}

// Request `i` of the plan's warm-ups then measured list, with its own prompt (a prefixed one is
// given its prefix in front).
PlanRequest MakeRequest(const Row& row, const TrialPlan& plan, int i, int warm_n,
                        const RequestShape& shape, Prompt own,
                        const std::vector<Prompt>& prefixes) {
  PlanRequest r;
  r.warmup = i < warm_n;
  r.index = r.warmup ? i : i - warm_n;
  r.ramp = !r.warmup && r.index < plan.ramp_requests;
  r.id = r.warmup ? "w" + std::to_string(r.index)
         : r.ramp ? "r" + std::to_string(r.index)
                  : "m" + std::to_string(r.index - plan.ramp_requests);
  const Prompt* prefix = shape.prefix < 0 ? nullptr : &prefixes[static_cast<size_t>(shape.prefix)];
  r.prompt = prefix ? Prefixed(*prefix, own, row.workload.input_tokens) : std::move(own);
  r.max_tokens = shape.out;
  r.traffic_class = shape.cls;
  r.prefix = shape.prefix;
  r.session = shape.session;
  r.turn = shape.turn;
  r.think_s = shape.think_s;
  r.parent_session = shape.start.parent;
  r.start_after_s = shape.start.after_s;
  if (row.prefix && !r.warmup) r.declared_cached_tokens = prefix ? prefix->message_tokens : 0;
  if (row.sessions && r.turn == 1) r.declared_cached_tokens = 0;
  if (!BuiltWhenSent(row, r)) r.body = ChatRequestBody(row, r.prompt.text, r.max_tokens, plan.seed);
  return r;
}

}  // namespace

Result<TrialPlan> MakeTrialPlan(const Row& row, const PlanInputs& in) {
  Result<TrialPlan> header = PlanHeader(row, in);
  if (!header.ok()) return header.status();
  TrialPlan plan = std::move(*header);
  const int warm_n = std::max(0, row.warmup.requests);
  std::vector<RequestShape> shapes = DrawShapes(row, &plan, warm_n);
  const int total = static_cast<int>(shapes.size());  // ramp requests included
  if (row.mix) ApplyMix(*row.mix, plan.corpus_seed, warm_n, &shapes);
  const std::vector<int64_t> prefix_len = ApplyPrefixes(row, plan.corpus_seed, warm_n, &shapes);
  const BlockLayout layout = LayOutPlanBlocks(shapes);
  // One generator: warm-ups take its first prompts, measurement (ramp first) the next ones, then
  // a prefix row's shared prefixes or a block replay's blocks (whose measured prompts are built
  // from them alone), so the sets are disjoint and every lead word is distinct.
  const int own_n = layout.blocks.empty() ? total : warm_n;
  std::vector<int64_t> in_len;
  for (int i = 0; i < own_n; ++i) in_len.push_back(shapes[static_cast<size_t>(i)].in);
  in_len.insert(in_len.end(), prefix_len.begin(), prefix_len.end());
  in_len.insert(in_len.end(), layout.block_tokens.begin(), layout.block_tokens.end());
  PromptGenerator gen(plan.corpus_seed);
  Result<std::vector<int>> indices =
      PickLeads(gen, static_cast<int>(in_len.size()), in.first_token, &plan);
  if (!indices.ok()) return indices.status();
  Result<std::vector<Prompt>> prompts = MakePrompts(gen, *indices, in_len, in.counter);
  if (!prompts.ok()) return prompts.status();
  const auto shared = prompts->begin() + own_n;
  std::vector<Prompt> prefixes(shared, shared + static_cast<std::ptrdiff_t>(prefix_len.size()));
  const std::vector<Prompt> block_text(shared + static_cast<std::ptrdiff_t>(prefix_len.size()),
                                       prompts->end());
  for (int i = 0; i < total; ++i) {
    const RequestShape& shape = shapes[static_cast<size_t>(i)];
    const auto m = static_cast<size_t>(i - warm_n);
    Prompt own = i < own_n ? std::move((*prompts)[static_cast<size_t>(i)])
                           : BlockPrompt(layout, m, block_text, shape.in);
    PlanRequest r = MakeRequest(row, plan, i, warm_n, shape, std::move(own), prefixes);
    if (i >= own_n) r.declared_cached_tokens = SharedBlockTokens(layout, m, block_text);
    (r.warmup ? plan.warmup : plan.measured).push_back(std::move(r));
  }
  AddPrimes(row, plan.seed, std::move(prefixes), &plan);
  return plan;
}

void RewordRequest(const Row& row, const TrialPlan& plan, int64_t words, int64_t estimated_tokens,
                   PlanRequest* r) {
  const int index = r->prompt.generator_index;
  PromptGenerator gen(plan.corpus_seed);
  r->prompt.text = gen.Text(index, std::max<int64_t>(1, words));
  r->prompt.lead_word = gen.LeadWord(index);
  r->prompt.message_tokens = estimated_tokens;
  r->prompt.calibrated = false;
  r->prompt.sha256 = TextSha256Hex(r->prompt.text);
  r->body = ChatRequestBody(row, r->prompt.text, r->max_tokens, plan.seed);
}

nlohmann::json PlanToJson(const TrialPlan& plan) {
  nlohmann::json warm = nlohmann::json::array(), meas = nlohmann::json::array();
  for (const auto& r : plan.warmup) warm.push_back(RequestToJson(r));
  for (size_t i = 0; i < plan.measured.size(); ++i) {
    nlohmann::json e = RequestToJson(plan.measured[i]);
    if (plan.open_loop()) {
      e["ramp"] = plan.measured[i].ramp;
      if (i < plan.send_offsets_ns.size()) e["send_offset_ns"] = plan.send_offsets_ns[i];
    }
    meas.push_back(std::move(e));
  }
  nlohmann::json j = {{"schema", kPlanSchema},
                      {"row_id", plan.row_id},
                      {"engine", plan.engine},
                      {"concurrency", plan.level},
                      {"trial", plan.trial_index},
                      {"seed", plan.seed},
                      {"phase", PhaseName(plan.phase)},
                      {"corpus", {{"id", plan.corpus_id}, {"generator_seed", plan.corpus_seed}}},
                      {"calibration", plan.calibration},
                      {"calibration_note", plan.calibration_note},
                      {"warmup_concurrency", plan.warmup_concurrency},
                      {"expected_measured", plan.expected_measured},
                      {"first_token_check", plan.first_token_check},
                      {"skipped_leads", plan.skipped_leads},
                      {"warmup", warm},
                      {"measured", meas}};
  if (plan.sessions())
    j["arrival"] = {{"kind", ArrivalKindName(plan.arrival)}, {"schedule_seed", plan.schedule_seed}};
  if (plan.open_loop()) {
    j["arrival"] = {{"kind", ArrivalKindName(plan.arrival)},
                    {"rate_rps", plan.rate_rps},
                    {"cv", plan.arrival_cv},
                    {"schedule_seed", plan.schedule_seed},
                    {"ramp_requests", plan.ramp_requests},
                    {"measured_start_ns", plan.measured_start_ns},
                    {"measured_end_ns", plan.measured_end_ns}};
  }
  return j;
}

namespace {

// Who, what and when the plan is for, and the arrival of a session or open-loop plan.
Status PlanHeaderFromJson(const nlohmann::json& j, TrialPlan* plan) {
  plan->row_id = j.at("row_id").get<std::string>();
  plan->engine = j.at("engine").get<std::string>();
  plan->level = j.at("concurrency").get<int>();
  plan->trial_index = j.at("trial").get<int>();
  plan->seed = j.at("seed").get<uint64_t>();
  std::optional<QualifyPhase> phase = ParsePhase(j.at("phase").get<std::string>());
  if (!phase) {
    return Status::InvalidArgument("plan.json: phase '" + j.at("phase").get<std::string>() +
                                   "' is not baseline, probe or confirm");
  }
  plan->phase = *phase;
  plan->corpus_id = j.at("corpus").at("id").get<std::string>();
  plan->corpus_seed = j.at("corpus").at("generator_seed").get<uint64_t>();
  plan->calibration = j.at("calibration").get<std::string>();
  plan->calibration_note = j.value("calibration_note", "");
  plan->warmup_concurrency = j.at("warmup_concurrency").get<int>();
  plan->expected_measured = j.at("expected_measured").get<int>();
  plan->first_token_check = j.value("first_token_check", "");
  plan->skipped_leads = j.value("skipped_leads", std::vector<std::string>{});
  if (j.contains("arrival")) {
    const auto& a = j.at("arrival");
    const std::string kind = a.at("kind").get<std::string>();
    std::optional<ArrivalKind> k = ParseArrivalKind(kind);
    if (!k) return Status::InvalidArgument("plan.json: arrival.kind '" + kind + "' is not a kind");
    plan->arrival = *k;
    plan->schedule_seed = a.at("schedule_seed").get<uint64_t>();
  }
  if (plan->open_loop()) {
    const auto& a = j.at("arrival");
    plan->rate_rps = a.at("rate_rps").get<double>();
    plan->arrival_cv = a.at("cv").get<double>();
    plan->ramp_requests = a.at("ramp_requests").get<int>();
    plan->measured_start_ns = a.at("measured_start_ns").get<int64_t>();
    plan->measured_end_ns = a.at("measured_end_ns").get<int64_t>();
  }
  return Status::Ok();
}

// One warm-up or measured entry; a measured entry of an open-loop plan also gives its send offset
// (appended to plan->send_offsets_ns).
PlanRequest RequestFromJson(const nlohmann::json& e, bool warmup, TrialPlan* plan) {
  PlanRequest r;
  r.warmup = warmup;
  if (!r.warmup && plan->open_loop()) {
    r.ramp = e.at("ramp").get<bool>();
    plan->send_offsets_ns.push_back(e.at("send_offset_ns").get<int64_t>());
  }
  r.id = e.at("id").get<std::string>();
  r.index = e.at("index").get<int>();
  r.max_tokens = e.at("max_tokens").get<int64_t>();
  r.traffic_class = e.value("class", "");
  r.prefix = e.value("prefix", -1);
  r.prime = e.value("prime", false);
  if (e.contains("declared_cached_tokens")) {
    r.declared_cached_tokens = e.at("declared_cached_tokens").get<int64_t>();
  }
  r.session = e.value("session", -1);
  r.turn = e.value("turn", 0);
  r.think_s = e.value("think_s", 0.0);
  r.parent_session = e.value("parent_session", -1);
  r.start_after_s = e.value("start_after_s", 0.0);
  r.body = e.at("body").get<std::string>();
  const auto& p = e.at("prompt");
  r.prompt.text = p.at("text").get<std::string>();
  r.prompt.sha256 = p.at("sha256").get<std::string>();
  r.prompt.lead_word = p.value("lead_word", "");
  r.prompt.generator_index = p.at("generator_index").get<int>();
  r.prompt.target_tokens = p.at("target_tokens").get<int64_t>();
  r.prompt.message_tokens = p.at("message_tokens").get<int64_t>();
  r.prompt.calibrated = p.value("calibrated", false);
  return r;
}

// The ramp comes first and the schedule never runs backwards, as MakeTrialPlan made them.
Status CheckOpenLoopOrder(const TrialPlan& plan) {
  const int n = static_cast<int>(plan.measured.size());
  if (plan.ramp_requests < 0 || plan.ramp_requests > n) {
    return Status::InvalidArgument("plan.json: arrival.ramp_requests " +
                                   std::to_string(plan.ramp_requests) + " of " + std::to_string(n) +
                                   " measured entries");
  }
  for (int i = 0; i < n; ++i) {
    if (plan.measured[i].ramp != (i < plan.ramp_requests)) {
      return Status::InvalidArgument("plan.json: measured entry " + plan.measured[i].id +
                                     " is out of place: the ramp requests come first");
    }
    if (i > 0 && plan.send_offsets_ns[i] < plan.send_offsets_ns[i - 1]) {
      return Status::InvalidArgument("plan.json: send_offset_ns of " + plan.measured[i].id +
                                     " is before the previous request's");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<TrialPlan> PlanFromJson(const nlohmann::json& j) {
  try {
    if (j.value("schema", "") != kPlanSchema) {
      return Status::InvalidArgument("plan.json: schema is not " + std::string(kPlanSchema));
    }
    TrialPlan plan;
    if (Status s = PlanHeaderFromJson(j, &plan); !s.ok()) return s;
    for (const char* key : {"warmup", "measured"}) {
      const bool warmup = std::string(key) == "warmup";
      for (const auto& e : j.at(key)) {
        PlanRequest r = RequestFromJson(e, warmup, &plan);
        (warmup ? plan.warmup : plan.measured).push_back(std::move(r));
      }
    }
    if (plan.open_loop()) {
      if (Status s = CheckOpenLoopOrder(plan); !s.ok()) return s;
    }
    return plan;
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("plan.json: ") + e.what());
  }
}

}  // namespace capq

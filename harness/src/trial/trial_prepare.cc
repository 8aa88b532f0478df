// A trial's preparation of the server and its plan: the server reachable and its identity pinned,
// idle, flushed and ready; the prompts planned with its tokenizer; the quiet period before the
// load.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "capq/clock.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/targets/target.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

bool Cancelled(const std::atomic<bool>* c) { return c && c->load(); }

bool IsCancel(const Status& st) { return st.code() == Status::Code::kCancelled; }

// The token that starts a prompt led by a given word, as the server prefills it: rendered through
// its chat template (the token after the template's shared prefix, measured on two one-letter
// messages), else the word tokenized alone (which can differ from the token in context).
struct FirstTokens {
  FirstTokenFn fn;
  std::string method;  // empty: the server tokenizes nothing, no check is possible
};
FirstTokens MakeFirstTokens(Target& target) {
  FirstTokens f;
  Result<TemplatePrefix> probe = target.MeasureTemplatePrefix("A", "Z");
  if (probe.ok()) {
    const size_t at = static_cast<size_t>(probe->tokens);
    f.fn = [&target, at](const std::string& lead) -> Result<int64_t> {
      Result<std::vector<int64_t>> ids = target.RenderedTokenIds(lead);
      if (!ids.ok()) return ids.status();
      if (ids->size() <= at) return Status::Internal("the rendered prompt ends in the template");
      return (*ids)[at];
    };
    f.method = target.RenderMethod() + ": the token after the template's " +
               std::to_string(probe->tokens) + " shared tokens";
    return f;
  }
  if (target.TokenIds("A").ok()) {
    f.fn = [&target](const std::string& lead) -> Result<int64_t> {
      Result<std::vector<int64_t>> ids = target.TokenIds(lead);
      if (!ids.ok()) return ids.status();
      if (ids->empty()) return Status::Internal("the server returned no token ids");
      return ids->front();
    };
    f.method = "the lead word tokenized alone (the server renders no chat template)";
  }
  return f;
}

// The tokens every prompt of this trial shares once the server applies its chat template: what
// verify-cold may allow, measured once per trial on two of the trial's own prompts.
void MeasureTemplatePrefix(Trial& t) {
  const TrialPlan& plan = *t.s.plan;
  std::vector<const PlanRequest*> two;
  for (const auto* list : {&plan.warmup, &plan.measured}) {
    for (const auto& r : *list) {
      if (two.size() < 2) two.push_back(&r);
    }
  }
  nlohmann::json j = nlohmann::json::object();
  if (two.size() < 2) {
    j["error"] = "fewer than two prompts in the plan";
  } else {
    Result<TemplatePrefix> p =
        t.target->MeasureTemplatePrefix(two[0]->prompt.text, two[1]->prompt.text);
    j["requests"] = {two[0]->id, two[1]->id};
    if (p.ok()) {
      t.ev.template_prefix_tokens = p->tokens;
      t.ev.template_overhead_tokens = p->prompt_tokens - two[0]->prompt.message_tokens;
      j["tokens"] = p->tokens;
      j["rendered_prompt_tokens"] = p->prompt_tokens;
      j["overhead_tokens"] = *t.ev.template_overhead_tokens;
      j["method"] = p->method;
    } else {
      j["error"] = p.status().message();
    }
  }
  t.s.identity["template_prefix"] = j;
}

}  // namespace

// Reachable and ready (a probe that generates nothing), then identity: pinned vs running.
PhaseEnd PinIdentity(Trial& t) {
  const Row& row = *t.s.row;
  const TrialOptions& opt = *t.s.opt;
  Result<uint64_t> seed = TrialSeed(row, opt.trial_index, opt.seed);
  if (!seed.ok()) return CouldNotRun(t.s, seed.status().message());
  t.s.ctx.seed = *seed;
  if (opt.level < 1) return CouldNotRun(t.s, "concurrency must be at least 1");
  Result<std::unique_ptr<Target>> target = MakeTarget(row.identity, t.topts);
  if (!target.ok()) return CouldNotRun(t.s, target.status().message());
  t.target = std::move(*target);
  t.setup_deadline = NowNs() + static_cast<MonoNs>(opt.setup_timeout_s * 1e9);

  Progress(opt, "probing " + t.target->base_url());
  Result<std::string> probe = t.target->Probe(t.setup_deadline, opt.cancel);
  if (!probe.ok()) {
    return CouldNotRun(t.s, "server unreachable: " + probe.status().message(),
                       IsCancel(probe.status()));
  }
  Result<ServerFacts> facts = t.target->Facts();
  if (!facts.ok()) return CouldNotRun(t.s, "server info unavailable: " + facts.status().message());
  nlohmann::json& info = t.s.server_info;
  info["documents"] = facts->documents;
  info["limits"] = facts->values;
  info["served_models"] = facts->served_models;
  info["model_path"] = facts->model_path;
  info["version"] = facts->version;
  // What the server must show (a real engine's running image, the digest of a sim row's profile),
  // as the target finds it on this side.
  Result<IdentityInputs> id_in = t.target->LocalIdentity();
  if (!id_in.ok()) return CouldNotRun(t.s, id_in.status().message());
  if (row.identity.engine == Engine::kSim && t.effective.identity.served_model_name.empty()) {
    t.effective.identity.served_model_name = id_in->sim_served_model_name;
  }
  IdentityCheck check = CheckIdentity(row, *facts, *id_in);
  t.s.identity["check"] = check.ToJson();
  if (!check.ok()) return CouldNotRun(t.s, check.Summary());
  t.ev.served_model_name = t.effective.identity.served_model_name;
  t.ev.cache_counter = t.target->CacheCounter(*facts);
  t.s.identity["served_model_name"] = t.ev.served_model_name;
  t.s.identity["cache_counter"] = CacheCounterRuleToJson(t.ev.cache_counter);
  return std::nullopt;
}

// Idle, flushed (with the engine's advice for a flush that leaves prompts behind), ready.
PhaseEnd FlushAndProbe(Trial& t) {
  const Row& row = *t.s.row;
  const TrialOptions& opt = *t.s.opt;
  Target& target = *t.target;
  Progress(opt, "waiting for idle");
  Result<std::string> idle = target.WaitIdle(t.setup_deadline, opt.cancel);
  if (!idle.ok()) return CouldNotRun(t.s, idle.status().message(), IsCancel(idle.status()));
  t.s.identity["idle"] = *idle;
  if (row.cache.flush_before_trial) {
    Progress(opt, "flushing the prefix cache");
    Result<FlushResult> flush = target.Flush(t.setup_deadline, opt.cancel);
    if (!flush.ok()) return CouldNotRun(t.s, flush.status().message(), IsCancel(flush.status()));
    t.ev.cold_hint = target.ColdHint();
    t.s.identity["flush"] = {{"method", flush->method},
                             {"attempts", flush->attempts},
                             {"status_proves_nothing", flush->status_proves_nothing},
                             {"note", flush->note},
                             {"cold_hint", t.ev.cold_hint}};
  } else {
    t.s.identity["flush"] = {{"method", "none"},
                             {"note", "the row sets flush_before_trial: false"}};
  }
  if (row.reuse()) {
    t.ev.miss_hint = target.MissHint();
    if (!t.ev.miss_hint.empty()) t.s.identity["cache_misses"] = {{"explained_by", t.ev.miss_hint}};
  }
  Result<std::string> ready = target.Probe(t.setup_deadline, opt.cancel);
  if (!ready.ok()) {
    return CouldNotRun(t.s, "server not ready after the flush: " + ready.status().message(),
                       IsCancel(ready.status()));
  }
  t.s.identity["readiness_probe"] = *ready;
  t.s.identity["readiness_probe_generates"] = false;
  return std::nullopt;
}

// The plan, calibrated with the server's own tokenizer when it has one.
PhaseEnd PlanPrompts(Trial& t) {
  const TrialOptions& opt = *t.s.opt;
  Target& target = *t.target;
  Progress(opt, "planning prompts");
  TokenCounter counter = [&target](const std::string& text) { return target.CountTokens(text); };
  const TokenCounter* counter_ptr = &counter;
  Result<int64_t> tok_check = opt.ignore_tokenize_endpoint
                                  ? Result<int64_t>(Status::Unimplemented("ignored by option"))
                                  : target.CountTokens("Hello world");
  if (!tok_check.ok()) {
    if (tok_check.status().code() != Status::Code::kUnimplemented) {
      return CouldNotRun(t.s, "tokenize: " + tok_check.status().message());
    }
    counter_ptr = nullptr;
  }
  if (counter_ptr == nullptr && t.effective.reuse()) {
    return CouldNotRun(t.s,
                       "the row declares cache reuse, whose prefixes and conversations are sized "
                       "in the server's tokens: it needs the server's tokenize endpoint");
  }
  // No two prompts may share a first token (else they share a cacheable prefix beyond the
  // template's): distinct words can, when the tokenizer splits them (a real llama.cpp server's
  // Phi-3 vocabulary cached 5 tokens, not 4, for two such prompts of one trial).
  FirstTokens first = MakeFirstTokens(target);
  PlanInputs pin;
  pin.level = opt.level;
  pin.trial_index = opt.trial_index;
  pin.seed = opt.seed;
  pin.phase = opt.phase;
  pin.counter = counter_ptr;
  pin.first_token = first.method.empty() ? nullptr : &first.fn;
  Result<TrialPlan> plan = MakeTrialPlan(t.effective, pin);
  if (!plan.ok()) return CouldNotRun(t.s, "planning prompts: " + plan.status().message());
  t.s.plan = std::move(*plan);
  t.s.plan->first_token_check =
      first.method.empty() ? "not checked: the server tokenizes nothing" : first.method;
  t.s.identity["first_token_check"] = {{"method", t.s.plan->first_token_check},
                                       {"skipped_leads", t.s.plan->skipped_leads}};
  MeasureTemplatePrefix(t);
  return std::nullopt;
}

PhaseEnd QuietPeriod(Trial& t) {
  const Row& row = *t.s.row;
  const TrialOptions& opt = *t.s.opt;
  if (!opt.skip_quiet_period && row.trials.quiet_period_s > 0) {
    const double wall_s = row.trials.quiet_period_s / t.scale;
    char quiet[96];
    std::snprintf(quiet, sizeof quiet, "quiet period %g s (%g s wall)", row.trials.quiet_period_s,
                  wall_s);
    Progress(opt, quiet);
    const MonoNs end = NowNs() + static_cast<MonoNs>(wall_s * 1e9);
    while (NowNs() < end && !Cancelled(opt.cancel)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    t.s.identity["quiet_period"] = {{"virtual_s", row.trials.quiet_period_s}, {"wall_s", wall_s}};
  } else {
    t.s.identity["quiet_period"] = {{"skipped", true}};
  }
  if (Cancelled(opt.cancel)) return CouldNotRun(t.s, "interrupted before any load", true);
  return std::nullopt;
}

}  // namespace capq::internal

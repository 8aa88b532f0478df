// RowToYaml: a resolved row as the YAML the loader reads back to the same values.
#include <algorithm>
#include <ostream>
#include <sstream>

#include "capq/model/row_loader.h"
#include "row_reader_internal.h"

namespace capq {
namespace {

using row_reader::kSchema;
using row_reader::Num;

void AppendQuoted(std::string* out, const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          *out += "\\x";
          *out += kHex[c >> 4];
          *out += kHex[c & 15];
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

std::string Quoted(const std::string& s) {
  std::string out;
  AppendQuoted(&out, s);
  return out;
}

std::string GateYaml(const Gate& g, const std::string& on_value) {
  if (g.enabled) return on_value;
  return "{enabled: false, reason: " + Quoted(g.reason_off) + "}";
}

// "reuse_tolerance: {...}", one flow mapping.
std::string ReuseToleranceFlow(const ReuseTolerance& t) {
  return "reuse_tolerance: {tokens: " + std::to_string(t.tokens) +
         ", ratio_pct: " + Num(t.ratio_pct) +
         (t.misses_pct > 0 ? ", misses_pct: " + Num(t.misses_pct) : std::string()) + "}";
}

std::string ReuseToleranceYaml(const ReuseTolerance& t) {
  return "  " + ReuseToleranceFlow(t) + "\n";
}

std::string ReuseYaml(const Row& r) {
  std::ostringstream o;
  if (r.prefix) {
    o << "prefix:\n  groups:\n";
    for (const PrefixGroup& g : r.prefix->groups) {
      o << "    - {prefixes: " << g.prefixes << ", tokens: " << g.tokens
        << ", share: " << Num(g.share) << "}\n";
    }
    o << ReuseToleranceYaml(r.prefix->tolerance);
  }
  if (r.sessions) {
    const Sessions& s = *r.sessions;
    o << "sessions:\n";
    if (!s.trajectory.empty()) {
      o << "  trajectory: " << Quoted(s.trajectory) << "\n";
      if (s.token_scale != 1 || s.time_scale != 1 || s.context_tokens) {
        o << "  scale: {tokens: " << Num(s.token_scale) << ", times: " << Num(s.time_scale);
        if (s.context_tokens) o << ", context_tokens: " << *s.context_tokens;
        o << "}\n";
      }
      if (s.blocks) o << "  prefix_blocks: {merge: " << s.blocks->merge << "}\n";
      if (!s.gate_every_turn) o << "  gate_turns: first_and_later\n";
    } else {
      o << "  turns: " << s.turns << "\n  user_tokens: " << s.user_tokens
        << "\n  think_time: {distribution: " << s.think << ", mean_s: " << Num(s.think_mean_s)
        << "}\n";
    }
    o << ReuseToleranceYaml(s.tolerance);
  }
  return o.str();
}

void IdentityYaml(const Identity& id, std::ostream& o) {
  o << "identity:\n";
  o << "  engine: " << EngineName(id.engine) << "\n";
  if (id.engine == Engine::kSim) {
    if (!id.image.empty()) o << "  image: " << Quoted(id.image) << "\n";
    o << "  sim_profile: " << Quoted(id.sim_profile) << "\n";
    o << "  time_scale: " << Num(id.time_scale) << "\n";
    if (id.sim_dialect != Identity{}.sim_dialect) {  // the default dialect is not written
      o << "  sim_dialect: " << EngineName(id.sim_dialect) << "\n";
    }
    if (id.sim_varied) o << "  sim_variations: varied\n";
  } else {
    o << "  image: " << Quoted(id.image) << "\n";
  }
  if (!id.model.empty()) o << "  model: " << Quoted(id.model) << "\n";
  if (!id.model_revision.empty()) o << "  model_revision: " << Quoted(id.model_revision) << "\n";
  if (!id.served_model_name.empty()) {
    o << "  served_model_name: " << Quoted(id.served_model_name) << "\n";
  }
  if (!id.hardware.empty()) o << "  hardware: " << Quoted(id.hardware) << "\n";
  if (!id.driver.empty()) o << "  driver: " << Quoted(id.driver) << "\n";
  if (!id.server_expect.empty()) {
    o << "  server_expect:\n";
    for (const auto& [k, v] : id.server_expect) {
      bool numeric = !v.empty() &&
                     std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
      o << "    " << k << ": " << (numeric ? v : Quoted(v)) << "\n";
    }
  }
}

void WorkloadYaml(const Row& r, std::ostream& o) {
  const Workload& w = r.workload;
  o << "workload:\n";
  o << "  input_tokens: " << w.input_tokens << "\n";
  o << "  input_stddev_tokens: " << w.input_stddev_tokens << "\n";
  o << "  output_tokens: " << w.output_tokens << "\n";
  o << "  output_stddev_tokens: " << w.output_stddev_tokens << "\n";
  o << "  sampling: {temperature: " << Num(w.sampling.temperature)
    << ", ignore_eos: " << (w.sampling.ignore_eos ? "true" : "false");
  if (w.sampling.top_p) o << ", top_p: " << Num(*w.sampling.top_p);
  o << "}\n";
  o << "  arrival: {kind: " << ArrivalKindName(w.arrival_kind);
  if (r.open_loop()) {
    o << ", rate_step_rps: " << Num(w.open_loop.rate_step_rps);
    if (w.arrival_kind == ArrivalKind::kGamma) o << ", cv: " << Num(w.open_loop.cv);
  }
  o << "}\n";
  o << "  prompt_corpus: " << w.prompt_corpus << "\n";
}

void CacheAndWarmupYaml(const Row& r, std::ostream& o) {
  o << "cache:\n";
  o << "  prefix_cache: " << (r.cache.prefix_cache ? "enabled" : "disabled") << "\n";
  o << "  flush_before_trial: " << (r.cache.flush_before_trial ? "true" : "false") << "\n";
  o << "  verify_cold: " << (r.cache.verify_cold ? "true" : "false") << "\n";
  o << "warmup: {requests: " << r.warmup.requests << ", concurrency: " << r.warmup.concurrency
    << "}\n";
}

// The measured interval, and for an open-loop row its stability gates.
void MeasuredYaml(const Row& r, std::ostream& o) {
  if (r.open_loop()) {
    const OpenLoop& ol = r.workload.open_loop;
    o << "measured: {";
    if (ol.duration_s) o << "duration_s: " << Num(*ol.duration_s) << ", ";
    if (ol.requests) o << "requests: " << *ol.requests << ", ";
    o << "ramp_s: " << Num(ol.ramp_s) << "}\n";
    const Stability& st = r.stability;
    o << "stability:\n";
    o << "  queue_growth_pct: " << Num(st.queue_growth_pct) << "\n";
    o << "  queue_slack: " << Num(st.queue_slack) << "\n";
    o << "  latency_drift_factor: " << Num(st.latency_drift_factor) << "\n";
    o << "  max_send_lateness_ms: " << Num(st.max_send_lateness_ms) << "\n";
  } else {
    o << "measured: {min_requests: " << r.measured.min_requests
      << ", per_concurrency: " << r.measured.per_concurrency << "}\n";
  }
}

void SloGateYaml(const SloGate& g, std::ostream& o) {
  o << "{metric: " << SloMetricName(g.metric) << ", percentile: " << Num(g.percentile)
    << ", below_ms: " << Num(g.below_ms) << "}\n";
}

// slo, slo_tiers and percentile_method.
void SloYaml(const Row& r, std::ostream& o) {
  o << "slo:\n";
  for (const auto& g : r.slo) {
    o << "  - ";
    SloGateYaml(g, o);
  }
  if (!r.slo_tiers.empty()) o << "slo_tiers:\n";
  for (const SloTier& t : r.slo_tiers) {
    o << "  - name: " << t.name << "\n    slo:\n";
    for (const auto& g : t.slo) {
      o << "      - ";
      SloGateYaml(g, o);
    }
  }
  o << "percentile_method: " << PercentileMethodName(r.percentile_method) << "\n";
}

void CorrectnessYaml(const Correctness& c, std::ostream& o) {
  o << "correctness:\n";
  o << "  status_200: " << GateYaml(c.status_200, "true") << "\n";
  o << "  no_cancellations: " << GateYaml(c.no_cancellations, "true") << "\n";
  o << "  exact_completion_tokens: " << GateYaml(c.exact_completion_tokens, "true") << "\n";
  if (c.finish_reason.enabled) {
    o << "  finish_reason: " << c.finish_reason_value << "\n";
  } else {
    o << "  finish_reason: {enabled: false, reason: " << Quoted(c.finish_reason.reason_off)
      << ", value: " << c.finish_reason_value << "}\n";
  }
  o << "  nonempty_deltas: " << GateYaml(c.nonempty_deltas, "true") << "\n";
  o << "  unique_prompts: " << GateYaml(c.unique_prompts, "true") << "\n";
  o << "  unique_outputs: " << GateYaml(c.unique_outputs, "true") << "\n";
  o << "  warmup_disjoint: " << GateYaml(c.warmup_disjoint, "true") << "\n";
  o << "  text_recount: " << GateYaml(c.text_recount, "true") << "\n";
  o << "  text_recount_tolerance_pct: " << Num(c.text_recount_tolerance_pct) << "\n";
  o << "  prompt_tokens: " << GateYaml(c.prompt_tokens, "true") << "\n";
  o << "  prompt_tokens_tolerance: " << c.prompt_tokens_tolerance << "\n";
  o << "  model_name: " << GateYaml(c.model_name, "true") << "\n";
  o << "  fail_fast: " << GateYaml(c.fail_fast, "true") << "\n";
  o << "  stall_timeout_s: " << Num(c.stall_timeout_s) << "\n";
}

// trials, request_timeout_s and confidence.
void TrialsYaml(const Row& r, std::ostream& o) {
  o << "trials:\n";
  o << "  count: " << r.trials.count << "\n";
  o << "  quiet_period_s: " << Num(r.trials.quiet_period_s) << "\n";
  o << "  seeds: [";
  for (size_t i = 0; i < r.trials.seeds.size(); ++i) o << (i ? ", " : "") << r.trials.seeds[i];
  o << "]\n";
  o << "request_timeout_s: " << Num(r.request_timeout_s) << "\n";
  if (r.confidence) o << "confidence: " << Num(*r.confidence) << "\n";
}

void ExpectYaml(const Expect& x, std::ostream& o) {
  if (!x.cmax && !x.rmax_rps && !x.baseline) return;
  o << "expect:\n";
  if (x.cmax) o << "  cmax: " << *x.cmax << "\n";
  if (x.rmax_rps) o << "  rmax_rps: " << Num(*x.rmax_rps) << "\n";
  if (x.baseline) {
    const Baseline& b = *x.baseline;
    o << "  baseline:\n";
    if (b.ttft_p50_ms) o << "    ttft_p50_ms: " << Num(*b.ttft_p50_ms) << "\n";
    if (b.itl_p50_ms) o << "    itl_p50_ms: " << Num(*b.itl_p50_ms) << "\n";
    if (b.prompt_tokens) o << "    prompt_tokens: " << *b.prompt_tokens << "\n";
    o << "    tolerance_pct: " << Num(b.tolerance_pct) << "\n";
  }
}

void ProvenanceYaml(const Provenance& p, std::ostream& o) {
  if (p.source.empty() && p.qualified_on.empty() && p.notes.empty()) return;
  o << "provenance:\n";
  if (!p.qualified_on.empty()) o << "  qualified_on: " << Quoted(p.qualified_on) << "\n";
  o << "  source: " << Quoted(p.source) << "\n";
  if (!p.notes.empty()) o << "  notes: " << Quoted(p.notes) << "\n";
}

}  // namespace

std::string MixYaml(const Mix& mix) {
  std::ostringstream o;
  o << "mix:\n  traffic: " << Quoted(mix.traffic) << "\n";
  const LengthFit& fit = mix.lengths;
  if (fit.Declared()) {
    o << "  lengths: {scale: " << Num(fit.scale);
    if (fit.cap_input_tokens) o << ", cap_input_tokens: " << *fit.cap_input_tokens;
    if (fit.context_tokens) o << ", context_tokens: " << *fit.context_tokens;
    o << "}   # " << fit.scaled << " samples scaled, " << fit.capped << " capped\n";
  }
  if (mix.blocks) {
    o << "  prefix_blocks: {" << ReuseToleranceFlow(mix.blocks->tolerance) << "}   # blocks of "
      << mix.blocks->block_tokens << " tokens as sent\n";
  }
  o << "  classes:\n";
  for (const MixClass& c : mix.classes) {
    o << "    - {name: " << c.name;
    if (!mix.replay()) o << ", share: " << c.share;
    if (c.max_input_tokens) o << ", max_input_tokens: " << *c.max_input_tokens;
    if (c.max_output_tokens) o << ", max_output_tokens: " << *c.max_output_tokens;
    if (!c.max_input_tokens && !c.max_output_tokens) o << ", match: " << Quoted(c.match);
    o << "}\n";
  }
  return o.str();
}

std::string RowToYaml(const Row& r) {
  std::ostringstream o;
  o << "schema: " << kSchema << "\n";
  o << "id: " << Quoted(r.id) << "\n";
  if (!r.title.empty()) o << "title: " << Quoted(r.title) << "\n";
  IdentityYaml(r.identity, o);
  WorkloadYaml(r, o);
  CacheAndWarmupYaml(r, o);
  MeasuredYaml(r, o);
  SloYaml(r, o);
  CorrectnessYaml(r.correctness, o);
  TrialsYaml(r, o);
  ExpectYaml(r.expect, o);
  ProvenanceYaml(r.provenance, o);
  if (r.mix) o << MixYaml(*r.mix);
  o << ReuseYaml(r);
  return o.str();
}

}  // namespace capq

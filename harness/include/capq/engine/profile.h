// A simulator profile: the limits and cost model of one simulated serving engine
// (rows/sim/profiles/).
#pragma once

#include <cstdint>
#include <string>

#include "capq/status.h"

namespace capq::engine {

enum class SchedulePolicy { kPrefillFirst, kDecodeFirst };  // SGLang-like, vLLM-like

// Where reusable KV lives. kRadix: one shared prefix tree in the paged pool (SGLang, vLLM).
// kSlots: llama.cpp's model, one private context per slot plus a host-RAM prompt cache (engine.h).
enum class CacheModel { kRadix, kSlots };

struct EngineProfile {
  std::string name;  // "small", "b70_twin"
  std::string served_model_name = "sim-model";
  std::string model_path = "capq/sim-model";
  // Limits, under SGLang's names.
  int64_t max_total_tokens = 262144;  // paged token pool
  int page_size = 64;
  int max_running_requests = 9;         // effective limit after the pool check
  int64_t chunked_prefill_size = 4096;  // prefill token budget per step
  int64_t context_length = 262144;
  SchedulePolicy policy = SchedulePolicy::kPrefillFirst;
  bool mixed_chunks = false;  // decode rows ride along with a prefill chunk
  bool prefix_cache = true;
  // Step time = b0 + b1*prefill_tokens + b2*sum(chunk^2) + b3*decode_rows + b4*decode_kv_tokens
  //             + overhead, in seconds of virtual time.
  double b0_s = 0.002;
  double b1_s_per_prefill_token = 2.5e-4;
  double b2_s_per_chunk_token_sq = 0;
  double b3_s_per_decode_row = 5e-4;
  double b4_s_per_decode_kv_token = 1e-8;
  double overhead_s = 0.0005;
  // Speculative decoding: k draft tokens per step, mean accepted tau in [0, k]; 0 = off.
  int spec_draft_tokens = 0;
  double spec_accept_mean = 0;
  // Multiplicative run-to-run noise on every step time: uniform in [1 - jitter, 1 + jitter].
  double step_jitter = 0;
  uint64_t jitter_seed = 1;
  // Multiplicative noise on every step of one cache epoch (the span between two flushes), uniform
  // in [1 - epoch_jitter, 1 + epoch_jitter]. A capacity trial flushes first, so this is run-to-run
  // noise that does not average out over a trial's thousands of steps the way step_jitter does.
  double epoch_jitter = 0;
  // Tokens the chat template adds around the user message; the first `template_prefix_tokens` of
  // them are identical for every prompt (so even a cold cache reports them as cached after one
  // request).
  int chat_template_tokens = 51;
  int template_prefix_tokens = 3;
  // Without ignore_eos a stream stops early at a seeded length in [eos_min_tokens, max_tokens].
  int eos_min_tokens = 1;
  // The first template token is a BOS token, rendered as "<s>" and left out of the template text
  // (/apply-template), as llama.cpp's Phi-3 template does with {{ bos_token }} (conformance INDEX,
  // "Template prefix and cached_tokens"; recordings 10 and 12). It still counts in
  // chat_template_tokens and template_prefix_tokens.
  bool template_bos = false;
  // Tokens the template puts after each assistant message of a multi-turn chat: the end of that
  // turn and the next role's header (sim/tokenizer.h). 5 is ChatML's (Qwen) "<|im_end|>", "\n",
  // "<|im_start|>", "user", "\n"; Phi-3's "<|end|>\n<|user|>\n" (conformance/llamacpp recording
  // 11) is a similar run. A chat without an assistant message never has them.
  int chat_turn_tokens = 5;

  // llama.cpp's cache (conformance/llamacpp/INDEX.md, "Template prefix and cached_tokens" and
  // "Host-RAM prompt cache"; tools/server/ is ts/ below, commit d32676d77):
  //  - cache_model slots: max_running_requests slots (-np), each with context_length tokens of its
  //    own (n_ctx per slot); max_total_tokens and page_size do not limit admission.
  //  - slot_prompt_similarity: a task goes to the idle slot whose cached tokens share the longest
  //    prefix with its prompt when lcp / prompt_len exceeds this, else to the least recently used
  //    idle slot (--slot-prompt-similarity, default 0.10; ts/server-context.cpp:1600-1676).
  //  - host_prompt_cache: --cache-ram (default 8192 MiB; false = --cache-ram 0). Every task
  //    launch copies each idle slot's tokens into it, and a slot takes back the entry that best
  //    matches its new prompt (ts/server-context.cpp:2463-2478, ts/server-task.cpp:1642-1850).
  //    The sim's copy has no size limit: 8 GiB holds millions of tokens of a small model.
  //  - slot_actions: --slot-save-path is set, so POST /slots/{id}?action=... works; without it
  //    every slot action answers 501 (ts/server-context.cpp:4578-4583).
  CacheModel cache_model = CacheModel::kRadix;
  double slot_prompt_similarity = 0.10;
  bool host_prompt_cache = true;
  bool slot_actions = true;
  // An idle engine starts its first step this long after the request that wakes it, and requests
  // that arrive in between share that step: llama.cpp's time from a request to its slot start
  // (HTTP parsing, tokenizing, the task queue), which let two prompts sent together share one
  // prefill batch (conformance 70/71). 0: the step starts at the arrival.
  double idle_start_delay_s = 0;

  // The serving frontend's launch settings (the sim's dialect reports them as its engine does):
  //  - stream_interval: a content delta carries up to this many tokens, the first token alone
  //    (SGLang and vLLM --stream-interval; sim/variations.h);
  //  - cache_report: SGLang --enable-cache-report. Off, every usage says
  //    "prompt_tokens_details": null, whatever was cached (recorded: Hunyuan, cache report off);
  //  - prompt_tokens_details: vLLM --enable-prompt-tokens-details. Off, usage has no details;
  //  - metrics: /metrics is served (SGLang --enable-metrics; vLLM and llama.cpp --metrics). Off,
  //    it answers 404 and the server's cache counters are unknown to a client.
  int stream_interval = 1;
  bool cache_report = true;
  bool prompt_tokens_details = true;
  bool metrics = true;

  // Not a profile key: the serving dialect sets it. > 0: the radix cache holds and serves whole
  // blocks of this many tokens only, as vLLM's block-hash prefix cache does: a hit is
  // floor(min(match, prompt - 1) / block) blocks (vllm/v1/core/kv_cache_manager.py,
  // get_computed_blocks: max_cache_hit_length = num_tokens - 1, "the computed blocks must be
  // full"), and a finished request leaves only its full blocks. The vLLM dialect sets it to
  // page_size (vLLM's --block-size). 0: token granularity (SGLang with --page-size 1). Outside
  // the canonical JSON, so it never changes a digest.
  int cache_block_tokens = 0;
};

// Reads a profile YAML file; every error names the file, line and key. Unknown keys are errors.
// Keys are the field names above (flat mapping); `policy` is "prefill_first" or "decode_first".
// Fields left out keep their defaults; `name` is required.
Result<EngineProfile> LoadProfile(const std::string& path);
// The same from YAML text; `source` names it in error messages (e.g. the path).
Result<EngineProfile> ParseProfile(const std::string& yaml_text, const std::string& source);
// Range checks shared by the loader and by code that builds profiles in memory.
Status ValidateProfile(const EngineProfile& p);

const char* SchedulePolicyName(SchedulePolicy policy);  // "prefill_first" | "decode_first"
const char* CacheModelName(CacheModel model);           // "radix" | "slots"

// Canonical JSON of every field (sorted keys), and "sha256:<hex>" of it: the simulator's identity
// digest, so a changed profile fails a pinned row like a retagged image. The fields from
// template_bos on appear only when they differ from their defaults, so the profiles that predate
// them keep the digests their rows pin.
std::string CanonicalProfileJson(const EngineProfile& p);
std::string ProfileDigest(const EngineProfile& p);

}  // namespace capq::engine

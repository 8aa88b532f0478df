// The simulated engine model: a pure discrete-event continuous-batching scheduler in virtual time.
// No I/O, no clocks, no threads: the caller says what time it is and collects events. The same code
// drives the live simulated server (capq/sim/server.h) and offline prediction (predict.h), so it
// sits in a layer of its own below both, over the model and core layers only.
//
// Semantics (docs/simulator.md, "The simulated engine"):
//  - Arrivals join an FCFS waiting queue. At each step start the scheduler admits from the head of
//  the
//    queue while running < max_running_requests and the paged token pool can reserve
//    prompt + max_new_tokens (rounded up to pages); admission stops at the first request that does
//    not fit (FCFS, no overtaking).
//  - A prompt's uncached tokens are prefilled in chunks of at most chunked_prefill_size per step
//  (the
//    budget is shared by every prefilling row in that step). The step that finishes a prompt's
//    prefill emits its first output token.
//  - kPrefillFirst: a step with prefill work does no decode (unless mixed_chunks); kDecodeFirst:
//  every
//    step decodes all running decode rows and fills the remaining budget with prefill.
//  - A decode row emits 1 token per step, or with speculative decoding 1 + accepted draft tokens
//    (seeded, mean spec_accept_mean, at most spec_draft_tokens), never past max_new_tokens.
//  - A step takes b0 + b1*prefill_tokens + b2*sum(chunk^2) + b3*decode_rows + b4*decode_kv_tokens +
//    overhead (times jitter); it starts when the previous one ends, or at the first arrival when
//    idle.
//  - Prefix cache (when enabled), cache_model radix: a radix cache of finished requests' token ids,
//    prompt + output - 1 (the last output token was sampled but never fed back, so it has no KV;
//    SGLang's RadixCache.cache_finished_req inserts (origin_input_ids + output_ids) cut to
//    kv_committed_len, python/sglang/srt/mem_cache/radix_cache.py at 006b0e3d). A new request
//    skips prefill of its longest cached prefix and reports it as cached_tokens, so a chat's next
//    turn finds the previous turn's prompt and output. Flush clears it when idle. With
//    cache_block_tokens (vLLM's blocks) hits and inserts are cut to whole blocks.
//  - cache_model slots (llama.cpp): max_running_requests slots, each holding the tokens its KV
//    kept from its last task (prompt + output - 1). There is no shared pool: a request waits
//    (FCFS) only for an idle slot and fits if prompt + max_new_tokens <= context_length. At each
//    admission every idle slot is first copied into the host prompt cache (unless an entry
//    already contains it; host_prompt_cache), then the task takes the idle slot whose tokens
//    share the longest prefix with its prompt if lcp / prompt_len > slot_prompt_similarity, else
//    the least recently released idle slot (ties: the highest id). The host entry with the
//    longest prefix moves into that slot if it beats the slot's own and keeps >= 25% of its
//    tokens. cached_tokens = min(lcp(slot, prompt), prompt_len - 1). EraseSlot empties one
//    slot and never the host cache; FlushCache empties every slot.
//
// Details this implementation fixes (engine.cc):
//  - At most prompt_len - 1 tokens come from the cache: the last prompt token is always computed,
//    because its logits give the first output token (as in SGLang).
//  - Cached tokens (prompts and outputs alike) share the pool with reservations. A request reserves
//    pages(prompt - cached + max_new_tokens) and pins (locks) its cached prefix; admission needs
//    reserved + pinned cache tokens + this request's new reservation and newly pinned tokens
//    <= max_total_tokens. Unpinned cache is evicted (least recently used first) to make room, so
//    the cache never blocks admission. If the request does not fit with its cache hit but would fit
//    without it, it is admitted cold (cached 0) so page rounding cannot stall the queue.
//  - A request that can never fit (pages(prompt + max_new_tokens) > max_total_tokens or
//    prompt + max_new_tokens > context_length) is rejected at Submit with "too_long"; an empty
//    prompt or max_new_tokens < 1 with "invalid".
//  - Speculative decoding accepts draft tokens as a chain (EAGLE top-k 1): each draft is accepted
//    with probability a until the first rejection, a chosen so the mean accepted count is
//    spec_accept_mean. Draws hash (jitter_seed, prompt, output position): independent of batching.
//  - Step jitter draws hash (jitter_seed, step index, the prompts submitted so far), and epoch
//    jitter (one factor per cache flush) hashes the epoch number with the prompts, so repeated
//    trials with fresh prompts see different noise while one call sequence always replays
//    identically.
//  - A Submit or Cancel at exactly the start time of the step in progress re-plans that step (no
//    virtual time has passed), so a burst of arrivals at one instant is admitted together.
//  - With idle_start_delay_s > 0, an arrival at an idle engine starts the first step that long
//    later (NextEventTime reports it), and every arrival until then is admitted with it.
//  - After Cancel no event is emitted for that id. A waiting request leaves the queue at once; a
//    running one still costs the step in progress and is dropped at its end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "capq/engine/profile.h"

namespace capq::engine {

using VirtNs = int64_t;  // virtual nanoseconds

struct EngineRequest {
  uint64_t id = 0;
  std::vector<uint32_t> prompt_tokens;  // token ids, chat template included
  int64_t max_new_tokens = 0;
  int64_t eos_at_tokens = -1;  // > 0: finish with "stop" after this many tokens (natural EOS)
  // The id of output token i (0-based): what the server streams, so a cache that keeps this
  // request's output holds the ids a later prompt quoting that output tokenizes to. Must be
  // deterministic. Unset: a pseudo-random id per (prompt, position).
  std::function<uint32_t(int64_t)> output_token;
};

struct EngineEvent {
  enum class Kind {
    kAdmitted,  // left the queue; cached_tokens is known
    kTokens,    // `tokens` new output tokens at time `t` (the first one is the first token)
    kFinished,  // finish_reason "length" or "stop"; no more events for this id
    kRejected,  // can never fit (prompt + output > pool or context); finish_reason says why
  };
  Kind kind = Kind::kTokens;
  uint64_t request_id = 0;
  VirtNs t = 0;
  int64_t tokens = 0;         // kTokens: tokens emitted in this step for this request
  int64_t total_tokens = 0;   // kTokens/kFinished: output tokens so far
  int64_t cached_tokens = 0;  // kAdmitted
  int slot = -1;              // kAdmitted under cache_model slots: the slot that runs it
  // kFinished/kRejected: "length", "stop", "too_long", "invalid" (static strings).
  const char* finish_reason = nullptr;
};

struct EngineStats {
  int running = 0;
  int waiting = 0;
  int64_t pool_used_tokens = 0;
  int64_t pool_total_tokens = 0;
  int64_t prompt_tokens_total = 0;
  int64_t cached_tokens_total = 0;
  int64_t generated_tokens_total = 0;
  int64_t steps = 0;
  // Added: prefix cache occupancy (pinned + evictable). pool_used_tokens counts reservations plus
  // the pinned part only, since unpinned cache is evicted on demand.
  int64_t cache_tokens = 0;
  int64_t requests_finished = 0;
  int64_t requests_rejected = 0;
  int64_t requests_cancelled = 0;
  int64_t host_cache_entries = 0;  // cache_model slots: prompts held in the host cache
};

// One slot of cache_model slots, for llama.cpp's GET /slots.
struct SlotState {
  int id = 0;
  bool used = false;  // has run a task since the engine started
  bool processing = false;
  uint64_t request_id = 0;      // processing only
  int64_t n_kv_tokens = 0;      // tokens in its KV now (llama.cpp's n_prompt_tokens)
  int64_t n_prompt_tokens = 0;  // processing only: the request's prompt length
  int64_t n_prompt_tokens_cache = 0;
  int64_t n_prompt_tokens_processed = 0;
  int64_t n_decoded = 0;
  int64_t n_remain = 0;
};

class Engine {
 public:
  explicit Engine(const EngineProfile& profile);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // REQUIRES: now >= every time passed before. Events up to `now` must have been collected first
  // (call AdvanceTo(now) before Submit so a request cannot join a step that started earlier).
  void Submit(EngineRequest request, VirtNs now);
  // Drops a request (client went away): frees its pool reservation at the next step boundary.
  void Cancel(uint64_t request_id, VirtNs now);

  // When the step in progress ends, if there is one; nullopt when idle.
  std::optional<VirtNs> NextEventTime() const;
  // Completes every step that ends at or before `t`, appending their events in time order.
  void AdvanceTo(VirtNs t, std::vector<EngineEvent>* out);

  bool Idle() const;  // nothing waiting, nothing running
  bool FlushCache();  // false (and no change) unless Idle()
  // cache_model slots: empties slot `id` and returns how many tokens it held; nullopt while the
  // slot runs a task, for a bad id, or under cache_model radix. The erase that leaves every slot
  // empty starts a new jitter epoch, like FlushCache.
  std::optional<int64_t> EraseSlot(int id);
  std::vector<SlotState> Slots() const;  // empty under cache_model radix
  EngineStats stats() const;
  const EngineProfile& profile() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capq::engine

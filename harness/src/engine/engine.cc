#include "capq/engine/engine.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "capq/hash.h"
#include "engine_radix.h"
#include "engine_slots.h"

namespace capq::engine {
namespace {

uint64_t HashTokens(const std::vector<uint32_t>& tokens) {
  uint64_t h = 0x243f6a8885a308d3ULL ^ tokens.size();
  for (uint32_t t : tokens) h = (h ^ t) * 0x100000001b3ULL;
  return SplitMix64(h);
}

int64_t RoundUp(int64_t v, int64_t page) { return (v + page - 1) / page * page; }

// Per-draft acceptance probability a with sum_{i=1..k} a^i == tau (mean length of an accepted
// chain that stops at the first rejection).
double ChainAcceptProbability(int k, double tau) {
  if (k <= 0 || tau <= 0) return 0;
  if (tau >= k) return 1;
  double lo = 0, hi = 1;
  for (int iter = 0; iter < 80; ++iter) {
    const double a = (lo + hi) / 2;
    double sum = 0, p = 1;
    for (int i = 0; i < k; ++i) sum += (p *= a);
    (sum < tau ? lo : hi) = a;
  }
  return (lo + hi) / 2;
}

}  // namespace

struct Engine::Impl {
  struct Req {
    uint64_t id = 0;
    std::vector<uint32_t> prompt;
    int64_t prompt_len = 0;
    int64_t max_new = 0;
    int64_t stop_at = 0;  // output length at which the request finishes
    bool stop_is_eos = false;
    uint64_t prompt_hash = 0;
    std::function<uint32_t(int64_t)> output_token;
    int64_t cached = 0;
    int64_t prefilled = 0;  // prompt tokens whose KV exists (cached + computed)
    int64_t generated = 0;
    int64_t reserved = 0;
    internal::RadixCache::Node* pinned = nullptr;
    int slot = -1;  // kSlots: the slot running it
    bool cancelled = false;
    // The plan of the step in progress.
    int64_t chunk = 0;
    bool decode = false;
  };

  explicit Impl(const EngineProfile& p)
      : profile(p),
        accept_p(ChainAcceptProbability(p.spec_draft_tokens, p.spec_accept_mean)),
        accept_threshold(static_cast<uint32_t>(std::lround(accept_p * 65536.0))),
        min_step_ns(MinStepNs(p)) {
    if (p.cache_model == CacheModel::kSlots) {
      slots.emplace(p.max_running_requests, p.slot_prompt_similarity, p.host_prompt_cache,
                    p.prefix_cache);
    }
  }

  // A lower bound on any step's duration: the fixed terms at the largest jitter cut, rounded down.
  static VirtNs MinStepNs(const EngineProfile& p) {
    const double secs = (p.b0_s + p.overhead_s) * (1 - std::max(0.0, p.step_jitter)) *
                        (1 - std::max(0.0, p.epoch_jitter));
    return std::max<VirtNs>(1, static_cast<VirtNs>(std::floor(secs * 1e9)) - 1);
  }

  // The bookkeeping a completed step leaves behind (freeing the finished and cancelled rows,
  // caching finished prompts) and the planning of the next step, deferred until the engine is next
  // asked anything: AdvanceTo can hand out a step's events first. Every public call settles first,
  // in the order the work would have run, so nothing observable changes.
  void Settle() {
    if (slots) {
      // llama.cpp releases the slots of one batch in slot order (update_slots walks them by id),
      // which decides the least recently used slot afterwards.
      std::stable_sort(retiring.begin(), retiring.end(),
                       [](const auto& a, const auto& b) { return a->slot < b->slot; });
    }
    for (auto& r : retiring) {
      Release(*r);
      if (!r->cancelled && profile.prefix_cache && !slots) {
        const std::vector<uint32_t> kv = KvTokens(*r);
        int64_t n = static_cast<int64_t>(kv.size());
        if (profile.cache_block_tokens > 0)
          n = n / profile.cache_block_tokens * profile.cache_block_tokens;
        cache.Insert(kv.data(), n);
        // Inserting cannot outgrow the pool: the request's reservation covered these tokens
        // (prompt + max_new_tokens > prompt + output - 1); what no longer fits is evicted LRU.
        cache.EvictDownTo(profile.max_total_tokens - reserved_tokens);
      }
    }
    retiring.clear();
    if (start_pending) {
      start_pending = false;
      StartStep(last_step_end);
    }
  }

  // --- admission -----------------------------------------------------------------------------
  void AdmitEvent(const Req& r, VirtNs now) {
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::kAdmitted;
    ev.request_id = r.id;
    ev.t = now;
    ev.cached_tokens = r.cached;
    ev.slot = r.slot;
    pending.push_back(ev);
  }

  // llama.cpp: a task waits only for a free slot; each slot has its own context.
  void AdmitToSlots(VirtNs now) {
    while (!waiting.empty() && slots->HasIdle()) {
      Req& r = *waiting.front();
      const internal::SlotCache::Launch l = slots->Start(r.prompt);
      r.slot = l.slot;
      r.cached = l.cached;
      r.prefilled = l.cached;
      stats.prompt_tokens_total += r.prompt_len;
      stats.cached_tokens_total += l.cached;
      AdmitEvent(r, now);
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
  }

  // What a request's KV holds when it ends: the prompt evaluated so far and every output token
  // but the last (sampled, never decoded). A slot keeps it; the radix cache inserts it.
  std::vector<uint32_t> KvTokens(const Req& r) const {
    std::vector<uint32_t> kv(r.prompt.begin(), r.prompt.begin() + r.prefilled);
    if (r.prefilled == r.prompt_len) {
      kv.reserve(kv.size() + static_cast<size_t>(std::max<int64_t>(0, r.generated - 1)));
      for (int64_t i = 0; i + 1 < r.generated; ++i) kv.push_back(OutputToken(r, i));
    }
    return kv;
  }

  static uint32_t OutputToken(const Req& r, int64_t i) {
    if (r.output_token) return r.output_token(i);
    return static_cast<uint32_t>(SplitMix64(r.prompt_hash + static_cast<uint64_t>(i)));
  }

  void Admit(VirtNs now) {
    if (slots) {
      AdmitToSlots(now);
      return;
    }
    const int64_t total = profile.max_total_tokens;
    const int64_t page = profile.page_size;
    while (!waiting.empty() && static_cast<int>(running.size()) < profile.max_running_requests) {
      Req& r = *waiting.front();
      int64_t cached = 0;
      internal::RadixCache::Node* node = nullptr;
      if (profile.prefix_cache && r.prompt_len > 1) {
        auto m = cache.Match(r.prompt.data(), r.prompt_len - 1);
        node = m.first;
        cached = m.second;
        if (const int64_t block = profile.cache_block_tokens; block > 0 && cached % block != 0) {
          m = cache.Match(r.prompt.data(), cached / block * block);  // whole blocks only
          node = m.first;
          cached = m.second;
        }
      }
      int64_t need = RoundUp(r.prompt_len - cached + r.max_new, page);
      const int64_t pinned_base = reserved_tokens + cache.locked_tokens();
      if (cached > 0 && pinned_base + need + cache.UnlockedTokensOnPath(node) > total) {
        cached = 0;  // page rounding of a hit can need more than going cold; never stall on it
        node = nullptr;
        need = RoundUp(r.prompt_len + r.max_new, page);
      }
      if (pinned_base + need > total) break;  // FCFS: nobody overtakes the head
      if (node != nullptr && cached > 0) {
        cache.Lock(node);
        r.pinned = node;
      }
      reserved_tokens += need;
      cache.EvictDownTo(total - reserved_tokens);
      r.reserved = need;
      r.cached = cached;
      r.prefilled = cached;
      stats.prompt_tokens_total += r.prompt_len;
      stats.cached_tokens_total += cached;
      AdmitEvent(r, now);
      running.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
  }

  void Release(Req& r) {
    reserved_tokens -= r.reserved;
    r.reserved = 0;
    if (r.pinned != nullptr) cache.Unlock(r.pinned);
    r.pinned = nullptr;
    if (r.slot >= 0) slots->Release(r.slot, KvTokens(r));
    r.slot = -1;
  }

  // --- planning --------------------------------------------------------------------------------
  // Admits, then plans the step that starts at `now`; leaves the engine idle when nothing runs.
  void StartStep(VirtNs now) {
    Admit(now);
    if (running.empty()) {
      step_active = false;
      return;
    }
    step_active = true;
    step_start = now;
    Plan();
  }

  void Plan() {
    const int64_t per_decode_row = 1 + profile.spec_draft_tokens;
    int64_t n_decode = 0;
    bool has_prefill = false;
    for (auto& r : running) {
      r->chunk = 0;
      r->decode = false;
      if (r->prefilled < r->prompt_len) {
        has_prefill = true;
      } else {
        ++n_decode;
      }
    }
    bool run_decode;
    int64_t budget;
    if (profile.policy == SchedulePolicy::kPrefillFirst) {
      run_decode = !has_prefill || profile.mixed_chunks;
      budget = profile.chunked_prefill_size;
      // A mixed chunk spends part of the budget on the decode rows riding along; prefill still
      // gets at least one token so prefill-first keeps its priority.
      if (has_prefill && run_decode)
        budget = std::max<int64_t>(1, budget - n_decode * per_decode_row);
    } else {
      run_decode = true;
      budget = std::max<int64_t>(0, profile.chunked_prefill_size - n_decode * per_decode_row);
    }
    int64_t prefill_tokens = 0, decode_rows = 0, decode_kv = 0;
    double chunk_sq = 0;
    for (auto& r : running) {
      if (r->prefilled < r->prompt_len) {
        const int64_t c = std::min(budget, r->prompt_len - r->prefilled);
        r->chunk = c;
        budget -= c;
        prefill_tokens += c;
        chunk_sq += static_cast<double>(c) * static_cast<double>(c);
      } else if (run_decode) {
        r->decode = true;
        ++decode_rows;
        decode_kv += r->prompt_len + r->generated;
      }
    }
    const EngineProfile& p = profile;
    double secs = p.b0_s + p.b1_s_per_prefill_token * static_cast<double>(prefill_tokens) +
                  p.b2_s_per_chunk_token_sq * chunk_sq +
                  p.b3_s_per_decode_row * static_cast<double>(decode_rows) +
                  p.b4_s_per_decode_kv_token * static_cast<double>(decode_kv) + p.overhead_s;
    if (p.step_jitter > 0) {
      const double u =
          UnitInterval(SplitMix64(p.jitter_seed ^ SplitMix64(stats.steps ^ SplitMix64(entropy))));
      secs *= 1 + p.step_jitter * (2 * u - 1);
    }
    if (p.epoch_jitter > 0) {
      if (!epoch_factor_set) {
        const double u = UnitInterval(
            SplitMix64(SplitMix64(p.jitter_seed + 0x5bd1e995) ^ SplitMix64(epoch) ^ entropy));
        epoch_factor = 1 + p.epoch_jitter * (2 * u - 1);
        epoch_factor_set = true;
      }
      secs *= epoch_factor;
    }
    step_end = step_start + std::max<VirtNs>(1, std::llround(secs * 1e9));
  }

  // --- completing a step -----------------------------------------------------------------------
  int64_t DraftsAccepted(const Req& r) const {
    const int k = profile.spec_draft_tokens;
    if (k <= 0 || accept_threshold == 0) return 0;
    int64_t accepted = 0;
    uint64_t h = 0;
    for (int i = 0; i < k; ++i) {
      if (i % 4 == 0)
        h = SplitMix64(profile.jitter_seed ^ SplitMix64(r.prompt_hash + (r.generated << 3) + i));
      const uint32_t draw = static_cast<uint32_t>(h & 0xffff);
      h >>= 16;
      if (draw >= accept_threshold) break;
      ++accepted;
    }
    return accepted;
  }

  void Finish(Req& r, VirtNs t) {
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::kFinished;
    ev.request_id = r.id;
    ev.t = t;
    ev.total_tokens = r.generated;
    ev.finish_reason = r.stop_is_eos && r.generated >= r.stop_at ? "stop" : "length";
    pending.push_back(ev);
    ++stats.requests_finished;
  }

  void CompleteStep() {
    const VirtNs t = step_end;
    size_t keep = 0;
    for (size_t i = 0; i < running.size(); ++i) {
      Req& r = *running[i];
      bool done = false;
      if (r.cancelled) {
        done = true;
      } else {
        int64_t emitted = 0;
        if (r.chunk > 0) {
          r.prefilled += r.chunk;
          if (r.prefilled == r.prompt_len) emitted = 1;  // the step that ends prefill samples
        } else if (r.decode) {
          emitted = std::min<int64_t>(1 + DraftsAccepted(r), r.stop_at - r.generated);
        }
        if (emitted > 0) {
          r.generated += emitted;
          stats.generated_tokens_total += emitted;
          EngineEvent ev;
          ev.kind = EngineEvent::Kind::kTokens;
          ev.request_id = r.id;
          ev.t = t;
          ev.tokens = emitted;
          ev.total_tokens = r.generated;
          pending.push_back(ev);
          if (r.generated >= r.stop_at) {
            Finish(r, t);
            done = true;
          }
        }
      }
      if (done) {
        retiring.push_back(std::move(running[i]));  // Settle frees it
      } else {
        if (keep != i) running[keep] = std::move(running[i]);
        ++keep;
      }
    }
    running.resize(keep);
    ++stats.steps;
    step_active = false;
  }

  void Flush(std::vector<EngineEvent>* out) {
    if (pending.empty()) return;
    if (out != nullptr) out->insert(out->end(), pending.begin(), pending.end());
    pending.clear();
  }

  EngineProfile profile;
  double accept_p;
  uint32_t accept_threshold;
  std::deque<std::unique_ptr<Req>> waiting;
  std::vector<std::unique_ptr<Req>> running;  // admission order
  internal::RadixCache cache;
  std::optional<internal::SlotCache> slots;  // kSlots only
  int64_t reserved_tokens = 0;
  bool step_active = false;
  VirtNs step_start = 0;
  VirtNs step_end = 0;
  VirtNs last_step_end = 0;
  std::vector<EngineEvent> pending;
  std::vector<std::unique_ptr<Req>> retiring;  // rows the last step ended, in running order
  bool start_pending = false;                  // the next step starts at last_step_end
  std::optional<VirtNs> wake_at;  // idle_start_delay_s: when the first step after idle starts
  VirtNs min_step_ns;
  EngineStats stats;
  uint64_t entropy = 0;  // folds in every submitted prompt
  uint64_t epoch = 0;
  bool epoch_factor_set = false;
  double epoch_factor = 1;
};

Engine::Engine(const EngineProfile& profile) : impl_(std::make_unique<Impl>(profile)) {}
Engine::~Engine() = default;

void Engine::Submit(EngineRequest request, VirtNs now) {
  Impl& s = *impl_;
  s.Settle();
  const EngineProfile& p = s.profile;
  auto r = std::make_unique<Impl::Req>();
  r->id = request.id;
  r->prompt_len = static_cast<int64_t>(request.prompt_tokens.size());
  r->max_new = request.max_new_tokens;
  r->prompt = std::move(request.prompt_tokens);
  r->output_token = std::move(request.output_token);
  const char* reject = nullptr;
  if (r->prompt_len < 1 || r->max_new < 1) {
    reject = "invalid";
  } else if (r->prompt_len + r->max_new > p.context_length ||
             (!s.slots && RoundUp(r->prompt_len + r->max_new, p.page_size) > p.max_total_tokens)) {
    reject = "too_long";
  }
  if (reject != nullptr) {
    EngineEvent ev;
    ev.kind = EngineEvent::Kind::kRejected;
    ev.request_id = r->id;
    ev.t = now;
    ev.finish_reason = reject;
    s.pending.push_back(ev);
    ++s.stats.requests_rejected;
    return;
  }
  r->stop_at = r->max_new;
  if (request.eos_at_tokens > 0 && request.eos_at_tokens <= r->max_new) {
    r->stop_at = request.eos_at_tokens;
    r->stop_is_eos = true;
  }
  r->prompt_hash = HashTokens(r->prompt);
  s.entropy = SplitMix64(s.entropy ^ r->prompt_hash);
  s.waiting.push_back(std::move(r));
  if (!s.step_active && p.idle_start_delay_s > 0) {
    // An idle engine wakes a little after the first arrival; arrivals until then join that step.
    if (!s.wake_at) {
      s.wake_at = std::max(now + static_cast<VirtNs>(std::llround(p.idle_start_delay_s * 1e9)),
                           s.last_step_end);
    }
  } else if (!s.step_active) {
    // A step never starts before the previous one ended, even if a caller's clock lags.
    s.StartStep(std::max(now, s.last_step_end));
  } else if (s.step_start == now) {
    s.StartStep(now);  // no virtual time has passed: the arrival joins the step being formed
  }
}

void Engine::Cancel(uint64_t request_id, VirtNs now) {
  Impl& s = *impl_;
  s.Settle();
  for (auto it = s.waiting.begin(); it != s.waiting.end(); ++it) {
    if ((*it)->id == request_id) {
      s.waiting.erase(it);
      ++s.stats.requests_cancelled;
      return;
    }
  }
  for (size_t i = 0; i < s.running.size(); ++i) {
    Impl::Req& r = *s.running[i];
    if (r.id != request_id || r.cancelled) continue;
    ++s.stats.requests_cancelled;
    if (s.step_active && s.step_start == now) {
      // The step has not done any work yet: drop the row and form the step again.
      s.Release(r);
      s.running.erase(s.running.begin() + static_cast<std::ptrdiff_t>(i));
      s.StartStep(now);
    } else {
      r.cancelled = true;
    }
    return;
  }
}

std::optional<VirtNs> Engine::NextEventTime() const {
  impl_->Settle();
  if (impl_->wake_at) return impl_->wake_at;
  if (!impl_->step_active) return std::nullopt;
  return impl_->step_end;
}

void Engine::AdvanceTo(VirtNs t, std::vector<EngineEvent>* out) {
  Impl& s = *impl_;
  s.Settle();
  if (s.wake_at && *s.wake_at <= t) {
    const VirtNs wake = *s.wake_at;
    s.wake_at.reset();
    s.StartStep(wake);
  }
  while (s.step_active && s.step_end <= t) {
    const VirtNs end = s.step_end;
    s.CompleteStep();
    s.last_step_end = end;
    s.start_pending = true;
    // Plan the next step now only if it could end by `t`; otherwise the caller gets this step's
    // events before the bookkeeping and planning run.
    if (end + s.min_step_ns <= t) s.Settle();
  }
  s.Flush(out);
}

bool Engine::Idle() const {
  impl_->Settle();
  return impl_->waiting.empty() && impl_->running.empty();
}

bool Engine::FlushCache() {
  if (!Idle()) return false;
  impl_->cache.Clear();
  if (impl_->slots) {
    for (int i = 0; i < impl_->profile.max_running_requests; ++i) impl_->slots->Erase(i);
  }
  ++impl_->epoch;
  impl_->epoch_factor_set = false;
  return true;
}

EngineStats Engine::stats() const {
  impl_->Settle();
  EngineStats st = impl_->stats;
  st.running = static_cast<int>(impl_->running.size());
  st.waiting = static_cast<int>(impl_->waiting.size());
  st.pool_total_tokens = impl_->profile.max_total_tokens;
  st.pool_used_tokens = impl_->reserved_tokens + impl_->cache.locked_tokens();
  st.cache_tokens = impl_->cache.total_tokens();
  if (impl_->slots) {
    st.pool_total_tokens =
        static_cast<int64_t>(impl_->profile.max_running_requests) * impl_->profile.context_length;
    st.pool_used_tokens = 0;
    for (const auto& r : impl_->running) st.pool_used_tokens += r->prefilled + r->generated;
    st.cache_tokens = impl_->slots->slot_tokens();
    st.host_cache_entries = impl_->slots->host_entries();
  }
  return st;
}

std::optional<int64_t> Engine::EraseSlot(int id) {
  Impl& s = *impl_;
  s.Settle();
  if (!s.slots || id < 0 || id >= s.profile.max_running_requests) return std::nullopt;
  const std::optional<int64_t> n = s.slots->Erase(id);
  // Erasing every slot is llama.cpp's cache flush: the erase that empties the last one starts a
  // new epoch, as FlushCache does.
  if (n && *n > 0 && s.slots->slot_tokens() == 0) {
    ++s.epoch;
    s.epoch_factor_set = false;
  }
  return n;
}

std::vector<SlotState> Engine::Slots() const {
  Impl& s = *impl_;
  s.Settle();
  std::vector<SlotState> out;
  if (!s.slots) return out;
  const auto& slots = s.slots->slots();
  for (size_t i = 0; i < slots.size(); ++i) {
    SlotState st;
    st.id = static_cast<int>(i);
    st.used = slots[i].last_used >= 0 || slots[i].busy;
    st.n_kv_tokens = static_cast<int64_t>(slots[i].tokens.size());
    for (const auto& r : s.running) {
      if (r->slot != st.id) continue;
      st.processing = true;
      st.request_id = r->id;
      st.n_prompt_tokens = r->prompt_len;
      st.n_prompt_tokens_cache = r->cached;
      st.n_prompt_tokens_processed = r->prefilled - r->cached;
      st.n_decoded = r->generated;
      st.n_remain = r->stop_at - r->generated;
      st.n_kv_tokens = r->prefilled + std::max<int64_t>(0, r->generated - 1);
    }
    out.push_back(st);
  }
  return out;
}

const EngineProfile& Engine::profile() const { return impl_->profile; }

}  // namespace capq::engine

#include "engine_slots.h"

#include <algorithm>

namespace capq::engine::internal {
namespace {

// A restored entry must keep at least this share of its tokens (ts/server-task.cpp:1746-1820).
constexpr double kMinRestoreKeep = 0.25;

}  // namespace

int64_t CommonPrefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int64_t>(i);
}

SlotCache::SlotCache(int n_slots, double similarity, bool host_cache, bool reuse)
    : slots_(static_cast<size_t>(std::max(1, n_slots))),
      similarity_(similarity),
      host_cache_(host_cache && reuse),
      reuse_(reuse) {}

bool SlotCache::HasIdle() const {
  return std::any_of(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.busy; });
}

int64_t SlotCache::slot_tokens() const {
  int64_t n = 0;
  for (const Slot& s : slots_) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

// ts/server-context.cpp:1600-1676: the most similar idle slot if it is similar enough, else the
// least recently used one. Among equally old slots the highest id wins, as in the recorded logs
// (a fresh server takes slot 7 first, then 6, 5, ...).
int SlotCache::Pick(const std::vector<uint32_t>& prompt) const {
  int best = -1;
  double best_sim = 0;
  if (reuse_ && !prompt.empty()) {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].busy || slots_[i].tokens.empty()) continue;
      const double sim = static_cast<double>(CommonPrefix(slots_[i].tokens, prompt)) /
                         static_cast<double>(prompt.size());
      if (sim > similarity_ && sim > best_sim) {
        best = static_cast<int>(i);
        best_sim = sim;
      }
    }
  }
  if (best >= 0) return best;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].busy) continue;
    if (best < 0 || slots_[i].last_used <= slots_[static_cast<size_t>(best)].last_used) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

// --cache-idle-slots: ts/server-context.cpp:2463-2478; a copy the cache already contains is
// skipped (ts/server-task.cpp:1664-1673).
void SlotCache::SaveIdleSlots() {
  if (!host_cache_) return;
  for (const Slot& s : slots_) {
    if (s.busy || s.tokens.empty()) continue;
    const bool contained = std::any_of(host_.begin(), host_.end(), [&](const auto& e) {
      return CommonPrefix(e, s.tokens) == static_cast<int64_t>(s.tokens.size());
    });
    if (!contained) host_.push_back(s.tokens);
  }
}

void SlotCache::Restore(Slot* slot, const std::vector<uint32_t>& prompt) {
  if (!host_cache_) return;
  const int64_t own = CommonPrefix(slot->tokens, prompt);
  int64_t best_lcp = own;
  size_t best = host_.size();
  for (size_t i = 0; i < host_.size(); ++i) {
    const int64_t lcp = CommonPrefix(host_[i], prompt);
    const double keep = static_cast<double>(lcp) / static_cast<double>(host_[i].size());
    if (lcp > best_lcp && keep >= kMinRestoreKeep) {
      best_lcp = lcp;
      best = i;
    }
  }
  if (best == host_.size()) return;
  // The entry moves into the slot: the cache no longer holds it.
  slot->tokens = std::move(host_[best]);
  host_.erase(host_.begin() + static_cast<std::ptrdiff_t>(best));
}

SlotCache::Launch SlotCache::Start(const std::vector<uint32_t>& prompt) {
  SaveIdleSlots();
  Launch l;
  l.slot = Pick(prompt);
  Slot& s = slots_[static_cast<size_t>(l.slot)];
  s.busy = true;
  if (!reuse_) {
    s.tokens.clear();
    return l;
  }
  Restore(&s, prompt);
  // The last prompt token is always evaluated again (ts/server-context.cpp:3404-3409).
  const int64_t limit = std::max<int64_t>(0, static_cast<int64_t>(prompt.size()) - 1);
  l.cached = std::min(CommonPrefix(s.tokens, prompt), limit);
  return l;
}

void SlotCache::Release(int slot, std::vector<uint32_t> tokens) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.busy = false;
  s.tokens = reuse_ ? std::move(tokens) : std::vector<uint32_t>();
  s.last_used = clock_++;
}

std::optional<int64_t> SlotCache::Erase(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.busy) return std::nullopt;
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  s.tokens.clear();
  return n;
}

}  // namespace capq::engine::internal

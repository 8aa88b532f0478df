// llama.cpp's prompt reuse: a fixed set of slots, each keeping the tokens of its last task, and a
// host-RAM prompt cache that survives slot erases. Private to the engine (engine.h states the
// semantics; conformance/llamacpp/INDEX.md has the recordings and the llama.cpp source refs).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace capq::engine::internal {

int64_t CommonPrefix(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b);

class SlotCache {
 public:
  struct Slot {
    std::vector<uint32_t> tokens;  // what its KV holds: the last prompt + output - 1 when idle
    int64_t last_used = -1;        // release order; -1: never used (ts: t_last_used)
    bool busy = false;
  };
  struct Launch {
    int slot = -1;
    int64_t cached = 0;  // prompt tokens whose KV is reused (always < prompt length)
  };

  SlotCache(int n_slots, double similarity, bool host_cache, bool reuse);

  bool HasIdle() const;
  // Starts a task: copies every idle slot into the host cache, picks a slot, restores the host
  // entry that beats the slot's own content. REQUIRES HasIdle().
  Launch Start(const std::vector<uint32_t>& prompt);
  // The task on `slot` ended; its KV now holds `tokens`.
  void Release(int slot, std::vector<uint32_t> tokens);
  // Drops a slot's tokens (not the host cache): n_erased, or nullopt while the slot is busy.
  std::optional<int64_t> Erase(int slot);

  const std::vector<Slot>& slots() const { return slots_; }
  int64_t host_entries() const { return static_cast<int64_t>(host_.size()); }
  int64_t slot_tokens() const;

 private:
  int Pick(const std::vector<uint32_t>& prompt) const;
  void SaveIdleSlots();
  void Restore(Slot* slot, const std::vector<uint32_t>& prompt);

  std::vector<Slot> slots_;
  std::vector<std::vector<uint32_t>> host_;  // oldest first
  double similarity_;
  bool host_cache_;
  bool reuse_;
  int64_t clock_ = 0;
};

}  // namespace capq::engine::internal

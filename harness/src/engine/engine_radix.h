// A radix tree of prompt token ids: the simulated engine's prefix cache. Private to the engine.
//
// Cache tokens live in the same paged pool as request reservations. Nodes a running request matched
// are locked (reference counted) and cannot be evicted; unlocked nodes are evicted least recently
// used first when admission needs room.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace capq::engine::internal {

class RadixCache {
 public:
  struct Node {
    std::vector<uint32_t> key;                           // edge label from the parent
    std::map<uint32_t, std::unique_ptr<Node>> children;  // ordered: eviction ties break stably
    Node* parent = nullptr;
    int refs = 0;
    uint64_t last_use = 0;
  };

  RadixCache();
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // Longest cached prefix of tokens[0, n). Splits an edge so the returned node ends exactly at the
  // match; returns the root and 0 on a miss. Marks the path as recently used.
  std::pair<Node*, int64_t> Match(const uint32_t* tokens, int64_t n);
  // Tokens on the path root..node that are not locked yet (what locking would newly pin).
  int64_t UnlockedTokensOnPath(const Node* node) const;
  void Lock(Node* node);
  void Unlock(Node* node);
  // Adds tokens[0, n); returns how many tokens were new.
  int64_t Insert(const uint32_t* tokens, int64_t n);
  // Evicts unlocked leaves, least recently used first, until total_tokens() <= max_tokens or
  // nothing unlocked is left.
  void EvictDownTo(int64_t max_tokens);
  void Clear();

  int64_t total_tokens() const { return total_tokens_; }
  int64_t locked_tokens() const { return locked_tokens_; }

 private:
  Node* Split(Node* child, size_t pos);
  Node* FindLruLeaf();

  std::unique_ptr<Node> root_;
  int64_t total_tokens_ = 0;
  int64_t locked_tokens_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace capq::engine::internal

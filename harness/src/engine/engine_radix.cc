#include "engine_radix.h"

#include <algorithm>

namespace capq::engine::internal {

RadixCache::RadixCache() : root_(std::make_unique<Node>()) {}

RadixCache::Node* RadixCache::Split(Node* child, size_t pos) {
  // child's edge [0, pos) moves into a new parent; the new node inherits child's locks so that
  // unlocking from any deeper node still walks a consistent path.
  Node* parent = child->parent;
  auto mid = std::make_unique<Node>();
  mid->key.assign(child->key.begin(), child->key.begin() + pos);
  mid->parent = parent;
  mid->refs = child->refs;
  mid->last_use = child->last_use;
  auto& slot = parent->children[child->key[0]];
  std::unique_ptr<Node> owned = std::move(slot);
  child->key.erase(child->key.begin(), child->key.begin() + pos);
  child->parent = mid.get();
  Node* mid_raw = mid.get();
  mid_raw->children.emplace(child->key[0], std::move(owned));
  slot = std::move(mid);
  return mid_raw;
}

std::pair<RadixCache::Node*, int64_t> RadixCache::Match(const uint32_t* tokens, int64_t n) {
  ++clock_;
  Node* node = root_.get();
  int64_t matched = 0;
  while (matched < n) {
    auto it = node->children.find(tokens[matched]);
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    const size_t limit = static_cast<size_t>(std::min<int64_t>(child->key.size(), n - matched));
    size_t common = 0;
    while (common < limit && child->key[common] == tokens[matched + common]) ++common;
    if (common < child->key.size()) {
      child = Split(child, common);
    }
    child->last_use = clock_;
    matched += static_cast<int64_t>(common);
    node = child;
    if (common < limit) break;  // diverged inside the edge
  }
  return {node, matched};
}

int64_t RadixCache::UnlockedTokensOnPath(const Node* node) const {
  int64_t sum = 0;
  for (; node != nullptr && node != root_.get(); node = node->parent) {
    if (node->refs == 0) sum += static_cast<int64_t>(node->key.size());
  }
  return sum;
}

void RadixCache::Lock(Node* node) {
  for (; node != nullptr && node != root_.get(); node = node->parent) {
    if (node->refs++ == 0) locked_tokens_ += static_cast<int64_t>(node->key.size());
  }
}

void RadixCache::Unlock(Node* node) {
  for (; node != nullptr && node != root_.get(); node = node->parent) {
    if (--node->refs == 0) locked_tokens_ -= static_cast<int64_t>(node->key.size());
  }
}

int64_t RadixCache::Insert(const uint32_t* tokens, int64_t n) {
  auto [node, matched] = Match(tokens, n);
  if (matched == n) return 0;
  auto leaf = std::make_unique<Node>();
  leaf->key.assign(tokens + matched, tokens + n);
  leaf->parent = node;
  leaf->last_use = clock_;
  const int64_t added = n - matched;
  node->children.emplace(tokens[matched], std::move(leaf));
  total_tokens_ += added;
  return added;
}

RadixCache::Node* RadixCache::FindLruLeaf() {
  Node* best = nullptr;
  std::vector<Node*> stack = {root_.get()};
  while (!stack.empty()) {
    Node* node = stack.back();
    stack.pop_back();
    if (node != root_.get() && node->children.empty() && node->refs == 0) {
      if (best == nullptr || node->last_use < best->last_use) best = node;
    }
    for (auto& [_, child] : node->children) stack.push_back(child.get());
  }
  return best;
}

void RadixCache::EvictDownTo(int64_t max_tokens) {
  while (total_tokens_ > max_tokens) {
    Node* leaf = FindLruLeaf();
    if (leaf == nullptr) return;
    total_tokens_ -= static_cast<int64_t>(leaf->key.size());
    leaf->parent->children.erase(leaf->key[0]);
  }
}

void RadixCache::Clear() {
  root_ = std::make_unique<Node>();
  total_tokens_ = 0;
  locked_tokens_ = 0;
}

}  // namespace capq::engine::internal

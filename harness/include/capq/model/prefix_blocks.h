// Prompts built from a trace's prefix blocks (mix.prefix_blocks): the blocks one trial sends, and
// the cached tokens each request declares.
//
// A trace such as Mooncake's gives each request the chained ids of its prompt's blocks: two
// requests with equal leading ids share those blocks' tokens, and nothing after. A trial builds
// each distinct block as a text of its own (a unique lead word, so two blocks never share a first
// token) of exactly its length in the server's tokens, and a prompt as its blocks' texts in order.
// A block is keyed by its id and its length, so a block cut short by a cap is a block of its own.
// A request declares the tokens of its leading run of blocks that earlier requests of the trial
// sent (the trace's own reuse, as a prefix cache that keeps every block would serve it). A request
// whose every block was sent before would repeat an earlier prompt word for word; its last block
// is made its own, so every prompt stays unique, and it declares the rest. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "capq/model/traffic.h"
#include "capq/status.h"

namespace capq {

struct BlockLayout {
  std::vector<int64_t> block_tokens;     // each distinct block's length, in order of first use
  std::vector<std::vector<int>> blocks;  // per request: its blocks, indices into block_tokens
  // Per request: how many of its leading blocks earlier requests sent (what it declares cached).
  std::vector<int> shared;
  int repeats = 0;  // requests whose last block was made their own
};

// `requests` in send order, each a fitted sample (block_ids, block_tokens, input_tokens).
BlockLayout LayOutBlocks(const std::vector<const TrafficSample*>& requests);

// A trace's block of `trace_tokens` at `scale`, in the server's whole tokens; an error naming
// `scale_key` when the block would be a fraction of a token or none. A prompt built from blocks
// shares exactly whole blocks, so a block cannot be cut between tokens.
Result<int64_t> ScaledBlockTokens(int64_t trace_tokens, double scale, const std::string& scale_key);

// The length of block `j` of fitted sample `s`: whole blocks, the last one the rest of its input.
int64_t BlockLength(const TrafficSample& s, size_t j);

}  // namespace capq

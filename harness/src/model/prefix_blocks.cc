#include "capq/model/prefix_blocks.h"

#include <cmath>
#include <map>
#include <tuple>

#include "capq/text.h"

namespace capq {
namespace {

// (block id, length, owner): owner is -1 for a block any request may share, else the request
// that made it its own.
using BlockKey = std::tuple<int64_t, int64_t, int>;

}  // namespace

Result<int64_t> ScaledBlockTokens(int64_t trace_tokens, double scale,
                                  const std::string& scale_key) {
  const double fitted = static_cast<double>(trace_tokens) * scale;
  if (std::fabs(fitted - std::round(fitted)) > 1e-6 || fitted < 1) {
    return Status::InvalidArgument(
        scale_key + " " + FormatFixed(scale, 6) + " makes the trace's blocks of " +
        std::to_string(trace_tokens) + " tokens " + FormatFixed(fitted, 3) +
        " tokens; a block must stay whole tokens (e.g. " + scale_key + " " +
        FormatFixed(1.0 / static_cast<double>(trace_tokens), 6) + " times an integer)");
  }
  return static_cast<int64_t>(std::llround(fitted));
}

int64_t BlockLength(const TrafficSample& s, size_t j) {
  const auto whole = static_cast<int64_t>(s.block_ids.size()) - 1;
  return static_cast<int64_t>(j) < whole ? s.block_tokens : s.input_tokens - whole * s.block_tokens;
}

BlockLayout LayOutBlocks(const std::vector<const TrafficSample*>& requests) {
  BlockLayout out;
  std::map<BlockKey, int> index;
  const auto block_of = [&](const BlockKey& key) {
    auto [it, fresh] = index.emplace(key, static_cast<int>(out.block_tokens.size()));
    if (fresh) out.block_tokens.push_back(std::get<1>(key));
    return it->second;
  };
  for (size_t r = 0; r < requests.size(); ++r) {
    const TrafficSample& s = *requests[r];
    const size_t n = s.block_ids.size();
    size_t sent = 0;  // the leading run of blocks an earlier request sent
    while (sent < n && index.count({s.block_ids[sent], BlockLength(s, sent), -1})) ++sent;
    const bool repeat = sent == n;
    out.repeats += repeat ? 1 : 0;
    std::vector<int> blocks;
    for (size_t j = 0; j < n; ++j) {
      const bool own = repeat && j + 1 == n;
      blocks.push_back(
          block_of({s.block_ids[j], BlockLength(s, j), own ? static_cast<int>(r) : -1}));
    }
    out.blocks.push_back(std::move(blocks));
    out.shared.push_back(static_cast<int>(repeat ? n - 1 : sent));
  }
  return out;
}

}  // namespace capq

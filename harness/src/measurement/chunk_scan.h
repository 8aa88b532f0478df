// A server's chunk read in place (json_scan.h) for the fields StreamDecoder takes from it, when
// the chunk is plain: one JSON object, at most one choice (index 0), the fields it reads of the
// types they should have, each at most once, and no error. Anything else, malformed or merely
// unusual, gives up, and the decoder parses the chunk generically and words what is wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace capq::internal {

// The chunk's fields; each view points into the chunk or into a ChunkScratch.
struct ChunkFacts {
  std::string_view model;  // "" when absent or null
  // delta.reasoning_content, delta.reasoning and delta.content, in the order the decoder appends
  // them; "" when absent, null or empty.
  std::string_view texts[3];
  std::optional<std::string_view> finish_reason;  // nullopt when absent or null
  bool usage = false;                             // a usage object, even an empty one
  std::optional<int64_t> prompt_tokens, completion_tokens, cached_tokens;  // usage's
  std::optional<int64_t> cache_n;  // llama.cpp's timings.cache_n
};

// Where the strings with escapes are decoded; reused from chunk to chunk.
struct ChunkScratch {
  std::string key, model, texts[3], finish_reason;
};

// True when `data` is a plain chunk (above); then *facts holds what nlohmann::json::parse and the
// decoder's reading of its fields would find. REQUIRES: facts is fresh (default-constructed).
bool ScanChunk(std::string_view data, ChunkScratch* scratch, ChunkFacts* facts);

}  // namespace capq::internal

// Traffic files: paired samples from completed requests, one JSON object a line
// (rows/traffic/README.md).
//
// A sample keeps its input and output lengths together: a replay draws whole samples, never an
// input length from one histogram and an output length from another. Pure: the caller reads the
// file; errors name the file and the line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "capq/status.h"

namespace capq {

inline constexpr const char* kTrafficSchema = "capq/traffic/v1";

struct TrafficSample {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  std::string traffic_class;  // the file's "class" field; "" when the export had none
  std::string prefix_hit;     // "cold" unless the export says otherwise
  std::string sampling;       // "greedy" unless the export says otherwise
  std::optional<double> arrival_offset_s;
  int line = 0;  // 1-based line in its file
  // A trace's prefix structure (Mooncake's hash_ids): the ids of the prompt's blocks of
  // `block_tokens` tokens, in order, chained (equal leading ids are a shared prefix); empty when
  // the source has none.
  int64_t block_tokens = 0;
  std::vector<int64_t> block_ids;
};

// Parses capq/traffic/v1 lines; blank lines are skipped, anything else must be a sample.
Result<std::vector<TrafficSample>> ParseTraffic(const std::string& text, const std::string& file);
Result<std::vector<TrafficSample>> LoadTraffic(const std::string& path);
std::string TrafficSampleToJsonLine(const TrafficSample& s);

// Converts an export into samples. OpenAI-style usage records ({"usage": {"prompt_tokens",
// "completion_tokens"}}, optionally under "response" or "body", with "metadata.class") and capq
// results.jsonl (measured lines: "prompt_tokens", "completion_tokens") are recognised line by
// line; `default_class` names samples whose line carries no class.
Result<std::vector<TrafficSample>> ImportTraffic(const std::string& text, const std::string& file,
                                                 const std::string& default_class);

// Per class: the count and the paired lengths' p50/p95/p99 (nearest rank).
struct TrafficClassSummary {
  std::string traffic_class;
  int count = 0;
  int64_t input_p50 = 0, input_p95 = 0, input_p99 = 0;
  int64_t output_p50 = 0, output_p95 = 0, output_p99 = 0;
};
std::vector<TrafficClassSummary> SummarizeTraffic(const std::vector<TrafficSample>& samples);
std::string TrafficSummaryText(const std::vector<TrafficClassSummary>& summary);

}  // namespace capq

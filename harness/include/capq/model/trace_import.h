// Public LLM-serving traces read as capq traffic (rows/traffic/README.md): each format exactly as
// its publisher documents it, kept as paired samples with their arrival offsets and, where the
// trace has them, their prefix blocks. Pure: the caller reads the file; errors name the file,
// the line and the field.
//
//   mooncake  JSONL {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}:
//             chained 512-token prefix blocks, the last partial one included.
//   azure     CSV (CRLF) TIMESTAMP,ContextTokens,GeneratedTokens; the timestamp is wall-clock
//             "2023-11-16 18:15:46.6805900", seven fractional digits, no time zone.
//   burstgpt  CSV Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type; the
//             timestamp in seconds from the trace's start; the model names the class.
// The session formats, weka and tracelab, are read into trajectories (capq/model/session_import.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capq/model/traffic.h"
#include "capq/status.h"

namespace capq {

enum class TraceFormat { kMooncake, kAzure, kBurstGpt, kWeka, kTraceLab };
// "mooncake", "azure", "burstgpt", "weka", "tracelab"; nullopt for anything else.
std::optional<TraceFormat> ParseTraceFormat(const std::string& name);
// Whether the format records agent sessions (weka, tracelab) rather than single requests.
bool IsSessionFormat(TraceFormat format);

// The trace's requests in file order, arrival offsets counted from its first request. A request
// the trace records without output (a failed one) is left out and counted in `skipped`.
// `default_class` names the samples of a format that carries no class (the file's stem). A
// session format is refused here.
struct ImportedTrace {
  std::vector<TrafficSample> samples;
  int skipped = 0;
};
Result<ImportedTrace> ImportTrace(TraceFormat format, const std::string& text,
                                  const std::string& file, const std::string& default_class);

// What a trace offers a replay, beyond each class's paired lengths: its span and mean arrival
// rate, the rate per minute, and how many prefix-block references had been seen before (what a
// prefix cache could reuse).
struct TraceSummary {
  int requests = 0;
  double span_s = 0;
  std::vector<int> per_minute;  // requests arriving in each minute from the first
  int64_t block_references = 0, blocks_seen_before = 0;
};
TraceSummary SummarizeTrace(const std::vector<TrafficSample>& samples);
std::string TraceSummaryText(const TraceSummary& s);

}  // namespace capq

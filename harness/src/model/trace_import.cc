#include "capq/model/trace_import.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "capq/text.h"

namespace capq {
namespace {

Status FieldError(const std::string& file, int line, const std::string& field,
                  const std::string& what) {
  return Status::InvalidArgument(file + ":" + std::to_string(line) + ": " + field + ": " + what);
}

// The file's lines with their numbers; a CR before the LF (Azure's CRLF) is not part of a line,
// and the last line may lack its LF.
std::vector<std::pair<int, std::string>> Lines(const std::string& text) {
  std::vector<std::pair<int, std::string>> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos) out.emplace_back(n, line);
  }
  return out;
}

std::vector<std::string> SplitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

// A non-negative integer cell, or why not.
Result<int64_t> Count(const std::string& cell, const std::string& file, int line,
                      const std::string& field) {
  char* end = nullptr;
  const long long v = std::strtoll(cell.c_str(), &end, 10);
  if (cell.empty() || *end != '\0' || v < 0) {
    return FieldError(file, line, field, "expected an integer >= 0, got '" + cell + "'");
  }
  return static_cast<int64_t>(v);
}

// Azure's "2023-11-16 18:15:46.6805900": seconds since the epoch, read as UTC (the trace names no
// zone; only differences are used).
Result<double> AzureSeconds(const std::string& cell, const std::string& file, int line) {
  std::tm tm{};
  int frac_pos = 0;
  if (std::sscanf(cell.c_str(), "%4d-%2d-%2d %2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &frac_pos) != 6) {
    return FieldError(file, line, "TIMESTAMP",
                      "expected YYYY-MM-DD HH:MM:SS.fffffff, got '" + cell + "'");
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double frac = 0;
  const std::string rest = cell.substr(static_cast<size_t>(frac_pos));
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 ||
        rest.find_first_not_of("0123456789", 1) != std::string::npos) {
      return FieldError(file, line, "TIMESTAMP", "a fraction of a second expected after '.'");
    }
    frac = std::stod("0" + rest);
  }
  return static_cast<double>(timegm(&tm)) + frac;
}

Status CheckHeader(const std::vector<std::pair<int, std::string>>& lines, const std::string& file,
                   const std::string& want) {
  if (lines.empty()) return Status::InvalidArgument(file + ": empty");
  if (lines.front().second != want) {
    return Status::InvalidArgument(file + ":" + std::to_string(lines.front().first) +
                                   ": expected the header '" + want + "'");
  }
  return Status::Ok();
}

TrafficSample Sample(int line, int64_t in, int64_t out, std::string cls, double offset_s) {
  TrafficSample s;
  s.line = line;
  s.input_tokens = in;
  s.output_tokens = out;
  s.traffic_class = std::move(cls);
  s.prefix_hit = "cold";
  s.sampling = "greedy";
  s.arrival_offset_s = offset_s;
  return s;
}

Result<int64_t> JsonCount(const nlohmann::json& j, const char* key, const std::string& file,
                          int line) {
  if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 0) {
    return FieldError(file, line, key, "expected an integer >= 0");
  }
  return j[key].get<int64_t>();
}

// Mooncake: 512-token blocks, the last partial one included (len == ceil(input / 512)).
constexpr int64_t kMooncakeBlockTokens = 512;

Result<std::optional<TrafficSample>> MooncakeLine(const std::string& text, int line,
                                                  const std::string& file, const std::string& cls,
                                                  double* first_ms) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::InvalidArgument(file + ":" + std::to_string(line) + ": not a JSON object");
  }
  if (!j.contains("timestamp") || !j["timestamp"].is_number() || j["timestamp"].get<double>() < 0) {
    return FieldError(file, line, "timestamp", "expected milliseconds >= 0");
  }
  Result<int64_t> in = JsonCount(j, "input_length", file, line);
  Result<int64_t> out = JsonCount(j, "output_length", file, line);
  if (!in.ok()) return in.status();
  if (!out.ok()) return out.status();
  if (!j.contains("hash_ids") || !j["hash_ids"].is_array()) {
    return FieldError(file, line, "hash_ids", "expected an array of block ids");
  }
  const double ms = j["timestamp"].get<double>();
  if (*first_ms < 0) *first_ms = ms;
  if (*in == 0 || *out == 0) return std::optional<TrafficSample>();
  TrafficSample s = Sample(line, *in, *out, cls, (ms - *first_ms) / 1000.0);
  s.block_tokens = kMooncakeBlockTokens;
  for (const nlohmann::json& id : j["hash_ids"]) {
    if (!id.is_number_integer()) return FieldError(file, line, "hash_ids", "integers expected");
    s.block_ids.push_back(id.get<int64_t>());
  }
  const auto blocks = static_cast<size_t>((*in + kMooncakeBlockTokens - 1) / kMooncakeBlockTokens);
  if (s.block_ids.size() != blocks) {
    return FieldError(file, line, "hash_ids",
                      std::to_string(s.block_ids.size()) + " ids for " + std::to_string(*in) +
                          " tokens; 512-token blocks need " + std::to_string(blocks));
  }
  return std::optional<TrafficSample>(std::move(s));
}

Result<ImportedTrace> ImportMooncake(const std::string& text, const std::string& file,
                                     const std::string& cls) {
  ImportedTrace t;
  double first_ms = -1;
  for (const auto& [n, line] : Lines(text)) {
    Result<std::optional<TrafficSample>> s = MooncakeLine(line, n, file, cls, &first_ms);
    if (!s.ok()) return s.status();
    if (*s) {
      t.samples.push_back(std::move(**s));
    } else {
      ++t.skipped;
    }
  }
  return t;
}

Result<ImportedTrace> ImportAzure(const std::string& text, const std::string& file,
                                  const std::string& cls) {
  const auto lines = Lines(text);
  CAPQ_RETURN_IF_ERROR(CheckHeader(lines, file, "TIMESTAMP,ContextTokens,GeneratedTokens"));
  ImportedTrace t;
  double first = NAN;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& [n, line] = lines[i];
    const std::vector<std::string> c = SplitCsv(line);
    if (c.size() != 3) return FieldError(file, n, "row", "expected 3 columns");
    Result<double> at = AzureSeconds(c[0], file, n);
    Result<int64_t> in = Count(c[1], file, n, "ContextTokens");
    Result<int64_t> out = Count(c[2], file, n, "GeneratedTokens");
    for (const Status& st : {at.status(), in.status(), out.status()}) CAPQ_RETURN_IF_ERROR(st);
    if (std::isnan(first)) first = *at;
    if (*in == 0 || *out == 0) {
      ++t.skipped;
      continue;
    }
    t.samples.push_back(Sample(n, *in, *out, cls, std::max(0.0, *at - first)));
  }
  return t;
}

Result<ImportedTrace> ImportBurstGpt(const std::string& text, const std::string& file) {
  const auto lines = Lines(text);
  CAPQ_RETURN_IF_ERROR(CheckHeader(
      lines, file, "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"));
  ImportedTrace t;
  double first = NAN;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& [n, line] = lines[i];
    const std::vector<std::string> c = SplitCsv(line);
    if (c.size() != 6) return FieldError(file, n, "row", "expected 6 columns");
    char* end = nullptr;
    const double at = std::strtod(c[0].c_str(), &end);
    if (c[0].empty() || *end != '\0' || at < 0) {
      return FieldError(file, n, "Timestamp", "expected seconds >= 0, got '" + c[0] + "'");
    }
    Result<int64_t> in = Count(c[2], file, n, "Request tokens");
    Result<int64_t> out = Count(c[3], file, n, "Response tokens");
    for (const Status& st : {in.status(), out.status()}) CAPQ_RETURN_IF_ERROR(st);
    if (std::isnan(first)) first = at;
    if (*in == 0 || *out == 0) {  // BurstGPT logs failed requests with 0 response tokens
      ++t.skipped;
      continue;
    }
    t.samples.push_back(Sample(n, *in, *out, c[1], std::max(0.0, at - first)));
  }
  return t;
}

}  // namespace

std::optional<TraceFormat> ParseTraceFormat(const std::string& name) {
  if (name == "mooncake") return TraceFormat::kMooncake;
  if (name == "azure") return TraceFormat::kAzure;
  if (name == "burstgpt") return TraceFormat::kBurstGpt;
  if (name == "weka") return TraceFormat::kWeka;
  if (name == "tracelab") return TraceFormat::kTraceLab;
  return std::nullopt;
}

bool IsSessionFormat(TraceFormat format) {
  return format == TraceFormat::kWeka || format == TraceFormat::kTraceLab;
}

Result<ImportedTrace> ImportTrace(TraceFormat format, const std::string& text,
                                  const std::string& file, const std::string& default_class) {
  if (IsSessionFormat(format)) {
    return Status::InvalidArgument(file + ": a session trace; read it with ImportSessionTrace");
  }
  Result<ImportedTrace> t = format == TraceFormat::kMooncake
                                ? ImportMooncake(text, file, default_class)
                            : format == TraceFormat::kAzure ? ImportAzure(text, file, default_class)
                                                            : ImportBurstGpt(text, file);
  if (t.ok() && t->samples.empty()) {
    return Status::InvalidArgument(file + ": no request with input and output in the trace");
  }
  return t;
}

TraceSummary SummarizeTrace(const std::vector<TrafficSample>& samples) {
  TraceSummary s;
  s.requests = static_cast<int>(samples.size());
  std::set<int64_t> seen;
  for (const TrafficSample& t : samples) {
    const double at = t.arrival_offset_s.value_or(0);
    s.span_s = std::max(s.span_s, at);
    const auto minute = static_cast<size_t>(at / 60.0);
    if (s.per_minute.size() <= minute) s.per_minute.resize(minute + 1, 0);
    ++s.per_minute[minute];
    for (int64_t id : t.block_ids) {
      ++s.block_references;
      s.blocks_seen_before += seen.insert(id).second ? 0 : 1;
    }
  }
  return s;
}

std::string TraceSummaryText(const TraceSummary& s) {
  std::string out = std::to_string(s.requests) + " requests over " + FormatFixed(s.span_s, 1) +
                    " s (" + FormatFixed(s.span_s > 0 ? s.requests / s.span_s : 0, 2) +
                    " requests/s)\n  per minute:";
  for (int n : s.per_minute) out += " " + std::to_string(n);
  out += "\n";
  if (s.block_references > 0) {
    out += "  prefix blocks: " + std::to_string(s.blocks_seen_before) + " of " +
           std::to_string(s.block_references) + " references seen before (" +
           FormatFixed(100.0 * static_cast<double>(s.blocks_seen_before) /
                           static_cast<double>(s.block_references),
                       1) +
           " %, what a prefix cache could reuse)\n";
  }
  return out;
}

}  // namespace capq

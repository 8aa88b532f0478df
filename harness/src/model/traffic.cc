#include "capq/model/traffic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "capq/file_io.h"

namespace capq {
namespace {

Status LineError(const std::string& file, int line, const std::string& what) {
  return Status::InvalidArgument(file + ":" + std::to_string(line) + ": " + what);
}

std::optional<int64_t> PositiveInt(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
  const int64_t v = j[key].get<int64_t>();
  return v > 0 ? std::optional<int64_t>(v) : std::nullopt;
}

std::string StringOr(const nlohmann::json& j, const char* key, const std::string& fallback) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                : fallback;
}

Result<TrafficSample> SampleFromJson(const nlohmann::json& j, const std::string& file, int line) {
  if (!j.is_object() || j.value("schema", "") != kTrafficSchema) {
    return LineError(file, line, std::string("expected a ") + kTrafficSchema + " sample");
  }
  TrafficSample s;
  s.line = line;
  const auto in = PositiveInt(j, "input_tokens"), out = PositiveInt(j, "output_tokens");
  if (!in || !out) {
    return LineError(file, line, "expected input_tokens and output_tokens, integers > 0");
  }
  s.input_tokens = *in;
  s.output_tokens = *out;
  s.traffic_class = StringOr(j, "class", "");
  s.prefix_hit = StringOr(j, "prefix_hit", "cold");
  s.sampling = StringOr(j, "sampling", "greedy");
  if (j.contains("arrival_offset_s")) {
    if (!j["arrival_offset_s"].is_number() || j["arrival_offset_s"].get<double>() < 0) {
      return LineError(file, line, "arrival_offset_s: expected a number of seconds >= 0");
    }
    s.arrival_offset_s = j["arrival_offset_s"].get<double>();
  }
  if (j.contains("prefix_blocks")) {
    const nlohmann::json& b = j["prefix_blocks"];
    const auto size = PositiveInt(b, "block_tokens");
    if (!size || !b.contains("ids") || !b["ids"].is_array()) {
      return LineError(file, line, "prefix_blocks: expected block_tokens > 0 and an ids array");
    }
    s.block_tokens = *size;
    for (const nlohmann::json& id : b["ids"]) {
      if (!id.is_number_integer()) return LineError(file, line, "prefix_blocks.ids: integers");
      s.block_ids.push_back(id.get<int64_t>());
    }
  }
  return s;
}

bool Blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// Calls fn(json, line number) for each non-blank line; a line that is not JSON is an error.
template <typename Fn>
Status ForEachJsonLine(const std::string& text, const std::string& file, Fn fn) {
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (Blank(line)) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded()) return LineError(file, n, "not a JSON object");
    if (Status s = fn(j, n); !s.ok()) return s;
  }
  return Status::Ok();
}

const nlohmann::json* UsageOf(const nlohmann::json& j) {
  for (const nlohmann::json* o : {&j, j.contains("response") ? &j["response"] : nullptr,
                                  j.contains("body") ? &j["body"] : nullptr}) {
    if (o && o->is_object() && o->contains("usage") && (*o)["usage"].is_object()) {
      return &(*o)["usage"];
    }
  }
  return nullptr;
}

std::string ClassOf(const nlohmann::json& j, const std::string& fallback) {
  if (j.contains("metadata"))
    return StringOr(j["metadata"], "class", StringOr(j, "class", fallback));
  return StringOr(j, "class", fallback);
}

// One export line: an OpenAI usage record, a capq results.jsonl line (measured requests only) or
// a capq/traffic/v1 sample. Returns nullopt for lines that carry no completed request.
Result<std::optional<TrafficSample>> ImportLine(const nlohmann::json& j, const std::string& file,
                                                int line, const std::string& fallback) {
  if (j.is_object() && j.value("schema", "") == kTrafficSchema) {
    Result<TrafficSample> s = SampleFromJson(j, file, line);
    if (!s.ok()) return s.status();
    return std::optional<TrafficSample>(*s);
  }
  const nlohmann::json* usage = UsageOf(j);
  const nlohmann::json& counts = usage ? *usage : j;
  if (!usage && (!j.is_object() || j.value("phase", "") != "measured")) {
    return std::optional<TrafficSample>();
  }
  if (!usage && j.value("http_status", 0) != 200) return std::optional<TrafficSample>();
  const auto in = PositiveInt(counts, "prompt_tokens");
  const auto out = PositiveInt(counts, "completion_tokens");
  if (!in || !out) {
    return LineError(file, line, "expected prompt_tokens and completion_tokens, integers > 0");
  }
  TrafficSample s;
  s.input_tokens = *in;
  s.output_tokens = *out;
  s.traffic_class = ClassOf(j, fallback);
  // A template's few cached tokens are no reuse: warm when a tenth of the prompt came cached.
  const int64_t cached = PositiveInt(counts, "cached_tokens").value_or(0);
  s.prefix_hit = cached * 10 >= *in ? "warm" : "cold";
  s.sampling = "greedy";
  s.line = line;
  return std::optional<TrafficSample>(s);
}

std::string Percent(int n, int total) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", 100.0 * n / std::max(1, total));
  return buf;
}

int64_t Quantile(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

}  // namespace

Result<std::vector<TrafficSample>> ParseTraffic(const std::string& text, const std::string& file) {
  std::vector<TrafficSample> out;
  Status s = ForEachJsonLine(text, file, [&](const nlohmann::json& j, int n) {
    Result<TrafficSample> sample = SampleFromJson(j, file, n);
    if (!sample.ok()) return sample.status();
    out.push_back(*sample);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (out.empty()) return Status::InvalidArgument(file + ": no traffic samples");
  return out;
}

Result<std::vector<TrafficSample>> LoadTraffic(const std::string& path) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status().WithContext("the traffic file");
  return ParseTraffic(*text, path);
}

std::string TrafficSampleToJsonLine(const TrafficSample& s) {
  nlohmann::ordered_json j = {{"schema", kTrafficSchema},         {"input_tokens", s.input_tokens},
                              {"output_tokens", s.output_tokens}, {"class", s.traffic_class},
                              {"prefix_hit", s.prefix_hit},       {"sampling", s.sampling}};
  if (s.arrival_offset_s) j["arrival_offset_s"] = *s.arrival_offset_s;
  if (!s.block_ids.empty()) {
    j["prefix_blocks"] = {{"block_tokens", s.block_tokens}, {"ids", s.block_ids}};
  }
  return j.dump();
}

Result<std::vector<TrafficSample>> ImportTraffic(const std::string& text, const std::string& file,
                                                 const std::string& default_class) {
  std::vector<TrafficSample> out;
  Status s = ForEachJsonLine(text, file, [&](const nlohmann::json& j, int n) {
    Result<std::optional<TrafficSample>> one = ImportLine(j, file, n, default_class);
    if (!one.ok()) return one.status();
    if (*one) out.push_back(**one);
    return Status::Ok();
  });
  if (!s.ok()) return s;
  if (out.empty()) return Status::InvalidArgument(file + ": no completed request found");
  return out;
}

std::vector<TrafficClassSummary> SummarizeTraffic(const std::vector<TrafficSample>& samples) {
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<int64_t>>> by;
  for (const TrafficSample& s : samples) {
    by[s.traffic_class].first.push_back(s.input_tokens);
    by[s.traffic_class].second.push_back(s.output_tokens);
  }
  std::vector<TrafficClassSummary> out;
  for (const auto& [name, lens] : by) {
    TrafficClassSummary c;
    c.traffic_class = name;
    c.count = static_cast<int>(lens.first.size());
    c.input_p50 = Quantile(lens.first, 50);
    c.input_p95 = Quantile(lens.first, 95);
    c.input_p99 = Quantile(lens.first, 99);
    c.output_p50 = Quantile(lens.second, 50);
    c.output_p95 = Quantile(lens.second, 95);
    c.output_p99 = Quantile(lens.second, 99);
    out.push_back(c);
  }
  return out;
}

std::string TrafficSummaryText(const std::vector<TrafficClassSummary>& summary) {
  std::ostringstream o;
  int total = 0;
  for (const auto& c : summary) total += c.count;
  o << total << " samples in " << summary.size()
    << " classes (ISL / OSL p50 p95 p99, nearest rank)\n";
  for (const auto& c : summary) {
    o << "  " << (c.traffic_class.empty() ? "(none)" : c.traffic_class) << ": " << c.count << " ("
      << Percent(c.count, total) << "%)  ISL " << c.input_p50 << " " << c.input_p95 << " "
      << c.input_p99 << "  OSL " << c.output_p50 << " " << c.output_p95 << " " << c.output_p99
      << "\n";
  }
  return o.str();
}

}  // namespace capq

// capq traffic EXPORT...: completed-request exports (OpenAI usage records, capq results.jsonl,
// capq/traffic/v1) as a capq/traffic/v1 file of paired samples, with a per-class summary.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/file_io.h"
#include "capq/model/traffic.h"

namespace capq::cli {
namespace {

constexpr const char* kUsage =
    "usage: capq traffic EXPORT... [--class NAME] [--out FILE]\n"
    "  converts completed-request exports (OpenAI-style usage records, capq results.jsonl,\n"
    "  capq/traffic/v1) into capq/traffic/v1 lines of paired samples and prints a summary:\n"
    "  counts and paired ISL/OSL p50/p95/p99 per class.\n"
    "  --class NAME  the class of samples whose line names none (default: the file's stem)\n"
    "  --out FILE    write the samples there (default: none, summary only)\n";

Result<std::vector<TrafficSample>> ReadExport(const std::string& path, const std::string& cls) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  const std::string stem = cls.empty() ? std::filesystem::path(path).stem().string() : cls;
  return ImportTraffic(*text, path, stem);
}

}  // namespace

int RunTraffic(const Args& args) {
  ArgParser p({"class", "out"}, {"help"});
  if (std::optional<int> rc = ParseCommand(p, args, "traffic", kUsage, 2)) return *rc;
  std::vector<TrafficSample> all;
  for (const std::string& path : p.positionals()) {
    Result<std::vector<TrafficSample>> s = ReadExport(path, p.GetOr("class", ""));
    if (!s.ok()) {
      std::fprintf(stderr, "capq traffic: %s\n", s.status().message().c_str());
      return 2;
    }
    all.insert(all.end(), s->begin(), s->end());
  }
  if (std::optional<std::string> out = p.Get("out")) {
    std::ofstream f(*out, std::ios::binary | std::ios::trunc);
    for (const TrafficSample& s : all) f << TrafficSampleToJsonLine(s) << "\n";
    if (!f) {
      std::fprintf(stderr, "capq traffic: %s: cannot write\n", out->c_str());
      return 2;
    }
  }
  std::fputs(TrafficSummaryText(SummarizeTraffic(all)).c_str(), stdout);
  return 0;
}

}  // namespace capq::cli

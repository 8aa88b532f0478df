// capq traffic EXPORT...: completed-request exports (OpenAI usage records, capq results.jsonl,
// capq/traffic/v1) as a capq/traffic/v1 file of paired samples, with a per-class summary; public
// traces imported the same way, and recorded agent sessions as a capq/trajectory/v1 file with a
// per-session summary.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/file_io.h"
#include "capq/model/session_import.h"
#include "capq/model/session_summary.h"
#include "capq/model/trace_import.h"
#include "capq/model/traffic.h"
#include "capq/model/trajectory.h"

namespace capq::cli {
namespace {

constexpr const char* kUsage =
    "usage: capq traffic EXPORT... [--class NAME] [--out FILE]\n"
    "       capq traffic TRAJECTORY... [--out FILE]\n"
    "       capq traffic import --format mooncake|azure|burstgpt|weka|tracelab TRACE...\n"
    "                           [--class NAME] [--out FILE]\n"
    "  converts completed-request exports (OpenAI-style usage records, capq results.jsonl,\n"
    "  capq/traffic/v1) into capq/traffic/v1 lines of paired samples and prints a summary:\n"
    "  counts and paired ISL/OSL p50/p95/p99 per class.\n"
    "  --class NAME  the class of samples whose line names none (default: the file's stem)\n"
    "  --out FILE    write the samples there (default: none, summary only)\n"
    "  import reads public traces as their publishers document them (rows/traffic/README.md):\n"
    "  arrival offsets, paired lengths and Mooncake's 512-token prefix blocks, and summarises\n"
    "  the arrival rate per minute and the prefix blocks a cache could reuse.\n"
    "  weka and tracelab record agent sessions: they become capq/trajectory/v1 turns (prompt\n"
    "  and output per turn, send times, think and tool times, WEKA's 64-token prefix blocks,\n"
    "  sub-agents as sessions of their own beside their parent) and are summarised per\n"
    "  session: sessions, sub-agents, turns, paired lengths, think and tool time percentiles\n"
    "  and the block references a cache could reuse. Trajectory files are summarised alike.\n";

Result<std::vector<TrafficSample>> ReadExport(const std::string& path, const std::string& cls) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  const std::string stem = cls.empty() ? std::filesystem::path(path).stem().string() : cls;
  return ImportTraffic(*text, path, stem);
}

Result<std::vector<TrafficSample>> ReadTrace(TraceFormat f, const std::string& path,
                                             const std::string& cls, int* skipped) {
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  const std::string stem = cls.empty() ? std::filesystem::path(path).stem().string() : cls;
  Result<ImportedTrace> t = ImportTrace(f, *text, path, stem);
  if (!t.ok()) return t.status();
  *skipped += t->skipped;
  return std::move(t->samples);
}

// Every file, as exports or as traces of `format`; false (said on stderr) at the first bad one.
bool ReadAll(const ArgParser& p, const std::vector<std::string>& files,
             std::optional<TraceFormat> format, std::vector<TrafficSample>* all, int* skipped) {
  for (const std::string& path : files) {
    const std::string cls = p.GetOr("class", "");
    Result<std::vector<TrafficSample>> s =
        format ? ReadTrace(*format, path, cls, skipped) : ReadExport(path, cls);
    if (!s.ok()) {
      std::fprintf(stderr, "capq traffic: %s\n", s.status().message().c_str());
      return false;
    }
    all->insert(all->end(), s->begin(), s->end());
  }
  return true;
}

// Every file as sessions of `format`, or as trajectory files; one block-id space.
Result<std::vector<TrajectorySession>> ReadSessions(std::optional<TraceFormat> format,
                                                    const std::vector<std::string>& files) {
  std::vector<ImportedSessions> parts;
  for (const std::string& path : files) {
    Result<std::string> text = ReadWholeFile(path);
    if (!text.ok()) return text.status();
    if (format) {
      Result<ImportedSessions> s = ImportSessionTrace(*format, *text, path);
      if (!s.ok()) return s.status();
      parts.push_back(std::move(*s));
      continue;
    }
    Result<std::vector<TrajectorySession>> s = ParseTrajectorySessions(*text, path);
    if (!s.ok()) return s.status();
    parts.push_back({path, std::move(*s), true});
  }
  return JoinSessionFiles(std::move(parts));
}

int RunSessions(const ArgParser& p, std::optional<TraceFormat> format,
                const std::vector<std::string>& files) {
  if (p.Get("class")) {
    std::fprintf(stderr, "capq traffic: --class names traffic samples, not sessions\n");
    return 2;
  }
  Result<std::vector<TrajectorySession>> sessions = ReadSessions(format, files);
  Status written = sessions.status();
  if (sessions.ok() && p.Get("out")) {
    written = WriteFileAtomic(*p.Get("out"), TrajectoryToJsonLines(*sessions));
  }
  if (!written.ok()) {
    std::fprintf(stderr, "capq traffic: %s\n", written.message().c_str());
    return 2;
  }
  std::fputs(SessionSummaryText(SummarizeSessions(*sessions)).c_str(), stdout);
  return 0;
}

// Whether the first file is a trajectory file (then all of them are read as such).
bool FirstIsTrajectory(const std::vector<std::string>& files) {
  if (files.empty()) return false;
  Result<std::string> text = ReadWholeFile(files.front());
  return text.ok() && LooksLikeTrajectory(*text);
}

}  // namespace

int RunTraffic(const Args& args) {
  ArgParser p({"class", "out", "format"}, {"help"});
  if (std::optional<int> rc = ParseCommand(p, args, "traffic", kUsage, 2)) return *rc;
  std::vector<std::string> files = p.positionals();
  const bool import = !files.empty() && files.front() == "import";
  if (import) files.erase(files.begin());
  std::optional<TraceFormat> format;
  if (import || p.Get("format")) {
    format = ParseTraceFormat(p.GetOr("format", ""));
    if (!import || !format || files.empty()) {
      std::fprintf(stderr,
                   "capq traffic: import needs --format mooncake|azure|burstgpt|weka|tracelab "
                   "and a trace file\n%s",
                   kUsage);
      return 2;
    }
  }
  if (format ? IsSessionFormat(*format) : FirstIsTrajectory(files)) {
    return RunSessions(p, format, files);
  }
  std::vector<TrafficSample> all;
  int skipped = 0;
  if (!ReadAll(p, files, format, &all, &skipped)) return 2;
  if (std::optional<std::string> out = p.Get("out")) {
    std::ofstream f(*out, std::ios::binary | std::ios::trunc);
    for (const TrafficSample& s : all) f << TrafficSampleToJsonLine(s) << "\n";
    if (!f) {
      std::fprintf(stderr, "capq traffic: %s: cannot write\n", out->c_str());
      return 2;
    }
  }
  std::fputs(TrafficSummaryText(SummarizeTraffic(all)).c_str(), stdout);
  if (format) {
    std::fputs(TraceSummaryText(SummarizeTrace(all)).c_str(), stdout);
    if (skipped > 0) {
      std::printf("  %d requests without input or output (failed) left out\n", skipped);
    }
  }
  return 0;
}

}  // namespace capq::cli

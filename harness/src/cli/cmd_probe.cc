// capq probe URL --engine E --out DIR: records a server's conformance corpus.
// capq probe --check DIR [--engine E]: compares a corpus with capq's dialect of its engine, the
// embedded simulator started here in that dialect (capq/probe/probe.h).
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/probe/probe.h"
#include "capq/sim/dialect.h"
#include "capq/sim/server.h"

namespace capq::cli {
namespace {

constexpr const char* kUsage =
    "usage: capq probe URL --engine E --out DIR [--insecure] [--timeout S]\n"
    "       capq probe --check DIR [--engine E] [--profile FILE] [--time-scale K]\n"
    "  Records what the server at URL sends (its info, tokenize and template endpoints, a flush,\n"
    "  streamed chats at C=1, a burst of 16, a request longer than its context) as a corpus in\n"
    "  DIR; only URL is contacted. CAPQ_API_KEY is sent as a bearer token and written nowhere.\n"
    "  --check replays a corpus on capq's simulator in the engine's dialect and prints each\n"
    "  difference in shape, one a line; the exit code is 1 when there is any.\n"
    "  E: sglang, vllm, llamacpp, or sim:sglang, sim:vllm, sim:llamacpp (capq sim)\n"
    "  --engine     for --check, the engine the corpus's MANIFEST.jsonl names by default\n"
    "  --profile    the simulator profile for --check (default: rows/sim/profiles/small.yaml,\n"
    "               llamacpp_tiny.yaml for llamacpp)\n";

Result<ProbeEngine> EngineFor(const ArgParser& p, const std::string& dir) {
  if (std::optional<std::string> e = p.Get("engine")) return ParseProbeEngine(*e);
  return CorpusEngine(dir);
}

int Record(const ArgParser& p) {
  ProbeOptions o;
  o.base_url = p.positionals()[0];
  while (!o.base_url.empty() && o.base_url.back() == '/') o.base_url.pop_back();
  const std::optional<std::string> engine = p.Get("engine"), out = p.Get("out");
  if (!engine || !out) {
    std::fprintf(stderr, "capq probe: --engine and --out are required\n%s", kUsage);
    return 2;
  }
  Result<ProbeEngine> e = ParseProbeEngine(*engine);
  Result<double> timeout = p.GetDouble("timeout", o.timeout_s);
  if (!e.ok() || !timeout.ok()) {
    std::fprintf(stderr, "capq probe: %s\n",
                 (!e.ok() ? e.status() : timeout.status()).message().c_str());
    return 2;
  }
  o.engine = *e;
  o.out_dir = *out;
  o.timeout_s = *timeout;
  o.insecure_tls = p.Has("insecure");
  if (const char* key = std::getenv("CAPQ_API_KEY")) o.api_key = key;
  Result<ProbeSummary> s = RecordCorpus(o);
  if (!s.ok()) {
    std::fprintf(stderr, "capq probe: %s\n", s.status().message().c_str());
    return 1;
  }
  std::printf("capq probe: recorded %d exchanges from %s into %s\n", s->exchanges,
              o.base_url.c_str(), o.out_dir.c_str());
  for (const std::string& n : s->notes) std::printf("note: %s\n", n.c_str());
  std::printf("check it with: capq probe --check %s\n", o.out_dir.c_str());
  return 0;
}

void PrintReport(const CheckReport& r, const ProbeEngine& e) {
  for (const ShapeDifference& d : r.differences) std::printf("%s\n", d.Line().c_str());
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
  std::printf(
      "capq probe --check: %d exchanges compared with capq's %s dialect: %zu difference%s\n",
      r.exchanges_compared, ProbeEngineName(e).c_str(), r.differences.size(),
      r.differences.size() == 1 ? "" : "s");
}

int Check(const ArgParser& p, const std::string& dir) {
  Result<ProbeEngine> e = EngineFor(p, dir);
  Result<double> scale = p.GetDouble("time-scale", 20.0);
  if (!e.ok() || !scale.ok()) {
    std::fprintf(stderr, "capq probe: %s\n",
                 (!e.ok() ? e.status() : scale.status()).message().c_str());
    return 2;
  }
  sim::ServerOptions so;
  so.dialect = sim::DialectFor(e->dialect);
  so.time_scale = *scale;
  so.profile_path = p.GetOr("profile", sim::ReferenceProfile(so.dialect));
  // The dialect sends the shapes of the build the corpus was recorded from.
  if (const int build = CorpusBuild(dir, *e); build > 0) so.engine_build = build;
  auto server = sim::SimServer::Start(so);
  if (!server.ok()) {
    std::fprintf(stderr, "capq probe: the simulator did not start (%s); pass --profile FILE\n",
                 server.status().message().c_str());
    return 2;
  }
  CheckOptions o;
  o.dir = dir;
  o.engine = *e;
  o.reference_url = (*server)->url();
  o.chunk_key_order = sim::SpecFor(so.dialect).llamacpp_stream;
  Result<CheckReport> r = CheckCorpus(o);
  (*server)->Stop();
  if (!r.ok()) {
    std::fprintf(stderr, "capq probe --check: %s\n", r.status().message().c_str());
    return 2;
  }
  PrintReport(*r, *e);
  return r->differences.empty() ? 0 : 1;
}

}  // namespace

int RunProbe(const Args& args) {
  ArgParser p({"engine", "out", "check", "profile", "time-scale", "timeout"}, {"insecure", "help"});
  if (Status st = p.Parse(args); !st.ok()) {
    std::fprintf(stderr, "capq probe: %s\n%s", st.message().c_str(), kUsage);
    return 2;
  }
  if (p.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (std::optional<std::string> dir = p.Get("check")) return Check(p, *dir);
  if (p.positionals().size() != 1) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return Record(p);
}

}  // namespace capq::cli

// capq doctor --url URL [--engine E] [--row FILE]: whether a server as launched can be qualified,
// asked without generating (capq/probe/doctor.h). One line per check; exit 0 when a
// qualification could pass, 1 when it could not, 2 on bad arguments, 3 when the server is
// unreachable or not ready.
#include <cstdio>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/cli/server_flags.h"
#include "capq/model/row_loader.h"
#include "capq/probe/doctor.h"
#include "capq/targets/row_limits.h"

namespace capq::cli {
namespace {

constexpr const char* kUsage =
    "usage: capq doctor --url URL [--engine E] [--row FILE] [--timeout S] [--insecure]\n"
    "  Checks, without generating, whether the server at URL can be qualified as launched:\n"
    "  readiness, its info and model, the row's identity (with --row), /metrics, the cache\n"
    "  counters and settings, a flush (only while idle), the tokenizer and template endpoints.\n"
    "  One line per check (ok, warn or FAIL); a FAIL names the flag or setting that fixes it.\n"
    "  E: sglang, vllm, llamacpp, openai, or sim, sim:vllm, sim:llamacpp (capq sim); default:\n"
    "     the row's engine, else sglang\n"
    "  --timeout    seconds to wait for the readiness probe (default 10)\n"
    "  exit: 0 a qualification could pass, 1 it could not, 2 bad arguments, 3 unreachable\n"
    "  CAPQ_URL stands in for --url; CAPQ_API_KEY is sent as a bearer token.\n";

int BadArgs(const std::string& message) {
  std::fprintf(stderr, "capq doctor: %s\n%s", message.c_str(), kUsage);
  return 2;
}

// The adapter: --engine, else the row's, else SGLang's. A row is checked with its own engine.
Result<Identity> EngineOf(const ArgParser& p, const std::optional<Row>& row) {
  if (!p.Has("engine")) {
    Identity sglang;
    sglang.engine = Engine::kSglang;
    return row ? row->identity : sglang;
  }
  Result<Identity> e = ParseDoctorEngine(*p.Get("engine"));
  if (!e.ok() || !row) return e;
  const Identity& r = row->identity;
  if (e->engine != r.engine || (r.engine == Engine::kSim && e->sim_dialect != r.sim_dialect)) {
    return Status::InvalidArgument("--engine " + *p.Get("engine") + " but row " + row->id +
                                   " is qualified as " + DoctorEngineName(r));
  }
  return r;
}

Result<DoctorOptions> OptionsFrom(const ArgParser& p) {
  DoctorOptions o;
  Result<TargetOptions> server = RequiredServer(p);
  if (!server.ok()) return server.status();
  o.target = *server;
  if (std::optional<std::string> path = p.Get("row")) {
    Result<Row> row = LoadRow(*path, CheckServerExpect);
    if (!row.ok()) return row.status();
    o.row = std::move(*row);
  }
  Result<Identity> identity = EngineOf(p, o.row);
  if (!identity.ok()) return identity.status();
  Result<double> timeout = p.GetDouble("timeout", o.ready_timeout_s);
  if (!timeout.ok()) return timeout.status();
  o.identity = *identity;
  o.ready_timeout_s = *timeout;
  return o;
}

std::string Names(const std::vector<DoctorCheckId>& ids) {
  std::string out;
  for (DoctorCheckId id : ids) out += (out.empty() ? "" : ", ") + std::string(DoctorCheckName(id));
  return out;
}

int Print(const DoctorReport& r) {
  for (const DoctorCheck& c : r.checks) {
    std::printf("%-4s  %-14s  %s\n", DoctorLevelName(c.level), DoctorCheckName(c.id),
                c.found.c_str());
    if (!c.fix.empty()) {
      std::printf("      %s: %s\n", c.level == DoctorLevel::kFail ? "fix" : "hint", c.fix.c_str());
    }
  }
  if (!r.reachable()) {
    std::printf(
        "capq doctor: the server did not answer its readiness probe; nothing else "
        "was checked\n");
    return 3;
  }
  const std::vector<DoctorCheckId> deciding = r.Deciding(), warnings = r.Warnings();
  if (!deciding.empty()) {
    std::printf("capq doctor: a qualification could not pass; decided by: %s\n",
                Names(deciding).c_str());
    return 1;
  }
  std::printf("capq doctor: a qualification could pass%s%s\n",
              warnings.empty() ? "" : "; look at: ", Names(warnings).c_str());
  return 0;
}

}  // namespace

int RunDoctor(const Args& args) {
  ArgParser p({"url", "engine", "row", "timeout"}, {"insecure", "help"});
  if (Status st = p.Parse(args); !st.ok()) return BadArgs(st.message());
  if (p.Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!p.positionals().empty()) return BadArgs("unexpected argument '" + p.positionals()[0] + "'");
  Result<DoctorOptions> o = OptionsFrom(p);
  if (!o.ok()) return BadArgs(o.status().message());
  const std::string row = o->row ? ", row " + o->row->id : "";
  std::printf("capq doctor: %s as %s%s\n", o->target.base_url.c_str(),
              DoctorEngineName(o->identity).c_str(), row.c_str());
  Result<DoctorReport> r = capq::RunDoctor(*o);
  if (!r.ok()) return BadArgs(r.status().message());
  return Print(*r);
}

}  // namespace capq::cli

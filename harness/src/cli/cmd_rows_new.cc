// capq rows new --url URL --engine E --isl N --osl N --slo TEXT [--container NAME] [--out FILE]
//   [--profile FILE] [--baseline]: a row written from the running server (capq/probe/row_new.h).
// With --baseline, a C=1 trial of the written row against the server records expect.baseline.
// Exit 0 written (TODOs listed on stderr), 1 written but the baseline trial did not pass, 2 bad
// arguments, 3 server unreachable or not ready.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/cli/server_flags.h"
#include "capq/clock.h"
#include "capq/file_io.h"
#include "capq/model/row_loader.h"
#include "capq/model/slo_text.h"
#include "capq/probe/doctor.h"
#include "capq/probe/row_new.h"
#include "capq/targets/row_limits.h"
#include "capq/trial/trial.h"

namespace capq::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: capq rows new --url URL --engine E --isl N --osl N --slo TEXT [--out FILE]\n"
    "                     [--container NAME] [--profile FILE] [--baseline] [--timeout S]\n"
    "  Writes a row from the running server: its identity and the limits it reports, the\n"
    "  chat template's shared prefix, the row's defaults. A value the server cannot tell is\n"
    "  written as \"TODO: why\"; `capq rows check` refuses the row until each is filled in.\n"
    "  E: sglang, vllm, llamacpp, openai, or sim, sim:vllm, sim:llamacpp (capq sim)\n"
    "  --slo        e.g. \"ttft p95 < 10s\", \"ttft p95 < 2.5s, itl p95 < 60ms\"\n"
    "  --out        the row file to write (refused if it exists); default: stdout\n"
    "  --container  docker or podman container running the server: its image digest is pinned\n"
    "  --profile    simulator: its profile file (default rows/sim/profiles/<name>.yaml)\n"
    "  --baseline   also run a C=1 trial of the row and record expect.baseline\n"
    "  exit: 0 written, 1 the baseline trial failed, 2 bad arguments, 3 unreachable\n"
    "  CAPQ_URL stands in for --url; CAPQ_API_KEY is sent as a bearer token.\n";

int BadArgs(const std::string& message) {
  std::fprintf(stderr, "capq rows new: %s\n%s", message.c_str(), kUsage);
  return 2;
}

Result<int64_t> Tokens(const ArgParser& p, const char* flag) {
  Result<long long> n = p.GetInt(flag, 0);
  if (!n.ok()) return n.status();
  if (*n < 1 || *n > 10'000'000) {
    return Status::InvalidArgument(std::string("--") + flag + " must be a token count >= 1");
  }
  return static_cast<int64_t>(*n);
}

Result<NewRowOptions> OptionsFrom(const ArgParser& p, const Args& args) {
  NewRowOptions o;
  Result<TargetOptions> server = RequiredServer(p);
  if (!server.ok()) return server.status();
  o.target = *server;
  if (!p.Has("engine")) return Status::InvalidArgument("--engine is required");
  if (!p.Has("slo")) return Status::InvalidArgument("--slo is required (e.g. \"ttft p95 < 10s\")");
  Result<Identity> identity = ParseDoctorEngine(*p.Get("engine"));
  Result<int64_t> isl = Tokens(p, "isl"), osl = Tokens(p, "osl");
  Result<std::vector<SloGate>> slo = ParseSloText(*p.Get("slo"));
  Result<double> timeout = p.GetDouble("timeout", o.ready_timeout_s);
  for (const Status& s :
       {identity.status(), isl.status(), osl.status(), slo.status(), timeout.status()}) {
    if (!s.ok()) return s;
  }
  o.identity = *identity;
  o.input_tokens = *isl;
  o.output_tokens = *osl;
  o.slo = *slo;
  o.ready_timeout_s = *timeout;
  o.container = p.GetOr("container", "");
  o.sim_profile = p.GetOr("profile", "");
  const std::string out = p.GetOr("out", "");
  o.id = NewRowId(out, o.identity, o.input_tokens, o.output_tokens);
  if (!out.empty()) o.row_dir = fs::absolute(out).parent_path().string();
  o.command_line = "capq rows new";
  for (const auto& a : args) {
    o.command_line += a.find_first_of(" \"'<>") == std::string::npos ? " " + a : " '" + a + "'";
  }
  return o;
}

// A C=1 trial of the row as written; its medians become expect.baseline.
Result<std::string> BaselineYaml(const std::string& yaml, const std::string& path,
                                 const NewRowOptions& o) {
  Result<Row> row = LoadRowFromString(yaml, path, CheckServerExpect);
  if (!row.ok()) return row.status();
  TrialOptions t;
  t.url = o.target.base_url;
  t.api_key = o.target.api_key;
  t.level = 1;
  t.phase = QualifyPhase::kBaseline;
  t.out_dir = "artifacts/rows-new-" + row->id + "-" + UtcNowText("%Y%m%dT%H%M%SZ") + "/baseline";
  t.command_line = o.command_line;
  t.on_progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  TrialReport r = capq::RunTrial(*row, t);
  std::fprintf(stderr, "baseline: C=1 %s (%s)\n", TrialOutcomeName(r.verdict.outcome),
               r.dir.c_str());
  // An SLO missed at C=1 still gives medians, but no concurrency of the row can pass.
  if (r.verdict.outcome != TrialOutcome::kPass || !r.metrics) {
    return Status::FailedPrecondition("the C=1 baseline trial did not pass (" +
                                      std::string(TrialOutcomeName(r.verdict.outcome)) + "): see " +
                                      r.dir);
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "expect:\n  baseline: {ttft_p50_ms: %.1f, itl_p50_ms: %.2f",
                r.metrics->ttft_ms.p50, r.metrics->itl_ms.p50);
  std::string out = buf;
  if (r.metrics->prompt_tokens_min > 0 &&
      r.metrics->prompt_tokens_min == r.metrics->prompt_tokens_max) {
    out += ", prompt_tokens: " + std::to_string(r.metrics->prompt_tokens_min);
  }
  return out + "}   # C=1 medians, " + r.dir + "\n";
}

int Write(const std::string& out, const std::string& yaml) {
  if (out.empty()) {
    std::fputs(yaml.c_str(), stdout);
    return 0;
  }
  if (Status st = WriteFileAtomic(out, yaml, ParentDirs::kCreate); !st.ok()) {
    std::fprintf(stderr, "capq rows new: %s\n", st.ToString().c_str());
    return 2;
  }
  std::fprintf(stderr, "capq rows new: wrote %s\n", out.c_str());
  return 0;
}

}  // namespace

int RunRowsNew(const Args& args) {
  ArgParser p({"url", "engine", "isl", "osl", "slo", "out", "container", "profile", "timeout"},
              {"baseline", "help"});
  if (Status st = p.Parse(args); !st.ok()) return BadArgs(st.message());
  if (p.Has("help")) return std::fputs(kUsage, stdout), 0;
  if (!p.positionals().empty()) return BadArgs("unexpected argument '" + p.positionals()[0] + "'");
  Result<NewRowOptions> o = OptionsFrom(p, args);
  if (!o.ok()) return BadArgs(o.status().message());
  const std::string out = p.GetOr("out", "");
  if (!out.empty() && fs::exists(out)) return BadArgs(out + " exists: not overwritten");
  Result<NewRow> row = WriteNewRow(*o);
  if (!row.ok()) {
    std::fprintf(stderr, "capq rows new: %s\n", row.status().ToString().c_str());
    return row.status().code() == Status::Code::kUnavailable ? 3 : 2;
  }
  for (const auto& todo : row->todos) std::fprintf(stderr, "TODO  %s\n", todo.c_str());
  std::string yaml = row->yaml;
  int rc = 0;
  if (p.Has("baseline") && !row->todos.empty()) {
    std::fprintf(stderr,
                 "capq rows new: no baseline while TODOs remain: fill them in; capq qualify "
                 "runs the C=1 baseline first\n");
    rc = 1;
  } else if (p.Has("baseline")) {
    const fs::path as = fs::path(o->row_dir.empty() ? "." : o->row_dir) / (o->id + ".yaml");
    Result<std::string> base = BaselineYaml(yaml, as.string(), *o);
    if (base.ok()) yaml += *base;
    if (!base.ok()) std::fprintf(stderr, "capq rows new: %s\n", base.status().message().c_str());
    rc = base.ok() ? 0 : 1;
  }
  const int written = Write(out, yaml);
  return written != 0 ? written : rc;
}

}  // namespace capq::cli

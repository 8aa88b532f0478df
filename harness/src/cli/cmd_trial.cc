// capq trial: one trial of one row at one concurrency, with its evidence directory.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/model/row_loader.h"
#include "capq/qualify/deciding_gate.h"
#include "capq/sim/server.h"
#include "capq/targets/row_limits.h"
#include "capq/trial/trial.h"

namespace capq::cli {
namespace {

std::atomic<bool> g_cancel{false};
std::atomic<int> g_signal{0};

extern "C" void OnSignal(int sig) {
  g_signal.store(sig);
  g_cancel.store(true);
}

void InstallSignals() {
  struct sigaction sa {};
  sa.sa_handler = &OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

std::string ShellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./=:,@+") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A table cell: `v` through `f`, "-" when it is not finite.
std::string Cell(double v, const char* f = "%.1f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

void PrintDist(const char* name, const Distribution& d) {
  std::printf("  %-10s %10s %10s %10s %10s %10s\n", name, Cell(d.p50).c_str(), Cell(d.p95).c_str(),
              Cell(d.p99).c_str(), Cell(d.min).c_str(), Cell(d.max).c_str());
}

}  // namespace

// Shared by `capq trial` and its tests: the one-screen summary.
void PrintTrialSummary(const Row& row, const TrialOptions& o, const TrialReport& rep) {
  const TrialVerdict& v = rep.verdict;
  std::printf("\n%s  %s  trial %d  (%s)\n", row.id.c_str(), LoadLabel(row, o.level).c_str(),
              o.trial_index, PhaseName(o.phase));
  if (rep.metrics) {
    const TrialMetrics& m = *rep.metrics;
    std::printf("  %-10s %10s %10s %10s %10s %10s   (%s percentiles%s)\n", "ms", "p50", "p95",
                "p99", "min", "max", PercentileMethodName(m.method),
                m.time_scale != 1 ? (", virtual time x" + Cell(m.time_scale, "%g")).c_str() : "");
    PrintDist("TTFT", m.ttft_ms);
    PrintDist("ITL", m.itl_ms);
    PrintDist("E2E", m.e2e_ms);
    PrintDist("sched lag", m.scheduling_lag_ms);
    if (v.decided) {
      std::printf(
          "  (decided early: these cover the requests that finished before the decision; "
          "the SLO line is a bound)\n");
    }
    std::printf("  output %s tok/s   %s req/s   %zu requests   server prompt tokens %lld..%lld\n",
                Cell(m.output_tok_s).c_str(), Cell(m.request_per_s, "%.3f").c_str(), m.requests,
                static_cast<long long>(m.prompt_tokens_min),
                static_cast<long long>(m.prompt_tokens_max));
  }
  for (const auto& g : v.slo) {
    std::printf("  SLO  p%g %s %s%s ms < %s ms   %s   %s\n", g.gate.percentile,
                SloMetricName(g.gate.metric), g.at_least ? ">= " : "", Cell(g.measured_ms).c_str(),
                Cell(g.gate.below_ms).c_str(), g.passed ? "pass" : "FAIL",
                ConfidenceText(g.confidence).c_str());
  }
  // A tier's own gates, judged on the same measurement; the verdict above is the row's own slo.
  for (const auto& g : v.tier_slo) {
    std::printf("  tier gate  p%g %s %s ms < %s ms   %s\n", g.gate.percentile,
                SloMetricName(g.gate.metric), Cell(g.measured_ms).c_str(),
                Cell(g.gate.below_ms).c_str(), g.passed ? "pass" : "fail");
  }
  int enabled = 0, passed = 0;
  for (const auto& g : v.correctness.gates) {
    if (!g.enabled) continue;
    ++enabled;
    passed += g.passed ? 1 : 0;
  }
  if (enabled > 0) {
    std::printf(
        "  correctness: %d of %d gates pass   streams %lld, completion tokens %lld, "
        "non-empty chunks %lld, unique outputs %lld\n",
        passed, enabled, static_cast<long long>(v.correctness.totals.streams),
        static_cast<long long>(v.correctness.totals.completion_tokens),
        static_cast<long long>(v.correctness.totals.nonempty_chunks),
        static_cast<long long>(v.correctness.totals.unique_output_hashes));
  }
  for (const auto& r : v.reasons) std::printf("  - %s\n", r.c_str());
  // A latency verdict names the gate that decided it: the worst that missed, else the closest.
  std::string by = DecidingGateText(v);
  if (!by.empty()) by = ", decided by " + by;
  std::printf("  verdict: %s (exit %d)%s\n  evidence: %s\n", TrialOutcomeName(v.outcome),
              v.ExitCode(), by.c_str(), rep.dir.c_str());
}

namespace {

// The trial's numbers and the options the flags set alone; false (said on stderr) when one of
// them does not parse.
bool ReadTrialOptions(const ArgParser& p, TrialOptions* o) {
  Result<long long> c = p.GetInt("concurrency", 1);
  Result<long long> k = p.GetInt("trial", 1);
  Result<double> setup = p.GetDouble("setup-timeout", 120);
  for (const Status& st : {c.status(), k.status(), setup.status()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "capq trial: %s\n", st.message().c_str());
      return false;
    }
  }
  o->level = static_cast<int>(*c);
  o->trial_index = static_cast<int>(*k);
  o->setup_timeout_s = *setup;
  if (auto s = p.Get("seed")) {
    char* end = nullptr;
    unsigned long long v = std::strtoull(s->c_str(), &end, 10);
    if (s->empty() || *end) {
      std::fprintf(stderr, "capq trial: --seed: expected an integer, got '%s'\n", s->c_str());
      return false;
    }
    o->seed = v;
  }
  const std::string phase = p.GetOr("phase", "confirm");
  if (std::optional<QualifyPhase> ph = ParsePhase(phase)) {
    o->phase = *ph;
  } else {
    std::fprintf(stderr, "capq trial: --phase: expected baseline, probe or confirm, got '%s'\n",
                 phase.c_str());
    return false;
  }
  o->insecure_tls = p.Has("insecure");
  o->skip_quiet_period = p.Has("skip-quiet-period");
  o->ignore_tokenize_endpoint = p.Has("no-tokenize");
  o->full_trials = p.Has("full-trials");
  if (auto l = p.Get("loops")) {
    char* end = nullptr;
    const long v = std::strtol(l->c_str(), &end, 10);
    if (*l == "auto") {
      o->loops = 0;
    } else if (l->empty() || *end || v < 1 || v > 256) {
      std::fprintf(stderr, "capq trial: --loops: expected auto or 1 to 256, got '%s'\n",
                   l->c_str());
      return false;
    } else {
      o->loops = static_cast<int>(v);
    }
  }
  if (auto e = p.Get("evidence")) {
    if (*e == "zstd") {
      o->evidence_compression = EvidenceCompression::kZstd;
    } else if (*e == "none") {
      o->evidence_compression = EvidenceCompression::kNone;
    } else if (*e != "auto") {
      std::fprintf(stderr, "capq trial: --evidence: expected auto, zstd or none, got '%s'\n",
                   e->c_str());
      return false;
    }
  }
  if (const char* key = std::getenv("CAPQ_API_KEY")) o->api_key = key;
  return true;
}

// Where the trial directory goes, and the command line command.txt records.
void NameTrial(const Row& row, const ArgParser& p, const Args& args, TrialOptions* o) {
  o->out_dir = p.GetOr("out", "capq-trials/" + row.id + "_c" + std::to_string(o->level) + "_t" +
                                  std::to_string(o->trial_index));
  o->command_line = "capq trial";
  for (const auto& a : args) o->command_line += " " + ShellQuote(a);
}

// The server: --url, else CAPQ_URL, else a sim row's embedded simulator, started here with the
// faults and truth log the flags name. False (said on stderr) when there is none.
bool ConnectServer(const Row& row, const ArgParser& p, TrialOptions* o,
                   std::unique_ptr<sim::SimServer>* embedded) {
  std::string url = p.GetOr("url", "");
  if (url.empty()) {
    if (const char* e = std::getenv("CAPQ_URL")) url = e;
  }
  if (url.empty()) {
    if (row.identity.engine != Engine::kSim) {
      std::fprintf(stderr, "capq trial: no server URL: pass --url or set CAPQ_URL\n");
      return false;
    }
    sim::ServerOptions so = sim::ServerOptionsForRow(row);
    so.faults_path = p.GetOr("sim-faults", "");
    so.truth_log_path = p.GetOr("sim-truth-log", "");
    Result<std::unique_ptr<sim::SimServer>> srv = sim::SimServer::Start(so);
    if (!srv.ok()) {
      std::fprintf(stderr, "capq trial: embedded simulator: %s\n", srv.status().message().c_str());
      return false;
    }
    *embedded = std::move(*srv);
    url = (*embedded)->url();
    o->command_line += "   # embedded simulator at " + url;
  }
  o->url = url;
  return true;
}

// Progress on stderr: on a terminal one line redrawn in place, the load's running counts too;
// else one line an event.
void PrintProgress(bool tty, TrialOptions* o) {
  if (!tty) {
    o->on_progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    return;
  }
  o->on_progress = [](const std::string& line) {
    std::fprintf(stderr, "\r\033[K%s", line.c_str());
  };
  o->on_load_progress = o->on_progress;
}

}  // namespace

int RunTrial(const Args& args) {
  ArgParser p({"row", "concurrency", "trial", "url", "out", "seed", "phase", "setup-timeout",
               "sim-faults", "sim-truth-log", "evidence", "loops"},
              {"insecure", "skip-quiet-period", "no-progress", "no-tokenize", "full-trials"});
  if (Status st = p.Parse(args); !st.ok()) {
    std::fprintf(stderr, "capq trial: %s\n", st.message().c_str());
    return 3;
  }
  auto row_path = p.Get("row");
  if (!row_path) {
    std::fprintf(stderr,
                 "usage: capq trial --row FILE --concurrency C --trial K [--url URL] [--out DIR]"
                 " [--seed S] [--insecure] [--full-trials] [--loops N|auto]\n");
    return 3;
  }
  Result<Row> row = LoadRow(*row_path, CheckServerExpect);
  if (!row.ok()) {
    std::fprintf(stderr, "capq trial: %s\n", row.status().message().c_str());
    return 3;
  }
  TrialOptions o;
  if (!ReadTrialOptions(p, &o)) return 3;
  NameTrial(*row, p, args, &o);
  std::unique_ptr<sim::SimServer> embedded;
  if (!ConnectServer(*row, p, &o, &embedded)) return 3;

  InstallSignals();
  o.cancel = &g_cancel;
  const bool tty = isatty(STDERR_FILENO) && !p.Has("no-progress");
  if (!p.Has("no-progress")) PrintProgress(tty, &o);
  TrialReport rep = capq::RunTrial(*row, o);
  if (tty) std::fprintf(stderr, "\r\033[K");
  if (embedded) embedded->Stop();
  PrintTrialSummary(*row, o, rep);
  std::fflush(stdout);
  return rep.verdict.ExitCode();
}

}  // namespace capq::cli

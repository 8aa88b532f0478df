// capq sim: the embedded simulated engine as a process. Runs until SIGINT or SIGTERM.
#include <pthread.h>

#include <csignal>
#include <cstdio>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/sim/server.h"
#include "capq/sim/variations.h"

namespace capq::cli {
namespace {

constexpr const char* kSimUsage =
    "usage: capq sim --profile FILE [--port N] [--host H] [--time-scale K] [--truth-log FILE]\n"
    "                [--faults FILE] [--dialect sglang|vllm|llamacpp]\n"
    "                [--variations dialect|varied] [--variation-seed N]\n";

// An accept queue shorter than this is worth a warning: trials open this many streams at once.
constexpr int kBurstClients = 1024;

// The server's options from the parsed command line; false (said on stderr, with the usage where
// a flag is missing) when one is missing or does not parse.
bool ReadSimOptions(const ArgParser& parser, sim::ServerOptions* opts) {
  auto profile = parser.Get("profile");
  if (!profile) {
    std::fprintf(stderr, "capq sim: --profile is required\n%s", kSimUsage);
    return false;
  }
  opts->profile_path = *profile;
  opts->host = parser.GetOr("host", opts->host);
  Result<long long> port = parser.GetInt("port", 0);
  Result<double> scale = parser.GetDouble("time-scale", 1.0);
  if (!port.ok() || !scale.ok()) {
    std::fprintf(stderr, "capq sim: %s\n",
                 (!port.ok() ? port.status() : scale.status()).message().c_str());
    return false;
  }
  opts->port = static_cast<int>(*port);
  opts->time_scale = *scale;
  opts->truth_log_path = parser.GetOr("truth-log", "");
  opts->faults_path = parser.GetOr("faults", "");
  Result<sim::Dialect> dialect = sim::ParseDialect(parser.GetOr("dialect", "sglang"));
  if (!dialect.ok()) {
    std::fprintf(stderr, "capq sim: %s\n", dialect.status().message().c_str());
    return false;
  }
  opts->dialect = *dialect;
  Result<sim::VariationMode> mode = sim::ParseVariationMode(parser.GetOr("variations", "dialect"));
  Result<long long> vseed = parser.GetInt("variation-seed", 1);
  if (!mode.ok() || !vseed.ok()) {
    std::fprintf(stderr, "capq sim: %s\n",
                 (!mode.ok() ? mode.status() : vseed.status()).message().c_str());
    return false;
  }
  opts->varied = *mode == sim::VariationMode::kVaried;
  opts->variation_seed = static_cast<uint64_t>(*vseed);
  return true;
}

// Starts the server, says where it listens, and serves until SIGINT or SIGTERM.
int Serve(const sim::ServerOptions& opts) {
  // Block the stop signals before the loop thread starts so it inherits the mask and only this
  // thread receives them, through sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = sim::SimServer::Start(opts);
  if (!server.ok()) {
    std::fprintf(stderr, "capq sim: %s\n", server.status().ToString().c_str());
    return 1;
  }
  // Exactly this shape: scripts read the URL and the digest from it.
  std::printf("capq sim: listening on %s (profile %s, digest %s, time scale %g)\n",
              (*server)->url().c_str(), (*server)->profile().name.c_str(),
              (*server)->identity_digest().c_str(), opts.time_scale);
  std::fflush(stdout);
  if ((*server)->listen_backlog() < kBurstClients) {
    std::fprintf(stderr,
                 "capq sim: warning: the kernel queues only %d connections for accept "
                 "(net.core.somaxconn); beyond that many clients connecting at once, each one "
                 "waits a second for its SYN retry and that second shows in its TTFT\n",
                 (*server)->listen_backlog());
  }

  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*server)->Stop();
  std::printf("capq sim: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunSim(const Args& args) {
  ArgParser parser({"profile", "port", "host", "time-scale", "truth-log", "faults", "dialect",
                    "variations", "variation-seed"},
                   {"help"});
  Status st = parser.Parse(args);
  if (!st.ok()) {
    std::fprintf(stderr, "capq sim: %s\n%s", st.message().c_str(), kSimUsage);
    return 2;
  }
  if (parser.Has("help")) {
    std::fputs(kSimUsage, stdout);
    return 0;
  }
  if (!parser.positionals().empty()) {
    std::fprintf(stderr, "capq sim: unexpected argument '%s'\n%s", parser.positionals()[0].c_str(),
                 kSimUsage);
    return 2;
  }
  sim::ServerOptions opts;
  if (!ReadSimOptions(parser, &opts)) return 2;
  return Serve(opts);
}

}  // namespace capq::cli

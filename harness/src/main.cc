// capq: capacity qualification for LLM inference servers.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "capq/cli/commands.h"
#include "capq/log.h"

namespace {

constexpr const char* kUsage =
    R"(capq — the largest concurrency whose p95 TTFT stays strictly below the SLO, proven.

usage: capq <command> [args]

commands:
  rows check [PATHS]   validate row files (default: rows/) and list them
  rows show ID         print one resolved row as YAML
  rows new --url URL --engine E --isl N --osl N --slo TEXT
                       write a row from the running server (TODOs for what it cannot tell)
  sim --profile FILE   run the embedded simulated engine (OpenAI-compatible server)
  trial --row FILE --concurrency C --trial K
                       run one trial and write its evidence directory
  validate DIR         re-derive a trial's metrics and gates from its raw records
  qualify ROW...       baseline, locate, confirm: the row's Cmax with its evidence
  report DIR...        rebuild report.html from capacity data
  predict ROW          the engine model's Cmax for a row and its capacity surface
  traffic EXPORT...    completed-request exports as a traffic file of paired samples
  probe URL --engine E --out DIR
                       record a server's conformance corpus; probe --check DIR compares one
  doctor --url URL     whether a server as launched can be qualified, checked without generating

environment: CAPQ_URL, CAPQ_API_KEY, CAPQ_CONTAINER, CAPQ_IMAGE_DIGEST, CAPQ_LOG_LEVEL
)";

}  // namespace

int main(int argc, char** argv) {
  capq::InitLogging();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  capq::cli::Args args(argv + 2, argv + argc);
  if (cmd == "rows") return capq::cli::RunRows(args);
  if (cmd == "sim") return capq::cli::RunSim(args);
  if (cmd == "trial") return capq::cli::RunTrial(args);
  if (cmd == "validate") return capq::cli::RunValidate(args);
  if (cmd == "qualify") return capq::cli::RunQualify(args);
  if (cmd == "report") return capq::cli::RunReport(args);
  if (cmd == "predict") return capq::cli::RunPredict(args);
  if (cmd == "traffic") return capq::cli::RunTraffic(args);
  if (cmd == "probe") return capq::cli::RunProbe(args);
  if (cmd == "doctor") return capq::cli::RunDoctor(args);
  std::fprintf(stderr, "capq: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}

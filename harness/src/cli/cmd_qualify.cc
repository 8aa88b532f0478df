// capq qualify: the main job. Baseline, locate, confirm (one process per trial), then the capacity
// data, the report and the row with its new expectation.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/clock.h"
#include "capq/file_io.h"
#include "capq/model/row_loader.h"
#include "capq/qualify/qualify.h"
#include "capq/qualify/recommend.h"
#include "capq/qualify/tiers.h"
#include "capq/record/artifacts.h"
#include "capq/record/capacity_data.h"
#include "capq/report/report.h"
#include "capq/sim/server.h"
#include "capq/targets/row_limits.h"

namespace capq::cli {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_qualify_cancel{false};

extern "C" void OnQualifySignal(int) { g_qualify_cancel.store(true); }

void InstallQualifySignals() {
  struct sigaction sa {};
  sa.sa_handler = &OnQualifySignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

constexpr const char* kUsage =
    "usage: capq qualify ROW... [--url URL] [--out DIR] [--update] [--max-concurrency N]\n"
    "                           [--trials N] [--max-trials N] [--sim-faults FILE] [--insecure]\n"
    "                           [--from-closed-loop CAPACITY_DATA] [--full-trials]\n"
    "                           [--corpus-salt N|random]\n"
    "\n"
    "  Baseline at C=1, locate the boundary (exponential steps + bisection), confirm Cmax and\n"
    "  Cmax+1 with independent trials, each in its own process. A rate row does the same over\n"
    "  its rate levels (level L sends L * rate_step_rps): one step, locate, confirm Rmax and\n"
    "  Rmax + one step. Without --url (or CAPQ_URL) a sim row runs against the embedded "
    "simulator.\n"
    "  A row with slo_tiers then proves a boundary for each further tier, reusing the trials\n"
    "  already run at the same phase, level and trial index.\n"
    "  --out DIR            default artifacts/qualify-<row>-<utc>\n"
    "  --update             rewrite each row file in place with the proven Cmax (or Rmax)\n"
    "  --max-concurrency N  never probe above N (default 256; on a rate row N rate steps); no\n"
    "                       failure up to N is not a claim\n"
    "  --trials N           confirmation trials per side (default: the row's trials.count)\n"
    "  --max-trials N       per side when the sides overlap (default 2 x trials)\n"
    "  --predict HOW        where the search starts: profile (a sim row's engine profile, the\n"
    "                       default there), baseline (the engine model calibrated on the C=1\n"
    "                       baseline, the default on a real server) or none\n"
    "  --no-predict         the same as --predict none\n"
    "  --from-closed-loop F rate rows: start the search at Little's law on the capacity data F of\n"
    "                       a closed-loop qualification of the same identity and shape\n"
    "                       (Cmax / mean E2E at Cmax); refused when F is another identity\n"
    "  --full-trials        run every trial to its last request; by default a trial stops once\n"
    "                       a TTFT or E2E gate can no longer pass (its figure is then a bound)\n"
    "  --loops N|auto       each trial's load generator event loops (capq trial --loops);\n"
    "                       default 1, auto one per core\n"
    "  --corpus-salt N      move every trial's seed (the row's confirm seeds too), so no prompt\n"
    "                       repeats one of a run without it: for qualifying again a server whose\n"
    "                       cache survives the flush (llama.cpp's host prompt cache); `random`\n"
    "                       draws one and prints it\n"
    "exit: 0 boundary proven for every row and tier, 1 no boundary proven, 2 correctness\n"
    "      failure, 3 could not run (setup, identity, baseline), 130 interrupted\n";

std::string SelfExe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

// Severity across rows: interrupted, correctness, could not run, no boundary, proven.
int Worse(int a, int b) {
  auto rank = [](int c) {
    switch (c) {
      case 130:
        return 5;
      case 2:
        return 4;
      case 3:
        return 3;
      case 1:
        return 2;
      default:
        return c == 0 ? 0 : 1;
    }
  };
  return rank(b) > rank(a) ? b : a;
}

// The worst exit code of a row's further SLO tiers (0 without tiers): each tier's boundary counts
// like the row's.
int TiersExitCode(const RowQualification& q) {
  int code = 0;
  for (size_t i = 1; i < q.tiers.size(); ++i) {
    code = Worse(code, QualifyExitCode(q.tiers[i].status));
  }
  return code;
}

// Each further tier's summary line with its cost, then any pair of tiers out of order.
void PrintTiers(const RowQualification& q) {
  for (size_t i = 1; i < q.tiers.size(); ++i) std::printf("  %s\n", TierLine(q.tiers[i]).c_str());
  for (const std::string& v : TierOrderViolations(q)) {
    std::printf("  tier order violated: %s (a bug or noise at the boundary)\n", v.c_str());
  }
}

Status WriteOutputs(const std::string& out_dir, const CapacityData& data) {
  CAPQ_RETURN_IF_ERROR(
      WriteCapacityData((fs::path(out_dir) / "capacity-data.json").string(), data));
  return WriteReport((fs::path(out_dir) / "report.html").string(), data);
}

// Navigation only, the probes and confirmations still decide. `how` "profile": a sim row's own
// engine profile, before any trial; "baseline": the engine model calibrated on the C = 1 baseline
// trial; "none". Empty: profile for a sim row, baseline otherwise.
void SetPrediction(const std::string& how, const Row& row, QualifyOptions* qo) {
  const bool sim = row.identity.engine == Engine::kSim;
  if (how == "none" || row.open_loop()) return;
  if (how == "baseline" || (how.empty() && !sim)) {
    TrialPredictors t = PredictFromBaselineTrial(row, qo->max_level);
    qo->predict_from_baseline = std::move(t.predict);
    qo->refine_prediction = std::move(t.refine);
    return;
  }
  Result<BoundaryPrediction> pred = PredictFromProfile(row, qo->max_level);
  if (!pred.ok()) {
    qo->prediction_note = "no prediction: " + pred.status().message();
    return;
  }
  qo->predicted_cmax = pred->cmax;
  qo->prediction_note = pred->note;
  qo->prediction_source = pred->source;
  qo->predicted_curve = pred->curve;
}

// capq qualify's command line, checked, and what it resolved before any trial runs.
struct QualifyCommand {
  std::string predict;  // --predict, "none" for --no-predict, empty for the row's default
  int max_level = 256;
  int trials = 0;
  int max_trials = 0;
  std::vector<Row> rows;
  // A closed-loop result to start rate rows from, and the file it came from.
  std::optional<CapacityData> closed_loop;
  std::string closed_loop_path;
  std::string url;  // empty: each row runs against its own embedded simulator
  std::string sim_faults;
  bool insecure = false;
  bool update = false;
  bool full_trials = false;
  std::string loops;         // --loops, passed to each trial as is ("" = the trial's default)
  uint64_t corpus_salt = 0;  // --corpus-salt
  std::string exe;
  std::string out_dir;
};

// --corpus-salt N (N >= 1) or `random` (drawn now and printed, so the run can be repeated).
std::optional<int> ReadSalt(const ArgParser& p, QualifyCommand* c) {
  const std::string s = p.GetOr("corpus-salt", "");
  if (s.empty()) return std::nullopt;
  if (s == "random") {
    std::random_device rd;
    c->corpus_salt = (static_cast<uint64_t>(rd()) << 32 | rd()) % 1000000000ULL + 1;
  } else {
    Result<long long> v = p.GetInt("corpus-salt", 0);
    if (!v.ok() || *v < 1) {
      std::fprintf(stderr,
                   "capq qualify: --corpus-salt must be an integer >= 1 or random, not '%s'\n",
                   s.c_str());
      return 3;
    }
    c->corpus_salt = static_cast<uint64_t>(*v);
  }
  std::fprintf(stderr,
               "capq qualify: corpus salt %llu: every trial sends prompts of its own seed\n",
               static_cast<unsigned long long>(c->corpus_salt));
  return std::nullopt;
}

// --predict and the numbers. An exit code when they are refused.
std::optional<int> ReadNumbers(const ArgParser& p, QualifyCommand* c) {
  c->predict = p.Has("no-predict") ? "none" : p.GetOr("predict", "");
  const std::string& predict = c->predict;
  if (predict != "" && predict != "profile" && predict != "baseline" && predict != "none") {
    std::fprintf(stderr, "capq qualify: --predict must be profile, baseline or none, not '%s'\n",
                 predict.c_str());
    return 2;
  }
  Result<long long> max_c = p.GetInt("max-concurrency", 256);
  Result<long long> trials = p.GetInt("trials", 0);
  Result<long long> max_trials = p.GetInt("max-trials", 0);
  for (const Status& st : {max_c.status(), trials.status(), max_trials.status()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "capq qualify: %s\n", st.message().c_str());
      return 3;
    }
  }
  if (*max_c < 1 || *trials < 0 || *max_trials < 0) {
    std::fprintf(stderr, "capq qualify: --max-concurrency must be >= 1, --trials >= 0\n");
    return 3;
  }
  if (std::optional<int> rc = ReadSalt(p, c)) return rc;
  c->max_level = static_cast<int>(*max_c);
  c->trials = static_cast<int>(*trials);
  c->max_trials = static_cast<int>(*max_trials);
  return std::nullopt;
}

// Freeze: every row must load (the loader refuses vague rows) before anything runs.
std::optional<int> LoadRows(const ArgParser& p, QualifyCommand* c) {
  for (const auto& path : p.positionals()) {
    Result<Row> row = LoadRow(path, CheckServerExpect);
    if (!row.ok()) {
      std::fprintf(stderr, "capq qualify: %s\n", row.status().message().c_str());
      return 3;
    }
    c->rows.push_back(std::move(*row));
  }
  return std::nullopt;
}

// A closed-loop result to start rate rows from: read and matched before anything runs.
std::optional<int> ReadClosedLoop(QualifyCommand* c) {
  if (c->closed_loop_path.empty()) return std::nullopt;
  Result<CapacityData> d = ReadCapacityData(c->closed_loop_path);
  if (!d.ok()) {
    std::fprintf(stderr, "capq qualify: --from-closed-loop: %s\n", d.status().message().c_str());
    return 3;
  }
  c->closed_loop = std::move(*d);
  for (const auto& row : c->rows) {
    if (!row.open_loop()) {
      std::fprintf(stderr, "capq qualify: --from-closed-loop starts rate rows; %s is closed loop\n",
                   row.id.c_str());
      return 3;
    }
    Result<int> level =
        PredictLevelFromClosedLoop(row, *c->closed_loop, c->closed_loop_path, nullptr);
    if (!level.ok()) {
      std::fprintf(stderr, "capq qualify: --from-closed-loop: %s\n",
                   level.status().message().c_str());
      return 3;
    }
  }
  return std::nullopt;
}

// The server: --url, else CAPQ_URL, else the embedded simulator, which only a sim row can use.
std::optional<int> ResolveUrl(const ArgParser& p, QualifyCommand* c) {
  c->url = p.GetOr("url", "");
  if (c->url.empty()) {
    if (const char* e = std::getenv("CAPQ_URL")) c->url = e;
  }
  for (const auto& row : c->rows) {
    if (c->url.empty() && row.identity.engine != Engine::kSim) {
      std::fprintf(stderr,
                   "capq qualify: row %s is a %s row: pass --url or set CAPQ_URL (only sim rows "
                   "can use the embedded simulator)\n",
                   row.id.c_str(), EngineName(row.identity.engine));
      return 3;
    }
  }
  return std::nullopt;
}

// The output folder: --out, else artifacts/qualify-<row>-<utc>, created.
std::optional<int> MakeOutDir(const ArgParser& p, QualifyCommand* c) {
  c->out_dir = p.GetOr("out", "");
  if (c->out_dir.empty()) {
    std::string name = c->rows.front().id;
    if (c->rows.size() > 1) name += "-and-" + std::to_string(c->rows.size() - 1) + "-more";
    c->out_dir = "artifacts/qualify-" + name + "-" + UtcNowText("%Y%m%dT%H%M%SZ");
  }
  std::error_code ec;
  fs::create_directories(c->out_dir, ec);
  if (ec) {
    std::fprintf(stderr, "capq qualify: cannot create %s: %s\n", c->out_dir.c_str(),
                 ec.message().c_str());
    return 3;
  }
  return std::nullopt;
}

// The whole command line, each check in the order a user meets them. An exit code when refused.
std::optional<int> ParseQualify(const Args& args, QualifyCommand* c) {
  ArgParser p({"url", "out", "max-concurrency", "trials", "max-trials", "sim-faults",
               "from-closed-loop", "predict", "corpus-salt", "loops"},
              {"update", "insecure", "no-predict", "full-trials", "help"});
  if (std::optional<int> rc = ParseCommand(p, args, "qualify", kUsage, 3)) return rc;
  if (std::optional<int> rc = ReadNumbers(p, c)) return rc;
  if (std::optional<int> rc = LoadRows(p, c)) return rc;
  c->closed_loop_path = p.GetOr("from-closed-loop", "");
  if (std::optional<int> rc = ReadClosedLoop(c)) return rc;
  if (std::optional<int> rc = ResolveUrl(p, c)) return rc;
  c->exe = SelfExe();
  if (c->exe.empty()) {
    std::fprintf(stderr, "capq qualify: cannot resolve /proc/self/exe to spawn trials\n");
    return 3;
  }
  if (std::optional<int> rc = MakeOutDir(p, c)) return rc;
  c->sim_faults = p.GetOr("sim-faults", "");
  c->insecure = p.Has("insecure");
  c->update = p.Has("update");
  c->full_trials = p.Has("full-trials");
  c->loops = p.GetOr("loops", "");
  return std::nullopt;
}

// Without a URL, the row's own embedded simulator. False when it would not start (said on
// stderr); `embedded` stays empty when the command has a URL.
bool StartEmbedded(const Row& row, const QualifyCommand& c,
                   std::unique_ptr<sim::SimServer>* embedded, std::string* row_url) {
  *row_url = c.url;
  if (!row_url->empty()) return true;
  sim::ServerOptions so = sim::ServerOptionsForRow(row);
  so.faults_path = c.sim_faults;
  Result<std::unique_ptr<sim::SimServer>> srv = sim::SimServer::Start(so);
  if (!srv.ok()) {
    std::fprintf(stderr, "capq qualify: %s: embedded simulator: %s\n", row.id.c_str(),
                 srv.status().message().c_str());
    return false;
  }
  *embedded = std::move(*srv);
  *row_url = (*embedded)->url();
  std::fprintf(stderr, "[%s] %s: embedded simulator at %s (profile %s, time scale %g)\n",
               UtcNowText("%H:%M:%S").c_str(), row.id.c_str(), row_url->c_str(),
               row.identity.sim_profile.c_str(), row.identity.time_scale);
  return true;
}

// How each trial of `row` runs: its own process of this executable against `row_url`.
ProcessTrialRunnerOptions RunnerOptions(const Row& row, const QualifyCommand& c,
                                        const std::string& row_url) {
  ProcessTrialRunnerOptions ro;
  ro.exe = c.exe;
  ro.row_path = row.source_path;
  ro.url = row_url;
  ro.out_dir = c.out_dir;
  ro.cancel = &g_qualify_cancel;
  if (c.insecure) ro.extra_args.push_back("--insecure");
  if (c.full_trials) ro.extra_args.push_back("--full-trials");
  if (!c.loops.empty()) ro.extra_args.insert(ro.extra_args.end(), {"--loops", c.loops});
  return ro;
}

// The search's options for `row`: limits, the recorded URL, where it starts and its progress lines.
QualifyOptions RowOptions(const Row& row, const QualifyCommand& c, const std::string& row_url,
                          bool embedded) {
  QualifyOptions qo;
  qo.max_level = c.max_level;
  qo.trials = c.trials;
  qo.max_trials_per_side = c.max_trials;
  qo.url = embedded ? row_url + " (embedded simulator)" : row_url;
  qo.corpus_salt = c.corpus_salt;
  if (c.closed_loop) {
    // Little's law on the closed loop's Cmax: navigation only, like the engine model's guess.
    Result<int> level =
        PredictLevelFromClosedLoop(row, *c.closed_loop, c.closed_loop_path, &qo.prediction_note);
    if (level.ok()) qo.predicted_cmax = std::min(*level, qo.max_level);
  } else {
    SetPrediction(c.predict, row, &qo);
  }
  qo.cancel = &g_qualify_cancel;
  qo.progress = [](const std::string& line) {
    std::fprintf(stderr, "[%s] %s\n", UtcNowText("%H:%M:%S").c_str(), line.c_str());
  };
  return qo;
}

// --update: the row file itself with the new expectation spliced in. Appends what happened to
// `row_note`; a failure is said on stderr and counts as could not run.
void UpdateInPlace(const Row& row, const Row& updated, std::string* row_note, int* exit_code) {
  Result<std::string> original = ReadWholeFile(row.source_path);
  Result<std::string> spliced = original.ok()
                                    ? SpliceRowExpectation(*original, updated, row.source_path)
                                    : Result<std::string>(original.status());
  Status st = spliced.ok() ? WriteFileAtomic(row.source_path, *spliced, ParentDirs::kCreate)
                           : spliced.status();
  if (st.ok()) {
    *row_note += "; updated in place: " + row.source_path;
  } else {
    std::fprintf(stderr, "capq qualify: --update %s: %s\n", row.source_path.c_str(),
                 st.ToString().c_str());
    *exit_code = Worse(*exit_code, 3);
  }
}

// A proven boundary or an operating point: the row with its new expectation beside the capacity
// data (and with --update in place). Returns the line that says where it went; empty when the
// row has nothing to write.
std::string WriteRow(const Row& row, const RowQualification& q, const QualifyCommand& c,
                     const std::string& sim_digest, int* exit_code) {
  if (q.status != QualifyStatus::kProven &&
      !(q.status == QualifyStatus::kLowered && q.operating_point)) {
    return "";
  }
  std::string data_path = (fs::path(c.out_dir) / "capacity-data.json").string();
  Row updated = RowWithQualification(row, q, UtcNowText("%Y-%m-%d"), data_path);
  if (!sim_digest.empty() && updated.identity.image.empty()) {
    // Pin the profile the boundary was measured on, so a changed profile fails the row.
    updated.identity.image = "capq-sim@" + sim_digest;
  }
  std::string beside = (fs::path(c.out_dir) / (row.id + ".yaml")).string();
  if (Status st = WriteFileAtomic(beside, RowToYaml(updated), ParentDirs::kCreate); !st.ok()) {
    std::fprintf(stderr, "capq qualify: %s\n", st.ToString().c_str());
    *exit_code = Worse(*exit_code, 3);
  }
  std::string row_note = updated.expect.rmax_rps
                             ? "row with expect.rmax_rps = " + LoadScaleOf(row).Value(LevelAtRate(
                                                                   row, *updated.expect.rmax_rps))
                             : "row with expect.cmax = " + std::to_string(*updated.expect.cmax);
  row_note += ": " + beside;
  if (c.update && q.status == QualifyStatus::kProven) {
    UpdateInPlace(row, updated, &row_note, exit_code);
  } else if (c.update) {
    row_note += " (not updated in place: the boundary is not proven)";
  }
  return row_note;
}

// The row's lines on stdout: summary, tiers, cost, where the row went and the recommendation.
void PrintRow(const RowQualification& q, const std::string& row_note) {
  std::printf("%s\n", q.summary_line.c_str());
  const std::string confidence = BoundaryConfidenceLine(q, q.boundary_confidence);
  if (!confidence.empty()) std::printf("  %s\n", confidence.c_str());
  PrintTiers(q);
  std::printf("  cost: %s\n", CostLine(q).c_str());
  if (!row_note.empty()) std::printf("  %s\n", row_note.c_str());
  std::printf("  %s\n", RecommendationLine(q).c_str());
  std::fflush(stdout);
}

// One row qualified, its result added to `data` and written with the report at once, then the
// row with its new expectation and its lines on stdout. Returns the row's exit code.
int QualifyRow(const Row& row, const QualifyCommand& c, CapacityData* data) {
  std::unique_ptr<sim::SimServer> embedded;
  std::string row_url;
  if (!StartEmbedded(row, c, &embedded, &row_url)) return 3;
  ProcessTrialRunnerOptions ro = RunnerOptions(row, c, row_url);
  QualifyOptions qo = RowOptions(row, c, row_url, embedded != nullptr);
  RowQualification q = Qualify(row, MakeProcessTrialRunner(ro), qo);
  std::string sim_digest;
  if (embedded) {
    sim_digest = embedded->identity_digest();
    embedded->Stop();
  }
  int exit_code = 0;
  q.complete = q.status != QualifyStatus::kInterrupted && TiersExitCode(q) != 130;
  data->generated_utc = FormatUtc(RealtimeAnchor::Take().unix_ns);
  data->rows.push_back(q);
  if (Status st = WriteOutputs(c.out_dir, *data); !st.ok()) {
    std::fprintf(stderr, "capq qualify: %s\n", st.ToString().c_str());
    exit_code = Worse(exit_code, 3);
  }
  std::string row_note = WriteRow(row, q, c, sim_digest, &exit_code);
  exit_code = Worse(exit_code, Worse(QualifyExitCode(q.status), TiersExitCode(q)));
  PrintRow(q, row_note);
  return exit_code;
}

}  // namespace

int RunQualify(const Args& args) {
  QualifyCommand c;
  if (std::optional<int> rc = ParseQualify(args, &c)) return *rc;
  InstallQualifySignals();
  CapacityData data;
  data.command = "capq qualify";
  for (const auto& a : args) data.command += " " + a;

  int exit_code = 0;
  for (const Row& row : c.rows) {
    if (g_qualify_cancel.load()) break;
    exit_code = Worse(exit_code, QualifyRow(row, c, &data));
  }
  if (g_qualify_cancel.load()) exit_code = 130;
  std::printf("capacity data: %s\nreport: %s\n",
              (fs::path(c.out_dir) / "capacity-data.json").string().c_str(),
              (fs::path(c.out_dir) / "report.html").string().c_str());
  return exit_code;
}

}  // namespace capq::cli

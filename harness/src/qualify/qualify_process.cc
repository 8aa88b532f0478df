// One process per trial (the seed's process boundary) and the row-file splice for --update.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "capq/model/row_loader.h"
#include "capq/qualify/qualify.h"

extern char** environ;

namespace capq {

namespace fs = std::filesystem;

namespace {

TrialSummary CouldNotRun(const std::string& dir, const std::string& why) {
  TrialSummary t;
  t.dir = dir;
  t.outcome = TrialOutcome::kCouldNotRun;
  t.exit_code = 3;
  t.reasons = {why};
  return t;
}

// Spawns argv with stdout/stderr to `log_path`, stdin from /dev/null. Returns the exit code
// (128 + signal when killed), or -1 with `error` set.
int SpawnAndWait(const std::vector<std::string>& argv, const std::string& log_path,
                 const std::atomic<bool>* cancel, double deadline_s, bool* timed_out,
                 std::string* error) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    *error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  bool forwarded = false;
  bool killed = false;
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      continue;
    }
    if (r < 0 && errno != EINTR) {
      *error = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
    if (cancel && cancel->load() && !forwarded) {
      // The child writes what it measured, marks it incomplete and exits 130.
      kill(pid, SIGINT);
      forwarded = true;
    }
    double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (deadline_s > 0 && elapsed_s > deadline_s && !*timed_out) {
      *timed_out = true;
      kill(pid, SIGINT);
    }
    if (*timed_out && !killed && elapsed_s > deadline_s + 30) {
      kill(pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Top-level blocks of a YAML mapping: key -> [first line, end line).
struct Block {
  size_t begin = 0, end = 0;
  bool found = false;
};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      out.push_back(text.substr(pos));
      break;
    }
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

bool IsTopKey(const std::string& line, const std::string& key) {
  return line.rfind(key + ":", 0) == 0;
}

bool IsTopLevel(const std::string& line) {
  return !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#';
}

Block FindBlock(const std::vector<std::string>& lines, const std::string& key) {
  Block b;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!IsTopKey(lines[i], key)) continue;
    b.found = true;
    b.begin = i;
    size_t j = i + 1;
    while (j < lines.size() && !IsTopLevel(lines[j])) ++j;
    // Leave trailing blank lines and comments to whatever follows.
    while (j > i + 1 && (lines[j - 1].find_first_not_of(" \t") == std::string::npos ||
                         lines[j - 1].find_first_not_of(" \t") == lines[j - 1].find('#'))) {
      --j;
    }
    b.end = j;
    break;
  }
  return b;
}

}  // namespace

Result<std::string> SpliceRowExpectation(const std::string& original_text, const Row& updated,
                                         const std::string& row_path) {
  std::vector<std::string> fresh = Lines(RowToYaml(updated));
  std::vector<std::string> lines = Lines(original_text);
  for (const char* key : {"expect", "provenance"}) {
    Block from = FindBlock(fresh, key);
    if (!from.found) continue;
    std::vector<std::string> replacement(fresh.begin() + from.begin, fresh.begin() + from.end);
    Block to = FindBlock(lines, key);
    if (to.found) {
      lines.erase(lines.begin() + to.begin, lines.begin() + to.end);
      lines.insert(lines.begin() + to.begin, replacement.begin(), replacement.end());
    } else {
      while (!lines.empty() && lines.back().empty()) lines.pop_back();
      lines.insert(lines.end(), replacement.begin(), replacement.end());
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  Result<Row> back = LoadRowFromString(out, row_path);
  if (!back.ok()) {
    return Status::Internal("updated row does not load back: " + back.status().message());
  }
  if (back->expect.cmax != updated.expect.cmax ||
      back->expect.rmax_rps.has_value() != updated.expect.rmax_rps.has_value() ||
      (updated.expect.rmax_rps && LevelAtRate(*back, *back->expect.rmax_rps) !=
                                      LevelAtRate(updated, *updated.expect.rmax_rps)) ||
      back->provenance.qualified_on != updated.provenance.qualified_on) {
    return Status::Internal("updated row does not carry the new expectation");
  }
  return out;
}

namespace {

// The wall seconds a trial process may run: `configured` when set; otherwise 600 s of setup plus
// every warm-up and measured request at its full request timeout, in the row's time scale.
double TrialDeadlineS(const Row& row, const TrialRequest& req, double configured) {
  double deadline_s = configured;
  if (deadline_s <= 0) {
    deadline_s = 0;
    double scale = row.identity.time_scale > 0 ? row.identity.time_scale : 1;
    double requests = row.measured.RequestsAt(req.level);
    if (row.open_loop()) {
      // The schedule's length plus every request it sends at its full timeout.
      const OpenLoop& o = row.workload.open_loop;
      const double rate = RateAtLevel(row, req.level);
      const double span_s = o.ramp_s + o.duration_s.value_or(0);
      requests = rate * span_s + o.requests.value_or(0);
      deadline_s = (span_s + (rate > 0 ? o.requests.value_or(0) / rate : 0)) / scale;
    }
    deadline_s += 600 + (row.warmup.requests + requests) * row.request_timeout_s / scale;
  }
  return deadline_s;
}

}  // namespace

TrialRunner MakeProcessTrialRunner(const ProcessTrialRunnerOptions& options) {
  return [options](const Row& row, const TrialRequest& req) -> TrialSummary {
    // "<row>/confirm/c7-t1"; a rate row's folders name the rate: "<row>/confirm/r1p25-t1".
    std::string rel = row.id + "/" + PhaseName(req.phase) + "/" + LoadScaleOf(row).Slug(req.level) +
                      "-t" + std::to_string(req.trial);
    fs::path dir = fs::path(options.out_dir) / rel;
    std::error_code ec;
    fs::create_directories(dir.parent_path(), ec);
    if (fs::exists(dir)) {
      // A rerun into the same output folder: keep the old evidence under another name.
      fs::rename(dir, dir.string() + ".old-" + std::to_string(::getpid()), ec);
    }
    std::vector<std::string> argv = {options.exe,     "trial",
                                     "--row",         options.row_path,
                                     "--concurrency", std::to_string(req.level),
                                     "--trial",       std::to_string(req.trial),
                                     "--seed",        std::to_string(req.seed),
                                     "--phase",       PhaseName(req.phase),
                                     "--url",         options.url,
                                     "--out",         dir.string(),
                                     "--no-progress"};
    argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
    std::string log = dir.string() + ".log";
    std::string error;
    double deadline_s = TrialDeadlineS(row, req, options.trial_deadline_s);
    bool timed_out = false;
    int code = SpawnAndWait(argv, log, options.cancel, deadline_s, &timed_out, &error);
    if (code < 0) return CouldNotRun(rel, error);
    if (timed_out) {
      TrialSummary t =
          CouldNotRun(rel, "trial process still running after its " + std::to_string(deadline_s) +
                               " s wall deadline: stopped; see " + log);
      if (auto partial = ReadTrialDir(dir.string()); partial.ok()) {
        partial->dir = rel;
        partial->outcome = TrialOutcome::kCouldNotRun;
        partial->reasons.push_back(t.reasons.front());
        return *partial;
      }
      return t;
    }
    Result<TrialSummary> t = ReadTrialDir(dir.string());
    if (!t.ok()) {
      return CouldNotRun(rel, "trial process exited with code " + std::to_string(code) +
                                  " and left no readable verdict (" + t.status().message() +
                                  "); see " + log);
    }
    TrialSummary s = std::move(*t);
    s.dir = rel;
    if (s.exit_code != code) {
      s.reasons.push_back("trial process exit code " + std::to_string(code) +
                          " differs from its verdict's " + std::to_string(s.exit_code));
      if (s.outcome == TrialOutcome::kPass) {
        // Fail closed: a pass needs the process to agree.
        s.outcome = TrialOutcome::kCouldNotRun;
      }
    }
    return s;
  };
}

}  // namespace capq

#include "capq/targets/target.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "adapter_common.h"
#include "capq/targets/engine_limits.h"
#include "capq/targets/http.h"

extern char** environ;

namespace capq {

Target::Target(TargetOptions options) : options_(std::move(options)) {
  while (!options_.base_url.empty() && options_.base_url.back() == '/')
    options_.base_url.pop_back();
  HttpOptions h;
  h.api_key = options_.api_key;
  h.insecure_tls = options_.insecure_tls;
  h.timeout_s = options_.control_timeout_s;
  h.connect_timeout_s = std::min(5.0, options_.control_timeout_s);
  http_ = std::make_shared<HttpClient>(std::move(h));
}

Result<nlohmann::json> Target::GetJson(const std::string& path) {
  Result<HttpResponse> r = client().Get(base_url() + path);
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return Status::Unavailable("GET " + path + " returned HTTP " + std::to_string(r->status));
  }
  try {
    return nlohmann::json::parse(r->body);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument("GET " + path + ": not JSON (" + e.what() + ")");
  }
}

namespace {

using internal::adapter::Cancelled;
using internal::adapter::Nap;

}  // namespace

Result<std::string> Target::Probe(MonoNs deadline_ns, const std::atomic<bool>* cancel) {
  const std::string path = ProbePath();
  std::string last = "no answer";
  int attempts = 0;
  do {
    if (Cancelled(cancel)) return Status::Cancelled("interrupted while probing readiness");
    ++attempts;
    Result<HttpResponse> r = client().Get(base_url() + path);
    if (r.ok() && r->status == 200) return "GET " + path;
    last = r.ok() ? "HTTP " + std::to_string(r->status) : r.status().message();
    Nap(250, cancel);
  } while (NowNs() < deadline_ns);
  return Status::Unavailable("server at " + base_url() + " not ready: GET " + path + " (" +
                             std::to_string(attempts) + " attempts), last: " + last);
}

Result<TemplatePrefix> Target::MeasureTemplatePrefix(const std::string& message_a,
                                                     const std::string& message_b) {
  Result<std::vector<int64_t>> a = RenderedTokenIds(message_a);
  if (!a.ok()) return a.status();
  Result<std::vector<int64_t>> b = RenderedTokenIds(message_b);
  if (!b.ok()) return b.status();
  size_t n = 0;
  while (n < a->size() && n < b->size() && (*a)[n] == (*b)[n]) ++n;
  TemplatePrefix p;
  p.tokens = static_cast<int64_t>(n);
  p.prompt_tokens = static_cast<int64_t>(a->size());
  p.method = RenderMethod() + " of two prompts: their common token prefix";
  return p;
}

std::vector<std::string> Target::CacheSettings(const ServerFacts& facts) const {
  std::vector<std::string> out;
  for (const LimitSpec& l : ReportableLimits(engine())) {
    auto it = facts.values.find(l.key);
    if (l.type == LimitType::kFlag && it != facts.values.end()) {
      out.push_back(std::string(l.key) + "=" + it->second);
    }
  }
  return out;
}

Result<std::string> Target::Metrics() {
  Result<HttpResponse> r = client().Get(base_url() + "/metrics");
  if (!r.ok()) return r.status();
  if (r->status != 200) {
    return Status::Unavailable("GET /metrics returned HTTP " + std::to_string(r->status));
  }
  return std::move(r->body);
}

Result<std::string> Target::WaitIdle(MonoNs deadline_ns, const std::atomic<bool>* cancel) {
  int polls = 0;
  while (true) {
    if (Cancelled(cancel)) return Status::Cancelled("interrupted while waiting for idle");
    Result<std::string> m = Metrics();
    if (!m.ok()) {
      return "no load metrics (" + m.status().message() +
             "): idle not checked; the flush's busy retry and verify-cold guard the trial";
    }
    ++polls;
    ServerLoad load = ParseLoad(*m);
    if (!load.running && !load.waiting) {
      return std::string("the server's /metrics has no running/queued gauges: idle not checked");
    }
    double busy = load.running.value_or(0) + load.waiting.value_or(0);
    if (busy <= 0) return "idle after " + std::to_string(polls) + " /metrics poll(s)";
    if (NowNs() >= deadline_ns) {
      return Status::DeadlineExceeded("server still busy (" + std::to_string(busy) +
                                      " requests running or queued) at the idle deadline");
    }
    Nap(250, cancel);
  }
}

Result<IdentityInputs> Target::LocalIdentity() const { return ResolveRunningImage(); }

std::map<std::string, double> ParsePrometheus(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos || name_end == 0) continue;
    std::string name = line.substr(0, name_end);
    size_t value_start;
    if (line[name_end] == '{') {
      size_t close = line.find('}', name_end);
      if (close == std::string::npos) continue;
      value_start = close + 1;
    } else {
      value_start = name_end;
    }
    while (value_start < line.size() && line[value_start] == ' ') ++value_start;
    char* end = nullptr;
    const char* begin = line.c_str() + value_start;
    double v = std::strtod(begin, &end);
    if (end == begin || std::isnan(v)) continue;
    out[name] += v;
  }
  return out;
}

std::map<std::string, std::string> PrometheusLabels(const std::string& text,
                                                    const std::string& metric) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(metric + "{", 0) != 0) continue;
    // name{k="v",k2="v2"} value: values may hold escaped quotes (\") and commas.
    size_t i = metric.size() + 1;
    while (i < line.size() && line[i] != '}') {
      size_t eq = line.find('=', i);
      if (eq == std::string::npos || eq + 1 >= line.size() || line[eq + 1] != '"') break;
      std::string key = line.substr(i, eq - i);
      std::string value;
      size_t j = eq + 2;
      for (; j < line.size() && line[j] != '"'; ++j) {
        if (line[j] == '\\' && j + 1 < line.size()) ++j;
        value += line[j];
      }
      out[key] = value;
      i = j + 1;
      if (i < line.size() && line[i] == ',') ++i;
    }
    return out;
  }
  return out;
}

// ---- Identity ------------------------------------------------------------------------------

bool IdentityCheck::ok() const {
  return std::none_of(fields.begin(), fields.end(),
                      [](const IdentityField& f) { return f.fails(); });
}

std::string IdentityCheck::Summary() const {
  std::string out;
  for (const auto& f : fields) {
    if (!f.fails()) continue;
    if (!out.empty()) out += "; ";
    out += f.name + " pinned " + f.pinned + ", running " +
           (f.running.empty() ? "(not reported)" : f.running);
    if (!f.note.empty()) out += " (" + f.note + ")";
  }
  return out.empty() ? "" : "identity mismatch: " + out + " — requalify";
}

nlohmann::json IdentityCheck::ToJson() const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& f : fields) {
    arr.push_back({{"name", f.name},
                   {"pinned", f.pinned},
                   {"running", f.running},
                   {"verified", f.verified},
                   {"match", f.match},
                   {"unverifiable", f.unverifiable},
                   {"note", f.note}});
  }
  return {{"ok", ok()}, {"summary", Summary()}, {"fields", arr}};
}

namespace {

std::string DigestHex(const std::string& s) {
  size_t at = s.find("sha256:");
  if (at == std::string::npos) return "";
  std::string hex = s.substr(at + 7);
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.back()))) hex.pop_back();
  std::transform(hex.begin(), hex.end(), hex.begin(), ::tolower);
  return hex;
}

bool SameValue(const std::string& a, const std::string& b) {
  char* ea = nullptr;
  char* eb = nullptr;
  double da = std::strtod(a.c_str(), &ea);
  double db = std::strtod(b.c_str(), &eb);
  if (!a.empty() && !b.empty() && *ea == '\0' && *eb == '\0') {
    return da == db || std::fabs(da - db) <= 1e-9 * std::max(std::fabs(da), std::fabs(db));
  }
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), ::tolower);
    return s;
  };
  return lower(a) == lower(b);
}

std::string NumberText(double v) {
  std::ostringstream o;
  o.precision(12);
  o << v;
  return o.str();
}

}  // namespace

namespace {

// The simulator's image: the digest of its profile, pinned by the row or else the row's own
// profile file's, against the digest the server reports.
IdentityField SimImageField(const Identity& id, const ServerFacts& facts,
                            const IdentityInputs& in) {
  IdentityField f;
  f.name = "image";
  std::string pinned_hex = DigestHex(id.image);
  std::string local_hex = DigestHex(in.sim_profile_digest);
  f.pinned = id.image.empty() ? "sha256:" + local_hex + " (digest of the row's profile)" : id.image;
  if (pinned_hex.empty()) pinned_hex = local_hex;
  f.running = facts.sim_identity_digest.value_or("");
  f.verified = facts.sim_identity_digest.has_value() && !pinned_hex.empty();
  f.match = f.verified && DigestHex(f.running) == pinned_hex;
  if (!facts.sim_identity_digest) f.note = "the server reports no capq_sim identity digest";
  if (f.match && !local_hex.empty() && local_hex != pinned_hex) {
    f.match = false;
    f.note = "the row's profile file hashes to sha256:" + local_hex + ", not the pinned digest";
  }
  return f;
}

// A real engine's image digest, against the running image found on this side.
IdentityField EngineImageField(const Identity& id, const IdentityInputs& in) {
  IdentityField f;
  f.name = "image";
  f.pinned = id.image;
  f.running = in.running_image;
  f.verified = !in.running_image.empty() && !DigestHex(id.image).empty();
  f.match = f.verified && DigestHex(in.running_image) == DigestHex(id.image);
  f.note = in.running_image.empty() ? in.image_error : "from " + in.image_source;
  return f;
}

IdentityField ServedModelField(const Identity& id, const ServerFacts& facts) {
  IdentityField f;
  f.name = "served_model_name";
  f.pinned = id.served_model_name;
  for (const auto& m : facts.served_models) f.running += (f.running.empty() ? "" : ",") + m;
  f.verified = !facts.served_models.empty();
  f.match = std::find(facts.served_models.begin(), facts.served_models.end(),
                      id.served_model_name) != facts.served_models.end();
  if (!f.verified) f.note = "GET /v1/models listed no model";
  return f;
}

// Model revision: only servers started from a hub cache path reveal it (".../snapshots/<hex>").
IdentityField ModelRevisionField(const Identity& id, const ServerFacts& facts,
                                 const IdentityInputs& in) {
  IdentityField f;
  f.name = "model_revision";
  f.pinned = id.model_revision;
  size_t at = facts.model_path.find("/snapshots/");
  if (at != std::string::npos) {
    f.running = facts.model_path.substr(at + 11, 40);
    f.verified = true;
    f.match = SameValue(f.running, f.pinned);
    f.note = "from the model path " + facts.model_path;
  } else if (!in.model_revision.empty()) {
    f.running = in.model_revision;
    f.verified = true;
    f.match = SameValue(f.running, f.pinned);
    f.note = "from CAPQ_MODEL_REVISION (the server's model path " +
             (facts.model_path.empty() ? std::string("is not reported") : facts.model_path) + ")";
  } else {
    f.running = facts.model_path;
    f.unverifiable = true;
    f.note = "unverifiable: the server's model path (" +
             (facts.model_path.empty() ? std::string("not reported") : facts.model_path) +
             ") names no snapshot and CAPQ_MODEL_REVISION is not set; the revision is taken from "
             "the row";
  }
  return f;
}

// Time scale (simulator): every reported duration is scaled by it, so it must be the row's.
IdentityField TimeScaleField(const Identity& id, const ServerFacts& facts) {
  IdentityField f;
  f.name = "time_scale";
  f.pinned = NumberText(id.time_scale);
  f.running = facts.sim_time_scale ? NumberText(*facts.sim_time_scale) : "";
  f.verified = facts.sim_time_scale.has_value();
  f.match = f.verified && SameValue(f.pinned, f.running);
  if (!f.verified) f.note = "the server reports no capq_sim time_scale";
  return f;
}

// One pinned server_expect key against the value the server reports under it.
IdentityField ServerExpectField(const std::string& key, const std::string& pinned,
                                const ServerFacts& facts) {
  IdentityField f;
  f.name = "server_expect." + key;
  f.pinned = pinned;
  auto it = facts.values.find(key);
  if (it == facts.values.end()) {
    f.note = "the server does not report " + key;
  } else {
    f.running = it->second;
    f.verified = true;
    f.match = SameValue(pinned, it->second);
  }
  return f;
}

}  // namespace

IdentityCheck CheckIdentity(const Row& row, const ServerFacts& facts, const IdentityInputs& in) {
  IdentityCheck check;
  const Identity& id = row.identity;
  const bool sim = id.engine == Engine::kSim;
  check.fields.push_back(sim ? SimImageField(id, facts, in) : EngineImageField(id, in));
  // Served model name (a sim row may leave it to its profile, which the digest already pins).
  if (!(sim && id.served_model_name.empty())) check.fields.push_back(ServedModelField(id, facts));
  if (!sim && !id.model_revision.empty()) {
    check.fields.push_back(ModelRevisionField(id, facts, in));
  }
  if (sim) check.fields.push_back(TimeScaleField(id, facts));
  for (const auto& [key, pinned] : id.server_expect) {
    check.fields.push_back(ServerExpectField(key, pinned, facts));
  }
  return check;
}

IdentityInputs ResolveRunningImage() {
  IdentityInputs in;
  if (const char* rev = std::getenv("CAPQ_MODEL_REVISION"); rev && *rev) in.model_revision = rev;
  if (const char* d = std::getenv("CAPQ_IMAGE_DIGEST"); d && *d) {
    in.running_image = d;
    in.image_source = "CAPQ_IMAGE_DIGEST";
    return in;
  }
  const char* container = std::getenv("CAPQ_CONTAINER");
  if (!container || !*container) {
    in.image_error =
        "no server reports its image digest: set CAPQ_IMAGE_DIGEST, or CAPQ_CONTAINER to the "
        "container's name for docker inspect";
    return in;
  }
  Result<std::string> digest = ContainerImageDigest(container);
  if (!digest.ok()) {
    in.image_error = digest.status().message();
    return in;
  }
  in.running_image = *digest;
  in.image_source = "docker/podman inspect " + std::string(container);
  return in;
}

namespace {

// One runtime's answer: the container's image id, then that image's repo digests (a container only
// knows its id). podman takes docker's inspect templates unchanged.
Result<std::string> RuntimeImageDigest(const std::string& runtime, const std::string& container) {
  Result<std::string> image_id =
      RunCapture({runtime, "inspect", "--format", "{{.Image}}", container}, 20);
  if (!image_id.ok()) {
    return Status::NotFound(runtime + " inspect " + container + ": " + image_id.status().message());
  }
  std::string image = *image_id;
  while (!image.empty() && std::isspace(static_cast<unsigned char>(image.back()))) image.pop_back();
  Result<std::string> digests = RunCapture(
      {runtime, "image", "inspect", "--format", "{{join .RepoDigests \" \"}}", image}, 20);
  if (!digests.ok() || digests->find("sha256:") == std::string::npos) {
    return Status::NotFound(
        runtime + " image inspect " + image + ": no repo digest" +
        (digests.ok() ? std::string() : " (" + digests.status().message() + ")"));
  }
  std::string first = *digests;
  return first.substr(0, first.find_first_of(" \n"));
}

}  // namespace

Result<std::string> ContainerImageDigest(const std::string& container) {
  std::string tried;
  int not_run = 0;
  for (const char* runtime : {"docker", "podman"}) {
    Result<std::string> digest = RuntimeImageDigest(runtime, container);
    if (digest.ok()) return digest;
    // RunCapture's spawn failure: the runtime is not on PATH (or not executable).
    if (digest.status().message().find(": cannot run (") != std::string::npos) ++not_run;
    tried += (tried.empty() ? "" : "; ") + digest.status().message();
  }
  if (not_run == 2) return Status::NotFound("neither docker nor podman can be run: " + tried);
  return Status::NotFound(tried);
}

Result<std::string> RunCapture(const std::vector<std::string>& argv, double timeout_s) {
  if (argv.empty()) return Status::InvalidArgument("RunCapture: empty argv");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return Status::Internal("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return Status::Unavailable(argv[0] + ": cannot run (" + std::string(strerror(rc)) + ")");
  }
  std::string out;
  const MonoNs deadline = NowNs() + static_cast<MonoNs>(timeout_s * 1e9);
  bool timed_out = false;
  while (true) {
    int left_ms = static_cast<int>((deadline - NowNs()) / 1000000);
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, left_ms);
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) return Status::DeadlineExceeded(argv[0] + ": timed out");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Unavailable(argv[0] + " exited with status " +
                               std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return out;
}

nlohmann::json CacheCounterRuleToJson(const CacheCounterRule& rule) {
  return {{"absent_means_zero", rule.absent_means_zero},
          {"only_if_any_reported", rule.only_if_any_reported},
          {"cold_by_unique_prompts", rule.cold_by_unique_prompts},
          {"reported_always", rule.reported_always},
          {"source", rule.source},
          {"launch_hint", rule.launch_hint}};
}

CacheCounterRule CacheCounterRuleFromJson(const nlohmann::json& j) {
  CacheCounterRule rule;
  if (!j.is_object()) return rule;
  rule.absent_means_zero = j.value("absent_means_zero", false);
  rule.only_if_any_reported = j.value("only_if_any_reported", false);
  rule.cold_by_unique_prompts = j.value("cold_by_unique_prompts", false);
  rule.reported_always = j.value("reported_always", false);
  rule.source = j.value("source", "");
  rule.launch_hint = j.value("launch_hint", "");
  return rule;
}

}  // namespace capq

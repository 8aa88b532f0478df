// capq doctor: a preflight that tells, before the first trial, whether a server as launched can
// be qualified (issue 28). It generates nothing: no chat completion is ever sent. It asks what a
// trial's preparation asks (targets/target.h): the engine's generation-free readiness probe, its
// info documents, the identity a row pins, /metrics, a flush (only while the server is idle: a
// flush is not generation), the tokenizer and the chat-template endpoints; and it reads the
// engine's cache-counter rule. Each check is a DoctorCheck; one that would make a qualification
// fail is kFail and carries the launch flag or setting that fixes it on that engine, in the
// adapter's own words where the adapter has them.
//
// Thread safety: RunDoctor() blocks its calling thread; separate calls share nothing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/status.h"
#include "capq/targets/target.h"

namespace capq {

enum class DoctorLevel { kOk, kWarn, kFail };
const char* DoctorLevelName(DoctorLevel level);  // "ok", "warn", "FAIL"

enum class DoctorCheckId {
  kReady,          // the engine's readiness probe answers, generating nothing
  kInfo,           // the engine's info documents (Target::Facts)
  kModel,          // the model name(s) served
  kIdentity,       // the row's pinned identity against the server's (only with a row)
  kMetrics,        // GET /metrics and the running/queued load in it
  kCacheCounter,   // a cached-token count verify_cold can read: per request or the server's own
  kCacheSettings,  // the cache settings in force, where the engine reports them
  kFlush,          // the engine's flush, and whether its answer proves the cache empty
  kTokenizer,      // the tokenize endpoint (prompt calibration, the text re-count)
  kTemplate,       // the chat-template prefix every prompt shares (verify_cold's allowance)
};
// "ready", "info", "model", "identity", "metrics", "cache counter", "cache settings", "flush",
// "tokenizer", "template"
const char* DoctorCheckName(DoctorCheckId id);

struct DoctorCheck {
  DoctorCheckId id = DoctorCheckId::kReady;
  DoctorLevel level = DoctorLevel::kOk;
  std::string found;  // what the check found, in words
  // The launch flag or setting that fixes it on this engine (for a kWarn, what to change should
  // a trial trip over it); empty when none is known or when `found` is an adapter's error that
  // already names it ("... start the server with --slot-save-path").
  std::string fix;
};

struct DoctorReport {
  std::vector<DoctorCheck> checks;                  // in the order they ran
  const DoctorCheck* Find(DoctorCheckId id) const;  // nullptr when the check did not run
  bool reachable() const;                           // the readiness probe answered
  // The checks that would make a qualification fail (kFail), in order.
  std::vector<DoctorCheckId> Deciding() const;
  std::vector<DoctorCheckId> Warnings() const;
};

struct DoctorOptions {
  TargetOptions target;  // the server; nothing else is contacted
  // The adapter: engine (and for Engine::kSim the dialect and, with a row, its profile).
  Identity identity;
  std::optional<Row> row;       // compared with the server when given (its identity, cache policy)
  double ready_timeout_s = 10;  // how long the readiness probe is retried
  double flush_timeout_s = 5;   // idle wait plus the flush's busy retries
};

// The engine a `--engine` word names: "sglang", "vllm", "llamacpp", "openai", or the simulator
// as `capq probe` names it ("sim" = its SGLang dialect, "sim:vllm", ...). InvalidArgument
// otherwise.
Result<Identity> ParseDoctorEngine(const std::string& name);
// "sglang", ..., "sim (sglang dialect)".
std::string DoctorEngineName(const Identity& identity);

// Runs every check. When the server is not ready only kReady is reported. Error only when no
// adapter can be made for the options (a URL that is not http(s), an unknown engine).
Result<DoctorReport> RunDoctor(const DoctorOptions& options);

}  // namespace capq

// capq probe: a server's conformance corpus, recorded and checked (issue 24).
//
// RecordCorpus() records what a server sends, in the format of tests/data/conformance/llamacpp/
// (INDEX.md there): per exchange NN-name.req (the request bytes as sent), NN-name.resp (status
// line, headers and body as framed on the wire: the raw chunked framing of a stream is kept) and,
// for streams, NN-name.times.jsonl (when each piece arrived); MANIFEST.jsonl and INDEX.md. It asks
// what the engine's adapter (targets/target.h) asks, plus a few short streamed chats at C=1, a
// burst of concurrent streamed chats and one over-context request, and talks to no other host.
//
// CheckCorpus() holds a corpus to capq's dialect of its engine, shape by shape: it replays every
// recorded request against a reference server (capq's simulator in that dialect, started by the
// caller) and compares status, content type, framing, JSON key sets and value types (null, absent,
// number, string, ...), key order where the dialect claims it, the SSE events per HTTP chunk and
// the chunk kinds in order. It also runs the engine's adapter on the recorded answers, served back
// from loopback, and on the reference, and compares what each call made of them. Numbers, ids,
// text and timestamps are not compared.
//
// Thread safety: each call is self-contained; RecordCorpus() runs its burst on threads of its own.
#pragma once

#include <string>
#include <vector>

#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

// The engine a corpus speaks: a real engine's dialect, and whether the server is capq's simulator
// speaking it (which also answers GET /capq/sim).
struct ProbeEngine {
  Engine dialect = Engine::kSglang;  // never Engine::kSim
  bool sim = false;
};

// "sglang" | "vllm" | "llamacpp" | "sim" (the simulator's default dialect, SGLang's) |
// "sim:sglang" | "sim:vllm" | "sim:llamacpp".
Result<ProbeEngine> ParseProbeEngine(const std::string& name);
std::string ProbeEngineName(const ProbeEngine& e);

struct ProbeOptions {
  std::string base_url;  // the server; nothing else is contacted
  ProbeEngine engine;
  std::string out_dir;  // created; must not hold a corpus already
  // Sent as "Authorization: Bearer"; written into no file (the .req files show it redacted).
  std::string api_key;
  bool insecure_tls = false;
  double timeout_s = 120;  // per exchange, wall seconds
  int c1_streams = 3;      // streamed chats sent one after another
  int burst = 16;          // streamed chats sent at once
  int max_tokens = 16;
};

struct ProbeSummary {
  int exchanges = 0;
  std::vector<std::string> notes;  // what could not be recorded, and why
};

// Writes the corpus. Error only when nothing could be recorded (the directory cannot be written,
// or the server never answered); exchanges the server refused are recorded as it answered.
Result<ProbeSummary> RecordCorpus(const ProbeOptions& options);

// The engine a corpus recorded by RecordCorpus() names in its MANIFEST.jsonl. NotFound for a
// corpus that names none (recorded by other means: then the caller must say).
Result<ProbeEngine> CorpusEngine(const std::string& dir);
// The engine build a corpus was recorded from, where the engine reports one in an info document
// (targets/control_requests.h ReportedBuildNumber); 0 when the corpus has no such answer.
int CorpusBuild(const std::string& dir, const ProbeEngine& engine);

struct CheckOptions {
  std::string dir;
  ProbeEngine engine;
  // capq's simulator speaking engine.dialect, idle, started by the caller (the protocol layer does
  // not start servers).
  std::string reference_url;
  // The dialect claims the key order of its stream chunks (llama.cpp: "choices" first, and
  // "finish_reason" first in a choice), so the order is compared there.
  bool chunk_key_order = false;
  double timeout_s = 120;  // per exchange
};

struct ShapeDifference {
  std::string file;  // "14-chat-stream-max_tokens.resp", or "adapter" for the adapter's calls
  std::string what;  // "status", "content-type", "frame C $.choices[0].logprobs", ...
  std::string recorded;
  std::string capq;
  // "FILE: WHAT: recorded R, capq C" on one line.
  std::string Line() const;
};

struct CheckReport {
  int exchanges_compared = 0;
  std::vector<ShapeDifference> differences;
  std::vector<std::string> notes;  // exchanges not compared, and why
};

// Error when the corpus cannot be read or the reference does not answer; every difference is
// data in the report.
Result<CheckReport> CheckCorpus(const CheckOptions& options);

}  // namespace capq

// The load generator: closed-loop streaming chat completions over libcurl multi on one thread.
//
// RunLoad() sends the warm-up list as a closed loop at its own concurrency, then the measured list
// as its arrival model releases it (arrival.h): by default a closed-loop burst, where C requests
// start together and every completion immediately starts the next request, until the list is used;
// or on an open-loop schedule. Every record keeps the intended and the actual send time. All
// transfers run on the calling thread's event loop, which only stamps, frames SSE (sse.h) and hands
// bytes and times to the recorder thread; the recorder decodes each stream as it arrives
// (decode.h), writes the evidence (raw_evidence.h) and runs the fail-fast check.
//
// The three stamps of every event (SseEvent):
//   kernel_ns   the kernel's receive stamp of the newest byte of the read that completed the event,
//               taken by a peek at the socket's queue just before libcurl reads it, and kept only
//               while the socket's count of bytes received shows nothing landed since the peek
//               (receive_stamp.h); 0 otherwise. Never before the bytes, and not late by the sockets
//               served before this one. Metrics use it where it is set (SseEvent::stamp_ns()).
//   arrival_ns  the write callback's own clock read, first thing: never before the bytes, late by
//               the sockets served before this one since they arrived. Metrics use it where there
//               is no kernel stamp.
//   wake_ns     the first moment the loop saw the socket readable (an epoll answer; between socket
//               actions the loop glances at epoll again every 16 actions, so a socket that turns
//               readable while others are served is seen then, not when its turn comes). The bytes
//               that made it readable were there by then; bytes that landed after it but before
//               the read carry it too, early by up to arrival_ns - wake_ns. So each event's true
//               arrival lies in [wake_ns - the kernel's wake-up, arrival_ns].
// tests/bench/fidelity_bench.cc measures both against the simulator's hand-over and write(2).
//
// Loops (LoadSpec::loops): with more than one, the requests are spread over that many event
// loops, each on its own thread with its own curl multi handle, epoll, connection pool and
// recorder; they share no per-event state (wrk2's "one event loop per thread"). The arrival model
// is split (ArrivalModel::Split): request i goes to loop i % m, a closed loop's slots are dealt
// out over the loops, a schedule keeps every request's intended time, and all loops start the
// measured phase at one moment, after every loop's warm-up share ended. Every record keeps its
// index in LoadResult::records, so a run's result has the same layout at any number of loops.
// A fail-fast stop, stall or early decision seen by any loop stops every loop at once (an
// eventfd wakes each); the recorders write the one evidence file line by line under a lock, and
// each loop's figures are in LoadResult::loops. A model that cannot be split (sessions) runs on
// one loop.
//
// Thread safety: RunLoad() may be called from any thread; it blocks that thread until the run ends,
// running the first loop on it. `on_progress` is called on that same thread. With more than one
// loop, `on_complete_check` is called from each loop's recorder thread, so it must be safe to
// call from several threads at once. Per-request failures are data, never a Status.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"
#include "capq/measurement/arrival.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/early_decision.h"
#include "capq/measurement/raw_record.h"
#include "capq/measurement/sse.h"
#include "capq/status.h"

namespace capq {

struct PlannedRequest {
  std::string
      id;  // unique in the run, e.g. "w3", "m17"; names the request in every gate's evidence
  Phase phase = Phase::kMeasured;
  int index = 0;     // position in its phase's list (0-based)
  std::string body;  // the full JSON request body, sent as is
};

class EvidenceWriter;

struct LoadProgress {
  Phase phase = Phase::kWarmup;
  int total = 0;  // requests in the current phase
  int started = 0;
  int completed = 0;  // finished in any way, including failures
  int failed = 0;     // status != 200, transport error, timeout or cancel
  int in_flight = 0;
  MonoNs now_ns = 0;
};

struct LoadSpec {
  std::string url;      // the full chat completions URL, http:// or https://
  std::string api_key;  // "" = none; sent only as "Authorization: Bearer" to `url`; never logged
  std::vector<PlannedRequest> warmup;
  int warmup_concurrency = 1;
  std::vector<PlannedRequest> measured;
  // Closed loop (measured_arrivals unset): the number of slots; unused by an arrival model.
  int concurrency = 1;
  // The idle connections the pool keeps for reuse; 0: one per slot (`concurrency`). An open loop
  // sets it to the in-flight count a busy server's queue reaches.
  int connections = 0;
  // When set, the measured list is released by this arrival model (arrival.h) instead of a closed
  // loop at `concurrency`; warm-ups always run as a closed loop at warmup_concurrency.
  ArrivalFactory measured_arrivals;
  // > 0: at most this many requests in flight; a due release waits for a completion (and its
  // lateness shows in actual_send_ns - intended_send_ns). 0 = no cap.
  int max_in_flight = 0;
  double request_timeout_s = 600;  // wall seconds per request, connect included
  double connect_timeout_s = 30;   // wall seconds for the TCP/TLS connect alone
  bool insecure_tls = false;       // TLS verification is ON unless this is set
  // When it becomes true, in-flight requests are cut, the rest are not sent (they are returned as
  // cancelled with actual_send_ns == 0), and RunLoad() returns promptly with interrupted = true.
  const std::atomic<bool>* cancel = nullptr;
  // Optional; called from the loop thread at most about 4 times a second and at each phase end.
  std::function<void(const LoadProgress&)> on_progress;
  // Fail fast (both optional). `on_complete_check` is called with each record that just finished
  // and its decoded stream, on the recorder thread (one record at a time), so that decoding never
  // delays the loop's timestamps or sends. An answer stops the run: nothing more is sent,
  // in-flight requests (those a freed slot started while the check ran among them) are cut and
  // marked cancelled_by_harness, and RunLoad() returns with `stopped_by` set (not interrupted). A
  // phase ends only once its streams were checked.
  std::function<std::optional<std::string>(const RawRecord&, const RequestResult&)>
      on_complete_check;
  // > 0: an in-flight stream whose body began and then received no byte for this many wall
  // seconds is cut as stalled, which stops the run the same way. The wait for the first body
  // byte is the request's TTFT and is bounded by request_timeout_s alone. Checked on the loop's
  // 20 ms tick, so the cut comes within that of the bound.
  double stall_timeout_s = 0;
  // Early decision (early_decision.h), when enabled: about every 10 ms of the measured phase the
  // recorder asks the rule with what it knows of each measured request at that moment. A decision
  // stops the run as a fail-fast answer does, except that nothing failed: in-flight and unsent
  // requests are marked kDecidedEarlyCut and LoadResult::decided says which gate decided, when.
  // A fail-fast answer seen first wins.
  EarlyDecisionRules early_decision;
  // Evidence streamed (raw_evidence.h): when set, the recorder thread writes each send, event and
  // finished record to it as they happen, and flushes it to the kernel at every finished record.
  // Lines only: the caller writes the file's first and last lines.
  EvidenceWriter* evidence = nullptr;
  // true: records keep their events too (tools, tests). false: events live in `evidence` alone
  // and in the decoded results, and memory stays flat in the number of tokens streamed; a
  // request whose text its arrival model wants (ArrivalModel::WantsText) keeps them until it
  // ends, when they are decoded for the model and dropped.
  bool keep_events = true;
  // The event loops the requests are spread over (loadgen.h, "Loops"); 0 = one per core. One by
  // default: on a 2-core machine a second loop competes with the recorders and a local server.
  int loops = 1;
  size_t max_event_bytes = SseFramer::kDefaultMaxEventBytes;
  size_t max_body_bytes = 16u << 20;  // non-SSE response bytes kept per request
};

struct LoadResult {
  std::vector<RawRecord> records;  // warm-up records first, then measured, each in send order
  // records[i] decoded, as its events arrived (decode.h): the same as DecodeRecord(records[i])
  // when the records keep their events, but with the stream's facts only (StreamDecoder::Keep):
  // no text (its size, UTF-8 check and SHA-256 are there) and no chunk gaps, so that a stream in
  // flight holds neither; both are in `evidence`.
  std::vector<RequestResult> results;
  RealtimeAnchor anchor;         // taken at the start of the run
  MonoNs start_ns = 0;           // first warm-up send (or measured burst start if no warm-up)
  MonoNs measured_start_ns = 0;  // the measured burst start
  MonoNs end_ns = 0;
  bool interrupted = false;  // the cancel flag was seen
  // Fail fast: the request whose check (or stall) stopped the run, and what the check said;
  // "" = the run was not stopped.
  std::string stopped_by;
  std::string stop_reason;
  // Early decision: the gate whose verdict was certain, and when (stopped_by then stays "").
  std::optional<EarlyDecision> decided;
  std::string evidence_error;  // LoadSpec::evidence could not be written ("" = it was, or none)
  // Time the loop waited for the recorder to catch up (its backlog is bounded): sockets were read
  // that much later than they could have been. 0 on a machine with room for both threads. The sum
  // over the loops.
  int64_t recorder_wait_ns = 0;
  // What each event loop did, in loop order (one entry for a one-loop run).
  struct LoopFigures {
    int streams = 0;         // requests it sent, warm-ups included
    int64_t events = 0;      // SSE events its recorder handled
    int peak_in_flight = 0;  // its most streams open at once
    int measured_sends = 0;  // the measured requests it sent, and their send lateness
    double send_lateness_p50_ms = 0, send_lateness_p99_ms = 0, send_lateness_max_ms = 0;
    int64_t recorder_wait_ns = 0;
  };
  std::vector<LoopFigures> loops;
};

// The number of event loops LoadSpec::loops asks for on this machine (0: its cores).
int LoopsWanted(int loops);
// Each loop's figures, for the evidence: [{"loop":0,"streams":...,"events":...}, ...].
nlohmann::json LoopFiguresToJson(const std::vector<LoadResult::LoopFigures>& loops);
// One line per loop: "loop 1/2: 8192 streams, 524288 events, peak 8192 in flight, send
// lateness p50 0.012 ms p99 0.210 ms max 1.302 ms over 8192 measured sends".
std::vector<std::string> LoopFigureLines(const std::vector<LoadResult::LoopFigures>& loops);

// What a record the harness cut or never sent after a stop at request `id` is marked with
// (RawRecord::cancelled_by_harness): "fail_fast after m12".
std::string HarnessCutAfter(const std::string& id);

// Runs the warm-up and measured lists. An error Status only for setup failures (empty or non-http
// URL, concurrency < 1, curl initialisation); every per-request failure is in its RawRecord.
Result<LoadResult> RunLoad(const LoadSpec& spec);

}  // namespace capq

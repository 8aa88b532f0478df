// RunLoad() (loadgen.h): the spec checked, the headers every request shares, one record per
// planned request, the warm-up and measured phases on each event loop (loadgen_loop.cc), and the
// records the run never sent marked as such.
#include "capq/measurement/loadgen.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capq/log.h"
#include "loadgen_internal.h"

namespace capq {

const char* PhaseName(Phase p) { return p == Phase::kWarmup ? "warmup" : "measured"; }

std::string HarnessCutAfter(const std::string& id) { return "fail_fast after " + id; }

namespace {

using internal::LoopBoard;
using internal::loadgen::Loop;
using internal::loadgen::LoopModels;
using internal::loadgen::PhaseEnd;
using internal::loadgen::SlistPtr;
using internal::loadgen::SplitModels;
using internal::loadgen::StartsWithNoCase;

Status GlobalInit() {
  static std::once_flag once;
  static CURLcode rc = CURLE_OK;
  std::call_once(once, [] { rc = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (rc != CURLE_OK) {
    return Status::Internal(std::string("curl_global_init failed: ") + curl_easy_strerror(rc));
  }
  return Status::Ok();
}

// The setup errors RunLoad() returns: an empty or non-http URL, a concurrency below 1, a request
// timeout that is not positive.
Status CheckSpec(const LoadSpec& spec) {
  if (spec.url.empty()) return Status::InvalidArgument("load: empty URL");
  if (!StartsWithNoCase(spec.url, "http://") && !StartsWithNoCase(spec.url, "https://")) {
    return Status::InvalidArgument("load: URL must start with http:// or https://: " + spec.url);
  }
  if (spec.concurrency < 1) return Status::InvalidArgument("load: concurrency must be >= 1");
  if (!spec.warmup.empty() && spec.warmup_concurrency < 1) {
    return Status::InvalidArgument("load: warm-up concurrency must be >= 1");
  }
  if (!(spec.request_timeout_s > 0))
    return Status::InvalidArgument("load: request timeout must be > 0");
  return Status::Ok();
}

// Headers shared by every request, into `headers`; the caller declares it before anything that
// holds an easy handle, so that the slist outlives them all.
Status SharedHeaders(const LoadSpec& spec, SlistPtr* headers) {
  curl_slist* raw = nullptr;
  raw = curl_slist_append(raw, "Content-Type: application/json");
  headers->reset(raw);
  if (raw == nullptr) return Status::Internal("curl_slist_append failed");
  const char* extra[] = {"Accept: text/event-stream",
                         // curl would otherwise wait up to 1 s for "100 Continue" on large prompts.
                         "Expect:"};
  for (const char* h : extra) {
    curl_slist* next = curl_slist_append(headers->get(), h);
    if (next == nullptr) return Status::Internal("curl_slist_append failed");
  }
  if (!spec.api_key.empty()) {
    std::string auth = "Authorization: Bearer " + spec.api_key;
    curl_slist* next = curl_slist_append(headers->get(), auth.c_str());
    std::fill(auth.begin(), auth.end(), '\0');
    if (next == nullptr) return Status::Internal("curl_slist_append failed");
  }
  return Status::Ok();
}

// One record per planned request, warm-up first, each named and placed in its phase.
void LayOutRecords(const LoadSpec& spec, LoadResult* result) {
  result->records.resize(spec.warmup.size() + spec.measured.size());
  for (size_t i = 0; i < spec.warmup.size(); ++i) {
    RawRecord& r = result->records[i];
    r.id = spec.warmup[i].id;
    r.phase = Phase::kWarmup;
    r.index = spec.warmup[i].index;
  }
  for (size_t i = 0; i < spec.measured.size(); ++i) {
    RawRecord& r = result->records[spec.warmup.size() + i];
    r.id = spec.measured[i].id;
    r.phase = Phase::kMeasured;
    r.index = spec.measured[i].index;
  }
}

// One loop's run: its warm-up share as a closed loop at its share of the warm-up concurrency,
// then, once every loop's warm-up ended, its measured share from the one measured start, unless
// the run was cancelled or stopped (by any loop) before.
PhaseEnd RunPhases(const LoadSpec& spec, Loop& loop, LoopModels& models, LoopBoard& board,
                   LoadResult* result) {
  PhaseEnd end = loop.Cancelled() ? PhaseEnd::kInterrupted : PhaseEnd::kDone;
  if (end == PhaseEnd::kDone && !spec.warmup.empty()) {
    end =
        loop.RunPhase(Phase::kWarmup, spec.warmup, result->records.data(), *models.warmup, NowNs());
  }
  board.ArriveAndWait();  // sets result->measured_start_ns
  if (end == PhaseEnd::kDone && loop.Cancelled()) end = PhaseEnd::kInterrupted;
  if (end == PhaseEnd::kDone) {
    loop.FinishChecks();  // another loop's warm-up may have stopped the run
    if (loop.Stopped()) end = PhaseEnd::kStopped;
  }
  if (end == PhaseEnd::kDone) {
    end =
        loop.RunPhase(Phase::kMeasured, spec.measured, result->records.data() + spec.warmup.size(),
                      *models.measured, result->measured_start_ns);
  }
  return end;
}

// The loops' ends as one: interrupted if any loop saw the cancel flag, else stopped if the run
// was stopped or decided, else done.
PhaseEnd Merge(const std::vector<PhaseEnd>& ends, LoopBoard& board) {
  if (std::find(ends.begin(), ends.end(), PhaseEnd::kInterrupted) != ends.end()) {
    return PhaseEnd::kInterrupted;
  }
  const bool stopped = std::find(ends.begin(), ends.end(), PhaseEnd::kStopped) != ends.end();
  return stopped || board.StopSeen() || board.Taken() ? PhaseEnd::kStopped : PhaseEnd::kDone;
}

// Every record a cancelled or stopped run never sent, marked so (with `cut`, what the harness
// cut after the stop is marked with) and handed to a recorder.
void MarkUnsent(PhaseEnd end, const std::string& cut, Loop& loop, LoadResult* result) {
  for (size_t i = 0; i < result->records.size(); ++i) {
    RawRecord& r = result->records[i];
    // Sent, or ended unsent by its arrival model already (cancelled with no send time).
    if (r.actual_send_ns != 0 || r.cancelled || end == PhaseEnd::kDone) continue;
    r.cancelled = true;
    if (end == PhaseEnd::kStopped) {
      r.cancelled_by_harness = cut;
      r.transport_error = "not sent: " + r.cancelled_by_harness;
    } else {
      r.transport_error = "not sent: run interrupted";
    }
    loop.RecordUnsent(i);
  }
}

// Runs every loop, the first on the calling thread, the others on threads of their own.
std::vector<PhaseEnd> RunLoops(const LoadSpec& spec, std::vector<std::unique_ptr<Loop>>& loops,
                               std::vector<LoopModels>& models, LoopBoard& board,
                               LoadResult* result) {
  std::vector<PhaseEnd> ends(loops.size(), PhaseEnd::kDone);
  std::vector<std::thread> threads;
  for (size_t k = 1; k < loops.size(); ++k) {
    threads.emplace_back(
        [&, k] { ends[k] = RunPhases(spec, *loops[k], models[k], board, result); });
  }
  ends[0] = RunPhases(spec, *loops[0], models[0], board, result);
  for (auto& t : threads) t.join();
  return ends;
}

// What the loops leave in the result once they all ended: the stop, the evidence's first
// error, the recorders' waits and each loop's figures.
void Gather(PhaseEnd end, std::vector<std::unique_ptr<Loop>>& loops, LoopBoard& board,
            LoadResult* result) {
  result->interrupted = end == PhaseEnd::kInterrupted;
  if (end == PhaseEnd::kStopped) {
    if (auto stop = board.StopSeen()) {
      result->stopped_by = stop->first;
      result->stop_reason = stop->second;
    } else {
      result->decided = board.Taken();
    }
  }
  const std::string cut =
      result->decided ? std::string(kDecidedEarlyCut) : HarnessCutAfter(result->stopped_by);
  MarkUnsent(end, cut, *loops[0], result);
  loops[0]->FinishChecks();
  for (auto& loop : loops) {
    if (result->evidence_error.empty()) result->evidence_error = loop->evidence_error();
    result->recorder_wait_ns += loop->recorder_wait_ns();
    result->loops.push_back(loop->Figures());
  }
}

}  // namespace

Result<LoadResult> RunLoad(const LoadSpec& spec) {
  CAPQ_RETURN_IF_ERROR(CheckSpec(spec));
  CAPQ_RETURN_IF_ERROR(GlobalInit());
  SlistPtr headers;  // declared first: it outlives every easy handle
  CAPQ_RETURN_IF_ERROR(SharedHeaders(spec, &headers));

  LoadResult result;
  LayOutRecords(spec, &result);
  result.results.resize(result.records.size());
  std::vector<LoopModels> models = SplitModels(spec, LoopsWanted(spec.loops));
  LoopBoard board(static_cast<int>(models.size()), spec.measured.size(), spec.early_decision,
                  [&result, &spec] {
                    result.measured_start_ns = NowNs();
                    if (spec.warmup.empty()) result.start_ns = result.measured_start_ns;
                  });
  std::vector<std::unique_ptr<Loop>> loops;
  for (size_t k = 0; k < models.size(); ++k) {
    loops.push_back(
        std::make_unique<Loop>(spec, headers.get(), &result, &board, static_cast<int>(k)));
    CAPQ_RETURN_IF_ERROR(loops.back()->Init());
  }
  result.anchor = RealtimeAnchor::Take();
  result.start_ns = NowNs();
  spdlog::debug("load: {} warm-up at C={}, {} measured at C={} to {} on {} loop(s)",
                spec.warmup.size(), spec.warmup_concurrency, spec.measured.size(), spec.concurrency,
                spec.url, loops.size());
  const std::vector<PhaseEnd> ends = RunLoops(spec, loops, models, board, &result);
  // An interrupt returns without waiting for the checker; its records must be read by nobody else
  // before they are handed back.
  for (auto& loop : loops) loop->FinishChecks();
  result.end_ns = NowNs();
  Gather(Merge(ends, board), loops, board, &result);
  return result;
}

}  // namespace capq

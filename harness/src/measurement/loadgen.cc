// RunLoad() (loadgen.h): the spec checked, the headers every request shares, one record per
// planned request, the warm-up and measured phases on the event loop (loadgen_loop.cc), and the
// records the run never sent marked as such.
#include "capq/measurement/loadgen.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "capq/log.h"
#include "loadgen_internal.h"

namespace capq {

const char* PhaseName(Phase p) { return p == Phase::kWarmup ? "warmup" : "measured"; }

std::string HarnessCutAfter(const std::string& id) { return "fail_fast after " + id; }

namespace {

using internal::loadgen::Loop;
using internal::loadgen::PhaseEnd;
using internal::loadgen::SlistPtr;
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

// The warm-up as a closed loop at its own concurrency, then the measured list as its arrival
// model releases it, unless the run was cancelled or stopped before.
PhaseEnd RunPhases(const LoadSpec& spec, Loop& loop, LoadResult* result) {
  PhaseEnd end = loop.Cancelled() ? PhaseEnd::kInterrupted : PhaseEnd::kDone;
  if (end == PhaseEnd::kDone && !spec.warmup.empty()) {
    auto arrivals = ClosedLoopArrivals(spec.warmup_concurrency);
    end = loop.RunPhase(Phase::kWarmup, spec.warmup, result->records.data(), *arrivals);
  }
  if (end == PhaseEnd::kDone && loop.Cancelled()) end = PhaseEnd::kInterrupted;
  if (end == PhaseEnd::kDone) {
    result->measured_start_ns = NowNs();
    if (spec.warmup.empty()) result->start_ns = result->measured_start_ns;
    auto arrivals =
        spec.measured_arrivals ? spec.measured_arrivals() : ClosedLoopArrivals(spec.concurrency);
    end = loop.RunPhase(Phase::kMeasured, spec.measured,
                        result->records.data() + spec.warmup.size(), *arrivals);
  }
  return end;
}

// Every record a cancelled or stopped run never sent, marked so and handed to the recorder.
void MarkUnsent(PhaseEnd end, Loop& loop, LoadResult* result) {
  for (size_t i = 0; i < result->records.size(); ++i) {
    RawRecord& r = result->records[i];
    // Sent, or ended unsent by its arrival model already (cancelled with no send time).
    if (r.actual_send_ns != 0 || r.cancelled || end == PhaseEnd::kDone) continue;
    r.cancelled = true;
    if (end == PhaseEnd::kStopped) {
      r.cancelled_by_harness = loop.HarnessCut();
      r.transport_error = "not sent: " + r.cancelled_by_harness;
    } else {
      r.transport_error = "not sent: run interrupted";
    }
    loop.RecordUnsent(i);
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
  Loop loop(spec, headers.get(), &result);
  CAPQ_RETURN_IF_ERROR(loop.Init());
  result.anchor = RealtimeAnchor::Take();
  result.start_ns = NowNs();
  spdlog::debug("load: {} warm-up at C={}, {} measured at C={} to {}", spec.warmup.size(),
                spec.warmup_concurrency, spec.measured.size(), spec.concurrency, spec.url);
  const PhaseEnd end = RunPhases(spec, loop, &result);
  // An interrupt returns without waiting for the checker; its records must be read by nobody else
  // before they are handed back.
  loop.FinishChecks();
  result.end_ns = NowNs();
  result.interrupted = end == PhaseEnd::kInterrupted;
  if (end == PhaseEnd::kStopped) {
    result.stopped_by = loop.stopped_by();
    result.stop_reason = loop.stop_reason();
    result.decided = loop.decided();
  }
  MarkUnsent(end, loop, &result);
  loop.FinishChecks();
  result.evidence_error = loop.evidence_error();
  result.recorder_wait_ns = loop.recorder_wait_ns();
  return result;
}

}  // namespace capq

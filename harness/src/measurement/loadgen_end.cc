// How a transfer of the load generator ends (loadgen_internal.h): completed by libcurl, cut as
// stalled, cut by a stop or the cancel flag; each record is whole when its end is posted to the
// recorder, which decodes, writes and checks it (fail fast).
#include <cstdio>
#include <utility>

#include "loadgen_internal.h"

namespace capq::internal::loadgen {

void Loop::Complete(Transfer* tr, CURLcode rc, MonoNs done_ns) {
  RawRecord* rec = tr->rec;
  rec->end_ns = done_ns;
  long code = 0;
  curl_easy_getinfo(tr->easy.get(), CURLINFO_RESPONSE_CODE, &code);
  rec->http_status = code;
  long connects = 0;
  curl_easy_getinfo(tr->easy.get(), CURLINFO_NUM_CONNECTS, &connects);
  rec->reused_connection = connects == 0;
  FinishFraming(tr, done_ns);
  if (rc != CURLE_OK) {
    rec->transport_error = tr->errbuf[0] != '\0' ? std::string(tr->errbuf) : curl_easy_strerror(rc);
    rec->cancelled = true;
    if (rc == CURLE_OPERATION_TIMEDOUT) rec->timed_out = true;
  }
  if (rc != CURLE_OK || code != 200) ++progress_.failed;
  if (tr->wants_text) TakeText(tr, rc == CURLE_OK && code == 200);
  // The record is whole: the recorder decodes, writes and checks it (fail fast).
  pending_.End(tr->record_index, !Stopped());
}

// The text the arrival model asked for, decoded here on the loop's thread: once per such
// request, at its end, over a stream a turn long (small), while the recorder decodes the same
// events for the results. The events go again unless the records keep them; both happen before
// the record's end is posted, after which the recorder reads it.
void Loop::TakeText(Transfer* tr, bool answered) {
  RawRecord* rec = tr->rec;
  RequestResult d = DecodeRecord(*rec);
  tr->text_ok = answered && !rec->cancelled && !rec->timed_out && !rec->stalled &&
                d.errors.empty() && !d.finish_reason.empty();
  tr->text = std::move(d.content_text);
  if (!spec_.keep_events) std::vector<SseEvent>().swap(rec->events);
}

// The end of a transfer's stream: an event left open is emitted, the framer's counts kept.
void Loop::FinishFraming(Transfer* tr, MonoNs t) {
  RawRecord* rec = tr->rec;
  tr->framer.Finish(t, &tr->framed);
  HandOver(tr, 0);  // an event left open ends with the transfer: no read of its own
  rec->sse_comments = tr->framer.comments();
  rec->sse_overflow = tr->framer.overflowed();
  rec->sse_unterminated = tr->framer.unterminated_events();
}

// The board's stop (any loop's check, stall or dry model), or its early decision.
void Loop::TakeCheckerAnswer() {
  if (Stopped() || !board_->Raised()) return;
  if (board_->StopSeen()) return Adopt();
  // A decision once every request ended stops nothing: the trial ran whole, and is judged whole.
  const bool left = phase_ == Phase::kMeasured && progress_.completed < progress_.total;
  if (!left) return;
  if (auto decision = board_->TakeOffer()) {
    decided_ = std::move(decision);
    stopping_ = true;
  }
}

// The run's stop as the board has it: the first loop's to stop, or the decision a loop took.
void Loop::Adopt() {
  if (auto stop = board_->StopSeen()) {
    stopped_by_ = stop->first;
    stop_reason_ = std::move(stop->second);
  } else {
    decided_ = board_->Taken();
  }
  stopping_ = true;
}

// The measured phase's moments for the early-decision rule (loadgen.h), about every 10 ms: a
// decided trial's load runs on for up to one tick past the moment the rule holds. At 50 ms,
// sim_small_reference's C=7 trials stopped 1.51-1.52 s into their measured phase, at 10 ms
// 1.49 s; the rule held from about 1.486 s (200 of the row's virtual ms less per trial).
void Loop::TickDecision() {
  if (!DecisionTicks()) return;
  const MonoNs now = NowNs();
  if (now - last_tick_ns_ < kDecisionTickNs) return;
  last_tick_ns_ = now;
  pending_.Tick(now, result_->measured_start_ns);
}

bool Loop::DecisionTicks() const {
  return !Stopped() && phase_ == Phase::kMeasured && spec_.early_decision.enabled;
}

// This loop's stop goes on the board, which keeps the first of the run and wakes every loop.
void Loop::Stop(const std::string& id, std::string why) {
  board_->Stop(id, std::move(why));
  Adopt();
}

// The stall bound: a live stream silent for longer than spec_.stall_timeout_s since its last
// byte is cut as the server's failure, and stops the run. Only once its body began: before
// that the wait is its TTFT (queued, prefilling), which the request timeout bounds.
void Loop::CheckStalls() {
  if (Stopped() || !(spec_.stall_timeout_s > 0)) return;
  const MonoNs now = NowNs();
  const MonoNs bound = static_cast<MonoNs>(spec_.stall_timeout_s * 1e9);
  for (auto& tr : live_) {
    if (!tr) continue;
    RawRecord* rec = tr->rec;
    if (rec->first_body_ns == 0) continue;
    const MonoNs last = rec->last_byte_ns;
    if (now - last <= bound) continue;
    char why[160];
    std::snprintf(why, sizeof why, "stalled: no byte for %.2f wall seconds (the bound is %g)",
                  NsToS(now - last), spec_.stall_timeout_s);
    Cut(tr, now, why, "");
    rec->stalled = true;
    Stop(rec->id, why);
    return;
  }
}

// Cuts one in-flight transfer, keeping what it received.
void Loop::Cut(std::unique_ptr<Transfer>& tr, MonoNs now, const std::string& transport_error,
               const std::string& by_harness) {
  curl_multi_remove_handle(multi_.get(), tr->easy.get());
  RawRecord* rec = tr->rec;
  rec->end_ns = now;
  long code = 0;
  curl_easy_getinfo(tr->easy.get(), CURLINFO_RESPONSE_CODE, &code);
  rec->http_status = code;
  FinishFraming(tr.get(), now);
  rec->cancelled = true;
  rec->transport_error = transport_error;
  rec->cancelled_by_harness = by_harness;
  if (tr->wants_text && !spec_.keep_events) std::vector<SseEvent>().swap(rec->events);
  pending_.End(tr->record_index, false);
  tr.reset();
  --active_;
  --progress_.in_flight;
  ++progress_.completed;
  ++progress_.failed;
}

// Cuts every in-flight transfer. Records never started stay with actual_send_ns == 0 and are
// marked by RunLoad().
void Loop::CancelAll(const std::string& transport_error, const std::string& by_harness) {
  for (auto& tr : live_) {
    if (tr) Cut(tr, NowNs(), transport_error, by_harness);
  }
  MaybeProgress(true);
}

}  // namespace capq::internal::loadgen

// The arrival model's releases turned into sends (loadgen_internal.h): which requests are due,
// their transfers built and handed to libcurl back to back, the in-flight cap, and the timer that
// wakes the loop when the next release is due.
#include <sys/timerfd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "loadgen_internal.h"

namespace capq::internal::loadgen {

// Builds the easy handle for release `r` (not yet sent). Null when curl could not make one;
// the record then says so and counts as a failed, started request.
std::unique_ptr<Transfer> Loop::Prepare(Release r) {
  const size_t index = r.index;
  RawRecord* rec = &recs_[index];
  rec->intended_send_ns = r.intended_ns;
  // A body built at release lives in its record, which outlives the transfer (libcurl reads
  // POSTFIELDS in place) and carries it into the evidence.
  rec->request_body = std::move(r.body);
  const std::string& body = rec->request_body.empty() ? (*reqs_)[index].body : rec->request_body;
  std::unique_ptr<Transfer> tr = NewTransfer(index, rec);
  if (!tr->easy) {
    EasyInitFailed(tr.get());
    return nullptr;
  }
  SetTransferOptions(spec_, headers_, body, tr.get());
  if (!shares_.empty()) curl_easy_setopt(tr->easy.get(), CURLOPT_SHARE, shares_[tr->shard].get());
  return tr;
}

// The transfer of request `index` into `rec`, with its shard picked and its easy handle made
// (null when curl could not make one).
std::unique_ptr<Transfer> Loop::NewTransfer(size_t index, RawRecord* rec) {
  auto tr = std::make_unique<Transfer>(spec_.max_event_bytes);
  tr->rec = rec;
  tr->slot_index = index;
  tr->record_index = static_cast<size_t>(rec - result_->records.data());
  tr->wake_ns = &wake_ns_;
  tr->probe = &probe_;
  tr->out = &pending_;
  tr->wants_text = arrivals_->WantsText(index);
  tr->keep_events = spec_.keep_events || tr->wants_text;
  tr->max_body_bytes = spec_.max_body_bytes;
  tr->shard = PickShard();
  tr->easy.reset(curl_easy_init());
  return tr;
}

// A request whose easy handle curl could not make: started and failed at once.
void Loop::EasyInitFailed(Transfer* tr) {
  RawRecord* rec = tr->rec;
  rec->actual_send_ns = NowNs();
  rec->end_ns = rec->actual_send_ns;
  rec->transport_error = "curl_easy_init failed";
  rec->cancelled = true;
  pending_.End(tr->record_index, false);
  ++progress_.started;
  ++progress_.completed;
  ++progress_.failed;
  arrivals_->Finished(tr->slot_index, rec->end_ns);
}

// Hands a prepared transfer to curl; curl writes the request on the next loop turn.
void Loop::Launch(std::unique_ptr<Transfer> tr) {
  RawRecord* rec = tr->rec;
  rec->actual_send_ns = NowNs();
  const CURLMcode mc = curl_multi_add_handle(multi_.get(), tr->easy.get());
  ++progress_.started;
  if (mc != CURLM_OK) {
    rec->end_ns = NowNs();
    rec->transport_error = std::string("curl_multi_add_handle: ") + curl_multi_strerror(mc);
    rec->cancelled = true;
    pending_.End(tr->record_index, false);
    ++progress_.completed;
    ++progress_.failed;
    arrivals_->Finished(tr->slot_index, rec->end_ns);
    return;
  }
  pending_.Sent(tr->record_index);
  ++streams_;
  if (phase_ == Phase::kMeasured) lateness_.push_back(rec->actual_send_ns - rec->intended_send_ns);
  ++active_;
  peak_in_flight_ = std::max(peak_in_flight_, active_);
  ++progress_.in_flight;
  live_[tr->slot_index] = std::move(tr);
}

// Sends every request the arrival model says is due. Their handles are built first, so that a
// burst's sends (C at a closed loop's start) follow each other back to back. A request whose
// handle could not be built ended at once, which may release the next one.
void Loop::ReleaseDue() {
  while (!stopping_) {
    const MonoNs now = NowNs();
    std::vector<std::unique_ptr<Transfer>> due;
    int taken = 0, sending = 0;
    for (auto r = arrivals_->Peek();
         r && r->intended_ns <= now && active_ + sending < InFlightCap(); r = arrivals_->Peek()) {
      Release release = arrivals_->Take();
      ++taken;
      if (!release.not_sent.empty()) {
        RecordNotSent(release);
        continue;
      }
      ++sending;
      if (auto tr = Prepare(std::move(release))) due.push_back(std::move(tr));
    }
    if (taken == 0) break;
    for (auto& tr : due) Launch(std::move(tr));
  }
  ArmReleaseTimer();
}

// A release the arrival model will never send (its session ended): a record never sent, with
// the model's reason, ended now.
void Loop::RecordNotSent(const Release& r) {
  RawRecord* rec = &recs_[r.index];
  rec->intended_send_ns = r.intended_ns;
  rec->cancelled = true;
  rec->cancelled_by_harness = r.not_sent;
  rec->transport_error = "not sent: " + r.not_sent;
  pending_.End(static_cast<size_t>(rec - result_->records.data()), false);
  ++progress_.completed;
  ++progress_.failed;
}

bool Loop::ReleaseIsDue() const {
  if (stopping_ || AtInFlightCap()) return false;
  const auto r = arrivals_->Peek();
  return r && r->intended_ns <= NowNs();
}

// Wakes the loop's epoll_wait when the next release is due, to the nanosecond (a timerfd, not
// epoll's millisecond timeout). Disarmed while nothing is scheduled or the in-flight cap holds
// the releases back (a completion then releases them).
void Loop::ArmReleaseTimer() {
  const auto r = stopping_ || AtInFlightCap() ? std::nullopt : arrivals_->Peek();
  const MonoNs at = r ? std::max<MonoNs>(r->intended_ns, 1) : 0;
  if (at == release_timer_ns_) return;
  release_timer_ns_ = at;
  itimerspec its{};
  its.it_value.tv_sec = static_cast<time_t>(at / 1000000000);
  its.it_value.tv_nsec = static_cast<long>(at % 1000000000);
  timerfd_settime(release_timer_.get(), TFD_TIMER_ABSTIME, &its, nullptr);
}

// The arrival model holds requests back that nothing can release any more: the run stops at the
// first of them, named, rather than waiting forever or ending the phase as if it were whole.
void Loop::StopDry() {
  size_t i = 0;
  while (i + 1 < reqs_->size() &&
         (!arrivals_->Releases(i) || recs_[i].actual_send_ns != 0 || recs_[i].cancelled)) {
    ++i;
  }
  Stop((*reqs_)[i].id, std::string("the ") + arrivals_->name() +
                           " arrival model released nothing more while nothing was in flight");
}

}  // namespace capq::internal::loadgen

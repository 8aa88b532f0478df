#include "recorder.h"

#include <cstring>

#include "capq/measurement/raw_evidence.h"

namespace capq::internal {

void RecorderBatch::Put(Kind kind, size_t record, bool check, const SseEvent* ev) {
  Head h{static_cast<uint8_t>(kind),
         static_cast<uint8_t>(check ? 1 : 0),
         static_cast<uint8_t>(ev && ev->truncated ? 1 : 0),
         static_cast<uint32_t>(record),
         ev ? ev->arrival_ns : 0,
         ev ? ev->wake_ns : 0,
         ev ? ev->kernel_ns : 0,
         static_cast<uint32_t>(ev ? ev->data.size() : 0)};
  bytes_.append(reinterpret_cast<const char*>(&h), sizeof h);
  if (ev) bytes_.append(ev->data);
}

void RecorderBatch::Tick(MonoNs now_ns, MonoNs measured_start_ns) {
  SseEvent ev;  // no data: the two times ride in its stamps
  ev.arrival_ns = now_ns;
  ev.wake_ns = measured_start_ns;
  Put(kTick, 0, false, &ev);
}

Recorder::Recorder(const LoadSpec& spec, LoadResult* result)
    : check_(spec.on_complete_check),
      evidence_(spec.evidence),
      records_(&result->records),
      results_(&result->results),
      decoders_(result->records.size()),
      rules_(spec.early_decision),
      first_measured_(spec.warmup.size()),
      thread_([this] { Run(); }) {
  results_->resize(records_->size());
  if (rules_.enabled) live_.resize(records_->size() - first_measured_);
}

Recorder::~Recorder() {
  {
    std::lock_guard<std::mutex> l(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Recorder::Post(RecorderBatch* batch) {
  if (batch->empty()) return;
  {
    std::unique_lock<std::mutex> l(mu_);
    if (queue_.size() > kMaxBacklogBytes) {
      const MonoNs t0 = NowNs();
      cv_.wait(l, [this] { return queue_.size() <= kMaxBacklogBytes; });
      wait_ns_ += NowNs() - t0;
    }
    if (queue_.empty()) {
      queue_.swap(*batch);
    } else {
      queue_.Append(*batch);
    }
  }
  batch->clear();
  cv_.notify_all();
}

void Recorder::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return queue_.empty() && !busy_; });
}

std::optional<std::pair<std::string, std::string>> Recorder::Answer() {
  std::lock_guard<std::mutex> l(mu_);
  return answer_;
}

std::optional<EarlyDecision> Recorder::Decision() {
  std::lock_guard<std::mutex> l(mu_);
  return decision_;
}

void Recorder::Run() {
  RecorderBatch work;
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return quit_ || !queue_.empty(); });
    if (queue_.empty()) return;  // quit, with nothing left
    work.swap(queue_);
    busy_ = true;
    l.unlock();
    cv_.notify_all();  // the loop may wait for room
    work.ForEach([this](RecorderBatch::Kind kind, size_t index, bool check, const SseEvent& ev) {
      Handle(kind, index, check, ev);
    });
    if (work.size() > 4 * kMaxBacklogBytes) {
      work.Release();  // one large batch (a long stall's catch-up) does not stay allocated
    } else {
      work.clear();
    }
    l.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

// The loop writes a record before it posts the record's end, and never after.
void Recorder::Handle(RecorderBatch::Kind kind, size_t index, bool check, const SseEvent& ev) {
  if (kind == RecorderBatch::kTick) return AskDecision(ev.arrival_ns, ev.wake_ns);
  const RawRecord& rec = (*records_)[index];
  std::optional<StreamDecoder>& d = decoders_[index];
  switch (kind) {
    case RecorderBatch::kSent:
      d.emplace(rec.actual_send_ns, StreamDecoder::Keep::kFacts);  // the evidence has the rest
      if (evidence_) evidence_->Append(RawSentLine(rec.id, rec.actual_send_ns));
      break;
    case RecorderBatch::kEvent:
      if (d) d->Feed(ev);
      if (evidence_) evidence_->Append(RawEventLine(rec.id, ev));
      break;
    case RecorderBatch::kEnd:
      End(rec, index, check);
      break;
    case RecorderBatch::kTick:
      return;
  }
  Track(kind, index);
}

void Recorder::Track(RecorderBatch::Kind kind, size_t index) {
  if (live_.empty() || index < first_measured_) return;
  const RawRecord& rec = (*records_)[index];
  LiveLatency& l = live_[index - first_measured_];
  if (kind == RecorderBatch::kSent) l.send_ns = rec.actual_send_ns;
  if (kind == RecorderBatch::kEvent && l.first_token_ns == 0 && decoders_[index]) {
    if (auto ttft = decoders_[index]->ttft_ns()) l.first_token_ns = rec.actual_send_ns + *ttft;
  }
  if (kind == RecorderBatch::kEnd) {
    l.ended = true;
    if (rec.http_status == 200 && !rec.cancelled) l.done_ns = rec.end_ns;
  }
}

void Recorder::AskDecision(MonoNs now_ns, MonoNs measured_start_ns) {
  if (live_.empty()) return;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (decision_ || answer_) return;
  }
  std::optional<EarlyDecision> d = DecideEarly(rules_, live_, now_ns, measured_start_ns);
  if (!d) return;
  std::lock_guard<std::mutex> l(mu_);
  decision_ = std::move(d);
}

// A finished record: decoded, written and flushed to the kernel, then checked.
void Recorder::End(const RawRecord& rec, size_t index, bool check) {
  std::optional<StreamDecoder>& d = decoders_[index];
  RequestResult& result = (*results_)[index];
  result = d ? d->Finish(rec) : DecodeRecord(rec);
  d.reset();
  if (evidence_) {
    evidence_->Append(RawRecordLine(rec));
    Status st = evidence_->Flush();
    if (!st.ok() && evidence_error_.empty()) evidence_error_ = st.message();
  }
  if (!check_ || !check) return;
  std::optional<std::string> why = check_(rec, result);
  if (!why) return;
  std::lock_guard<std::mutex> l(mu_);
  if (!answer_) answer_.emplace(rec.id, std::move(*why));
}

}  // namespace capq::internal

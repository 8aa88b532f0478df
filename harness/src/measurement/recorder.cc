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

Recorder::Recorder(const LoadSpec& spec, LoadResult* result, LoopBoard* board, int loop)
    : check_(spec.on_complete_check),
      evidence_(spec.evidence),
      records_(&result->records),
      results_(&result->results),
      decoders_(result->records.size()),
      board_(board),
      loop_(loop),
      first_measured_(spec.warmup.size()),
      first_token_(board->tracks() ? result->records.size() - first_measured_ : 0),
      thread_([this] { Run(); }) {}

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
      if (evidence_) Write(RawSentLine(rec.id, rec.actual_send_ns), false);
      break;
    case RecorderBatch::kEvent:
      ++events_;
      if (d) d->Feed(ev);
      if (evidence_) Write(RawEventLine(rec.id, ev), false);
      break;
    case RecorderBatch::kEnd:
      End(rec, index, check);
      break;
    case RecorderBatch::kTick:
      return;
  }
  Track(kind, index);
}

// The measured request's entry on the board; only this recorder writes it. The first token is
// looked for at each event until it came, the lock taken only when it did.
void Recorder::Track(RecorderBatch::Kind kind, size_t index) {
  if (!board_->tracks() || index < first_measured_) return;
  const RawRecord& rec = (*records_)[index];
  const size_t at = index - first_measured_;
  if (kind == RecorderBatch::kSent) {
    board_->Track(at, [&](LiveLatency& l) { l.send_ns = rec.actual_send_ns; });
  }
  if (kind == RecorderBatch::kEvent && decoders_[index] && !first_token_[at]) {
    if (auto ttft = decoders_[index]->ttft_ns()) {
      first_token_[at] = 1;
      const MonoNs read_ns = decoders_[index]->first_token_arrival_ns();
      board_->Track(at, [&](LiveLatency& l) {
        l.first_token_ns = rec.actual_send_ns + *ttft;
        l.first_token_read_ns = read_ns;
      });
    }
  }
  if (kind == RecorderBatch::kEnd) {
    board_->Track(at, [&](LiveLatency& l) {
      l.ended = true;
      l.end_ns = rec.end_ns;
      if (rec.http_status == 200 && !rec.cancelled) l.done_ns = rec.end_ns;
    });
  }
}

// The rule is asked at the moment up to which every loop's reads were handed over: one loop's
// tick says nothing of what another loop read but its recorder has not yet seen.
void Recorder::AskDecision(MonoNs now_ns, MonoNs measured_start_ns) {
  if (!board_->tracks()) return;
  const std::optional<MonoNs> at = board_->Watermark(loop_, now_ns);
  if (!at) return;
  if (std::optional<EarlyDecision> d = board_->Decide(*at, measured_start_ns)) {
    board_->Offer(std::move(*d));
  }
}

void Recorder::Write(const std::string& line, bool flush) {
  std::lock_guard<std::mutex> l(board_->evidence_mu());
  evidence_->Append(line);
  if (!flush) return;
  Status st = evidence_->Flush();
  if (!st.ok() && evidence_error_.empty()) evidence_error_ = st.message();
}

// A finished record: decoded, written and flushed to the kernel, then checked.
void Recorder::End(const RawRecord& rec, size_t index, bool check) {
  std::optional<StreamDecoder>& d = decoders_[index];
  RequestResult& result = (*results_)[index];
  result = d ? d->Finish(rec) : DecodeRecord(rec);
  d.reset();
  if (evidence_) Write(RawRecordLine(rec), true);
  if (!check_ || !check) return;
  std::optional<std::string> why = check_(rec, result);
  if (why) board_->Stop(rec.id, std::move(*why));
}

}  // namespace capq::internal

// After the load: the streams sorted by phase, and the raw evidence read back in one pass, each
// measured stream's text re-counted with the server's tokenizer as it comes back.
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "capq/clock.h"
#include "capq/measurement/decode.h"
#include "capq/measurement/raw_evidence.h"
#include "capq/targets/target.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

// The records read back wait here for ReadBackRecord, on a thread of its own: reading the
// evidence keeps a core busy while counting a text waits on the server's tokenizer, and the two
// overlap. The target is that thread's alone until Close(), and the records are handled in file
// order, so the first problem named is the one the file shows first. Memory: kMaxQueued records.
class RecordQueue {
 public:
  RecordQueue(Target& target, ReadBackOutcome* out) : target_(target), out_(out) {
    thread_ = std::thread([this] { Run(); });
  }
  ~RecordQueue() { Close(); }
  RecordQueue(const RecordQueue&) = delete;
  RecordQueue& operator=(const RecordQueue&) = delete;

  // `back` read back for the stream `live` decoded during the load; nullptr: no stream of the
  // load. Waits while the queue is full.
  void Push(RequestResult&& back, RequestResult* live) {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [this] { return queue_.size() < kMaxQueued; });
    queue_.push_back({std::move(back), live});
    ready_.notify_one();
  }

  // Waits until every record pushed was handled; *out is the caller's again.
  void Close() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }

 private:
  static constexpr size_t kMaxQueued = 64;
  struct Item {
    RequestResult back;
    RequestResult* live = nullptr;
  };

  void Run() {
    while (true) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ready_.wait(lock, [this] { return closed_ || !queue_.empty(); });
        if (queue_.empty()) return;
        item = std::move(queue_.front());
        queue_.pop_front();
        room_.notify_one();
      }
      if (item.live == nullptr) {
        if (out_->problem.empty())
          out_->problem = item.back.id + " is not one of the load's requests";
        continue;
      }
      ReadBackRecord(std::move(item.back), item.live, target_, out_);
    }
  }

  Target& target_;
  ReadBackOutcome* out_;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<Item> queue_;
  bool closed_ = false;
  std::thread thread_;
};

// The raw evidence read back in one pass, after the load: what its recorder kept of a stream was
// its facts (LoadResult::results), so each stream's chunk gaps come back from the file here, and
// the server's tokenizer re-counts each measured stream's text as its record ends in the file.
internal::ReadBackOutcome ReadBackEvidence(TrialState& s, Target& target) {
  internal::ReadBackOutcome out;
  std::unordered_map<std::string, RequestResult*> live;
  for (auto* phase : {&s.warm, &s.meas}) {
    for (RequestResult& r : *phase) live.emplace(r.id, &r);
  }
  if (Status st = s.evidence->Flush(); !st.ok()) {
    out.problem = st.message();
    return out;
  }
  size_t seen = 0;
  RecordQueue queue(target, &out);
  Result<RawEvidenceSummary> read =
      ReadRawEvidence(s.evidence->path(), [&](RawRecord&&, RequestResult&& back) {
        auto it = live.find(back.id);
        if (it != live.end()) ++seen;
        queue.Push(std::move(back), it == live.end() ? nullptr : it->second);
      });
  queue.Close();
  if (!read.ok()) {
    out.problem = read.status().message();
  } else if (out.problem.empty() && seen != live.size()) {
    out.problem = std::to_string(live.size() - seen) + " requests have no record in it";
  }
  return out;
}

}  // namespace

// The streams were decoded as they arrived (LoadResult::results); sorted by phase here.
void Decode(Trial& t) {
  for (RequestResult& r : t.s.load->results) {
    (r.phase == Phase::kWarmup ? t.s.warm : t.s.meas).push_back(std::move(r));
  }
  t.s.load->results.clear();
}

// The server's own tokenizer re-counts each measured stream's text, after the load and never on
// its timing path: usage fields alone would let an endpoint claim tokens it never streamed. The
// texts (and the chunk gaps) are read back from the raw evidence: a trial whose evidence does not
// read back as it was streamed has no result.
PhaseEnd ReadBackAndRecount(Trial& t) {
  const MonoNs start = NowNs();
  internal::ReadBackOutcome back = ReadBackEvidence(t.s, *t.target);
  if (!back.problem.empty()) {
    return CouldNotRun(t.s, "the raw evidence does not read back: " + back.problem);
  }
  t.s.recount = {{"method",
                  "the server's tokenize endpoint on each stream's text, no special "
                  "tokens"},
                 {"unavailable", back.recount_unavailable}};
  if (back.recount_unavailable.empty()) t.s.recount["counts"] = std::move(back.counts);
  // Its cost, after the timed load: the evidence read back, the texts counted.
  t.s.recount["wall_s"] = NsToS(NowNs() - start);
  t.ev.recount = t.s.recount;
  return std::nullopt;
}

void ReadBackRecord(RequestResult&& back, RequestResult* live, Target& target,
                    ReadBackOutcome* out) {
  if (live->output_sha256 != back.output_sha256 || live->chunks != back.chunks) {
    if (out->problem.empty()) out->problem = back.id + " reads back other than it was streamed";
    return;
  }
  live->text_gaps_ms = std::move(back.text_gaps_ms);
  if (!out->recount_unavailable.empty() || back.phase != Phase::kMeasured) return;
  if (back.output_text.empty()) return;
  Result<int64_t> n = target.CountTokens(back.output_text);
  if (!n.ok()) {
    out->recount_unavailable = "the server's tokenizer: " + n.status().message();
    return;
  }
  out->counts[back.id] = *n;
}

}  // namespace capq::internal

// The sessions arrival model (arrival.h): C conversations open at once, each released turn by
// turn as its previous turn ends, each sub-agent beside its parent.
#include <set>
#include <utility>

#include "capq/measurement/arrival.h"

namespace capq {
namespace {

constexpr size_t kNone = static_cast<size_t>(-1);

// Where a request is in the schedule.
struct Where {
  size_t session = kNone;
  size_t turn = 0;
};

class Sessions final : public ArrivalModel {
 public:
  Sessions(SessionSchedule schedule, TurnBodyFn body)
      : concurrency_(schedule.concurrency < 1 ? 1 : schedule.concurrency),
        sessions_(std::move(schedule.sessions)),
        starts_(std::move(schedule.starts)),
        body_(std::move(body)) {
    starts_.resize(sessions_.size());
    children_.resize(sessions_.size());
    for (size_t s = 0; s < sessions_.size(); ++s) {
      const int parent = starts_[s].parent;
      if (parent >= 0 && static_cast<size_t>(parent) < s) children_[parent].push_back(s);
      if (parent >= static_cast<int>(s)) starts_[s].parent = -1;  // no earlier parent: top-level
    }
    for (size_t s = 0; s < sessions_.size(); ++s) {
      for (size_t t = 0; t < sessions_[s].size(); ++t) {
        const size_t index = sessions_[s][t].index;
        if (index >= where_.size()) where_.resize(index + 1, Where{});
        where_[index] = {s, t};
      }
    }
  }
  const char* name() const override { return "sessions"; }

  void Begin(MonoNs start_ns, size_t count) override {
    count_ = count;
    taken_ = 0;
    next_session_ = 0;
    due_.clear();
    open_.assign(sessions_.size(), Open{});
    for (int i = 0; i < concurrency_; ++i) StartNext(start_ns);
  }

  std::optional<Release> Peek() const override {
    if (due_.empty()) return std::nullopt;
    const Due& d = *due_.begin();
    Release r;
    r.index = d.index;
    r.intended_ns = d.ns;
    if (d.not_sent) r.not_sent = open_[d.session].ended_by;
    return r;
  }

  Release Take() override {
    Release r = *Peek();
    const Due d = *due_.begin();
    due_.erase(due_.begin());
    ++taken_;
    if (d.not_sent) return r;
    Open& o = open_[d.session];
    o.in_flight = true;
    o.ok = false;
    o.text.clear();
    if (body_) r.body = body_(d.index, o.texts);
    return r;
  }

  // Only a turn that another turn follows: the last turn's text is never sent back.
  bool WantsText(size_t index) const override {
    const Where w = Find(index);
    return w.session != kNone && w.turn + 1 < sessions_[w.session].size();
  }

  void Streamed(size_t index, bool ok, std::string text) override {
    Open* o = InFlight(index);
    if (o == nullptr) return;
    o->ok = ok && !text.empty();
    o->text = std::move(text);
  }

  void Finished(size_t index, MonoNs done_ns) override {
    Open* o = InFlight(index);
    if (o == nullptr) return;
    o->in_flight = false;
    const Where w = Find(index);
    const std::vector<SessionTurn>& turns = sessions_[w.session];
    if (w.turn + 1 == turns.size()) return End(w.session, done_ns);
    if (!o->ok) return Fail(w, done_ns);
    o->texts.push_back(std::move(o->text));
    o->turn = w.turn + 1;
    const SessionTurn& next = turns[o->turn];
    due_.insert(Due{done_ns + next.think_ns, next.index, w.session, false});
  }

  bool Exhausted() const override { return taken_ >= count_; }

 private:
  struct Due {
    MonoNs ns = 0;
    size_t index = 0;
    size_t session = 0;
    bool not_sent = false;
    bool operator<(const Due& o) const { return ns != o.ns ? ns < o.ns : index < o.index; }
  };
  struct Open {
    size_t turn = 0;  // the turn released last
    bool in_flight = false;
    bool ok = false;                 // what Streamed() said of the turn in flight
    std::string text;                // ... and its text
    std::vector<std::string> texts;  // the texts of the turns before it, in order
    std::string ended_by;            // why its remaining turns are not sent
  };

  Where Find(size_t index) const { return index < where_.size() ? where_[index] : Where{}; }

  // The session whose turn in flight is `index`, or null.
  Open* InFlight(size_t index) {
    const Where w = Find(index);
    if (w.session == kNone || open_.empty()) return nullptr;
    Open& o = open_[w.session];
    return o.in_flight && o.turn == w.turn ? &o : nullptr;
  }

  // The next top-level session not yet started takes a place, its first turn intended at `at`.
  void StartNext(MonoNs at) {
    while (next_session_ < sessions_.size()) {
      const size_t s = next_session_++;
      if (starts_[s].parent >= 0 || sessions_[s].empty()) continue;
      Launch(s, at);
      return;
    }
  }

  // Session `s`'s first turn is due at `at`, and each of its sub-agents' its own time after.
  void Launch(size_t s, MonoNs at) {
    if (!sessions_[s].empty()) {
      open_[s].turn = 0;
      due_.insert(Due{at, sessions_[s][0].index, s, false});
    }
    for (size_t c : children_[s]) Launch(c, at + starts_[c].after_ns);
  }

  // Session `s` ended: a top-level one gives its place to the next.
  void End(size_t s, MonoNs done_ns) {
    Open& o = open_[s];
    o.texts.clear();
    o.texts.shrink_to_fit();
    o.text.clear();
    if (starts_[s].parent < 0) StartNext(done_ns);
  }

  // Turn w failed: the session's remaining turns are released at once, as not sent.
  void Fail(Where w, MonoNs done_ns) {
    const std::vector<SessionTurn>& turns = sessions_[w.session];
    Open& o = open_[w.session];
    o.ended_by = "session " + std::to_string(w.session) + " ended at its turn " +
                 std::to_string(w.turn + 1) + " of " + std::to_string(turns.size()) +
                 " (request index " + std::to_string(turns[w.turn].index) + "), which failed";
    for (size_t t = w.turn + 1; t < turns.size(); ++t) {
      due_.insert(Due{done_ns, turns[t].index, w.session, true});
    }
    End(w.session, done_ns);
  }

  int concurrency_;
  std::vector<std::vector<SessionTurn>> sessions_;
  std::vector<SessionStart> starts_;           // by session
  std::vector<std::vector<size_t>> children_;  // by session: its sub-agents
  TurnBodyFn body_;
  std::vector<Where> where_;  // by request index
  size_t count_ = 0;
  size_t taken_ = 0;
  size_t next_session_ = 0;
  std::set<Due> due_;       // releases known, earliest first (ties: lower index)
  std::vector<Open> open_;  // by session
};

}  // namespace

std::unique_ptr<ArrivalModel> SessionArrivals(SessionSchedule schedule, TurnBodyFn body) {
  return std::make_unique<Sessions>(std::move(schedule), std::move(body));
}

}  // namespace capq

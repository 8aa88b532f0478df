// Arrival models: when the load generator releases each request of a phase. One interface, one
// implementation per model, so the loop that sends, stamps and frames is the same for all of them.
//
//   closed loop  C requests at the phase start, then one more at each completion: the freed slot's
//                next request was intended to start at that completion (the seed's concurrency).
//   scheduled    request i at phase start + offsets[i], whatever is still in flight: an open-loop
//                arrival process (constant, Poisson, gamma; the schedule is drawn by the caller).
//                A request the loop releases late keeps its intended time, so latency can count
//                from when it should have been sent (coordinated omission, as wrk2 corrects it).
//   sessions     C conversations open at once, each a list of turns: turn t+1 is due its think
//                time after turn t ended, and its body (the conversation so far, with the text the
//                server streamed back) is built when it is released. A finished session's place
//                goes to the next one; a failed turn ends its session, whose remaining turns are
//                released as not sent.
// The replay model is a further implementation of the same interface.
//
// Requests are named by their index in the phase's list. Not thread-safe: the loop's thread alone
// calls a model.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "capq/clock.h"

namespace capq {

struct Release {
  size_t index = 0;        // in the phase's request list
  MonoNs intended_ns = 0;  // when it should be sent; the loop sends it at or after this
  // Non-empty: send this body instead of the planned one (built at release, by Take() only).
  std::string body;
  // Non-empty: do not send it; the loop records it as never sent, for this reason, and calls no
  // Finished() for it.
  std::string not_sent;
};

class ArrivalModel {
 public:
  virtual ~ArrivalModel() = default;
  virtual const char* name() const = 0;
  // The phase of `count` requests starts at `start_ns`.
  virtual void Begin(MonoNs start_ns, size_t count) = 0;
  // The next request to release, or nullopt when none is known until a request finishes (or all
  // were released). The same answer until Take() or Finished(). Its body is left empty: Peek() is
  // asked often, and a body is built once.
  virtual std::optional<Release> Peek() const = 0;
  // The loop releases what Peek() answered: the same release, with its body where the model
  // builds one.
  virtual Release Take() = 0;
  // Whether the model needs the text the server streams for request `index` (Streamed()).
  virtual bool WantsText(size_t /*index*/) const { return false; }
  // For a request the model wants the text of, just before its Finished(): `ok` when it was
  // answered with HTTP 200, ran to its own end and its stream decoded without error to a finish
  // reason; `text` the concatenated delta.content of its stream. Not called for a request that
  // was never sent or whose transfer could not start: Finished() alone means it failed.
  virtual void Streamed(size_t /*index*/, bool /*ok*/, std::string /*text*/) {}
  // Request `index` ended in any way (done, failed, cut, or its handle could not be built).
  virtual void Finished(size_t index, MonoNs done_ns) = 0;
  // Every request was released.
  virtual bool Exhausted() const = 0;
  // The model split over `n` event loops (loadgen.h): n models over disjoint shares of the phase's
  // requests, which together release every request once. A scheduled share keeps each request's
  // intended time; a closed loop's share is a closed loop over its share of the slots. Each is
  // deterministic: request i goes to share i % m, where m is n, or the number of slots when a
  // closed loop has fewer (the shares beyond release nothing). Empty when the model cannot be
  // split; the run then keeps one loop. Called before Begin().
  virtual std::vector<std::unique_ptr<ArrivalModel>> Split(int /*n*/) const { return {}; }
  // Whether request `index` is in this model's share (always, unless it came from Split()).
  virtual bool Releases(size_t /*index*/) const { return true; }
};

// Builds a phase's model once the phase's size is known.
using ArrivalFactory = std::function<std::unique_ptr<ArrivalModel>()>;

std::unique_ptr<ArrivalModel> ClosedLoopArrivals(int concurrency);
// `offsets_ns`: wall nanoseconds from the phase start, one per request, non-decreasing.
std::unique_ptr<ArrivalModel> ScheduledArrivals(std::vector<MonoNs> offsets_ns);

struct SessionTurn {
  size_t index = 0;     // the request's index in the measured list
  MonoNs think_ns = 0;  // wall ns between the end of the previous turn and this send (0 for turn 1)
};
// A sub-agent: the session it runs beside (an earlier one of the schedule) and when its first turn
// is due, in wall ns after its parent's first turn was.
struct SessionStart {
  int parent = -1;  // -1: a top-level session
  MonoNs after_ns = 0;
};
struct SessionSchedule {
  int concurrency = 1;                             // top-level sessions open at once
  std::vector<std::vector<SessionTurn>> sessions;  // in start order; each in turn order
  std::vector<SessionStart> starts;                // by session; empty: every one top-level
};
// The body of request `index`, given the content text the server streamed for each earlier turn
// of its session, in order (empty for a session's first turn). Called at every turn's release;
// "" sends the planned body.
using TurnBodyFn =
    std::function<std::string(size_t index, const std::vector<std::string>& earlier_texts)>;
// The first `concurrency` top-level sessions start at the phase start; a session's next turn is
// due at the end of its previous turn plus its think time; a top-level session that ended (its
// last turn done, or a turn failed: its remaining turns are released as not sent) gives its place
// to the next one, intended at that end. A sub-agent takes no place: its first turn is due its
// `after_ns` after its parent's first turn was, and it runs beside its parent (and its own
// sub-agents beside it). Every request index of the schedule is released exactly once.
// REQUIRES: each index appears once in the schedule and is below the phase's count; a schedule
// that names fewer requests than the phase has never exhausts it (the loop stops at the first
// one left). A null `body` sends every turn's planned body.
std::unique_ptr<ArrivalModel> SessionArrivals(SessionSchedule schedule, TurnBodyFn body);

}  // namespace capq

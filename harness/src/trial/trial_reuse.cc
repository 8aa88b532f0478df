// What a trial of a reuse row adds: the sessions' arrival model (each later turn built from the
// text its session was streamed), and the reuse each measured request is declared to be served,
// derived from the plan and the evidence alone so that `capq validate` derives the same.
#include <map>
#include <utility>

#include "capq/model/plan.h"
#include "trial_internal.h"

namespace capq::internal {
namespace {

using TurnIndexMap = std::map<std::pair<int, int>, const PlanRequest*>;
using ResultIndex = std::map<std::string, const RequestResult*>;

// (session, turn) -> the plan's measured request.
TurnIndexMap TurnIndex(const TrialPlan& plan) {
  TurnIndexMap out;
  for (const PlanRequest& r : plan.measured) {
    if (r.session >= 0) out[{r.session, r.turn}] = &r;
  }
  return out;
}

// Turn `turn` of `session` as the evidence holds it; null when the plan or the evidence has none.
const RequestResult* ResultOfTurn(const TurnIndexMap& turns, const ResultIndex& by_id, int session,
                                  int turn, const PlanRequest** plan_request) {
  auto p = turns.find({session, turn});
  if (p == turns.end()) return nullptr;
  *plan_request = p->second;
  auto r = by_id.find(p->second->id);
  return r == by_id.end() ? nullptr : r->second;
}

// The session row's later turns: declared reuse = the previous turn's whole context (its prompt and
// completion tokens; the engine may keep one token fewer, inside the tolerance), and the messages
// its body must carry. A turn whose earlier turns the evidence lacks is expected to carry a
// message no body can (so session_history fails it) and declares nothing (so cache_reuse does).
void ExpectSessionTurns(const TrialPlan& plan, const std::vector<RequestResult>& measured,
                        ValidationInput* in) {
  ResultIndex by_id;
  for (const RequestResult& r : measured) by_id[r.id] = &r;
  const TurnIndexMap turns = TurnIndex(plan);
  for (const PlanRequest& r : plan.measured) {
    if (r.turn <= 1 || !by_id.count(r.id)) continue;
    std::vector<std::string> history;
    const RequestResult* prev = nullptr;
    for (int t = 1; t < r.turn; ++t) {
      const PlanRequest* p = nullptr;
      prev = ResultOfTurn(turns, by_id, r.session, t, &p);
      if (prev == nullptr) {
        history = {"missing: turn " + std::to_string(t) + " of session " +
                   std::to_string(r.session) + " has no record"};
        break;
      }
      history.push_back("user:" + p->prompt.sha256);
      history.push_back("assistant:" + prev->content_sha256);
    }
    if (prev == nullptr) {
      in->expected_history[r.id] = std::move(history);
      continue;
    }
    history.push_back("user:" + r.prompt.sha256);
    in->expected_history[r.id] = std::move(history);
    if (prev->prompt_tokens && prev->completion_tokens) {
      in->declared_cached_tokens[r.id] = *prev->prompt_tokens + *prev->completion_tokens;
    }
  }
}

}  // namespace

void ExpectReuse(const Row& row, const TrialPlan& plan, const std::vector<RequestResult>& measured,
                 ValidationInput* in) {
  in->reuse_row = row.reuse();
  // A block session's turns are planned whole prompts: their reuse is declared in the plan and
  // there is no resent conversation for session_history to prove.
  in->session_row = row.sessions && !row.sessions->blocks;
  if (!in->reuse_row) return;
  in->reuse_tolerance = row.reuse_tolerance();
  for (const PlanRequest& r : plan.measured) {
    if (r.declared_cached_tokens) in->declared_cached_tokens[r.id] = *r.declared_cached_tokens;
  }
  if (in->session_row) ExpectSessionTurns(plan, measured, in);
}

ReuseFigures MeasureReuse(const TrialPlan& plan, const ValidationInput& in, double time_scale) {
  ReuseFigures f;
  int64_t declared = 0, served = 0, prompt = 0;
  ResultIndex by_id;
  for (const RequestResult& r : in.measured) {
    by_id[r.id] = &r;
    auto it = in.declared_cached_tokens.find(r.id);
    if (it == in.declared_cached_tokens.end() || !r.cached_tokens || !r.prompt_tokens) continue;
    ++f.requests;
    declared += it->second;
    served += *r.cached_tokens;
    prompt += *r.prompt_tokens;
  }
  if (prompt > 0) {
    f.declared_ratio = static_cast<double>(declared) / static_cast<double>(prompt);
    f.served_ratio = static_cast<double>(served) / static_cast<double>(prompt);
  }
  const auto turns = TurnIndex(plan);
  double want = 0, applied = 0;
  for (const PlanRequest& r : plan.measured) {
    if (r.turn <= 1) continue;
    auto now = by_id.find(r.id);
    auto before = by_id.find(turns.at({r.session, r.turn - 1})->id);
    if (now == by_id.end() || before == by_id.end() || now->second->start_ns == 0) continue;
    ++f.think_turns;
    want += r.think_s;
    applied +=
        static_cast<double>(now->second->start_ns - before->second->end_ns) * 1e-9 * time_scale;
  }
  if (f.think_turns > 0) {
    f.think_declared_mean_s = want / f.think_turns;
    f.think_applied_mean_s = applied / f.think_turns;
  }
  return f;
}

ArrivalFactory SessionArrivalFactory(const Row& row, const TrialPlan& plan, double time_scale) {
  SessionSchedule schedule;
  schedule.concurrency = plan.level;
  for (size_t i = 0; i < plan.measured.size(); ++i) {
    const PlanRequest& r = plan.measured[i];
    if (r.turn == 1) {
      schedule.sessions.emplace_back();
      schedule.starts.push_back(
          {r.parent_session, static_cast<MonoNs>(r.start_after_s * 1e9 / time_scale)});
    }
    const MonoNs think_ns = static_cast<MonoNs>(r.think_s * 1e9 / time_scale);
    schedule.sessions.back().push_back({i, think_ns});
  }
  // The body of a turn: a planned one sends the plan's (""); a later turn built when sent resends
  // its session's prompts so far with the text each earlier turn was streamed.
  TurnBodyFn body = [&row, &plan](size_t index, const std::vector<std::string>& earlier) {
    const PlanRequest& r = plan.measured[index];
    if (!BuiltWhenSent(row, r)) return std::string();
    std::vector<std::string> prompts;
    for (size_t k = index + 1 - static_cast<size_t>(r.turn); k <= index; ++k) {
      prompts.push_back(plan.measured[k].prompt.text);
    }
    return SessionTurnBody(row, prompts, earlier, r.max_tokens, plan.seed);
  };
  return [schedule = std::move(schedule), body = std::move(body)] {
    return SessionArrivals(schedule, body);
  };
}

}  // namespace capq::internal

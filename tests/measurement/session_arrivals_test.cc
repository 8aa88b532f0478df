// The sessions arrival model alone, on a fake clock: what it releases, when, and with which body.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "capq/measurement/arrival.h"

namespace capq {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// `sessions` sessions of `turns` turns, numbered in order: session s turn t is s * turns + t.
SessionSchedule Grid(int concurrency, size_t sessions, size_t turns, MonoNs think_ns) {
  SessionSchedule s;
  s.concurrency = concurrency;
  for (size_t i = 0; i < sessions; ++i) {
    std::vector<SessionTurn>& v = s.sessions.emplace_back();
    for (size_t t = 0; t < turns; ++t) v.push_back({i * turns + t, t == 0 ? 0 : think_ns});
  }
  return s;
}

// Every release due at or before `now`, taken.
std::vector<Release> TakeDue(ArrivalModel& a, MonoNs now) {
  std::vector<Release> out;
  for (auto r = a.Peek(); r && r->intended_ns <= now; r = a.Peek()) out.push_back(a.Take());
  return out;
}

std::vector<size_t> Indices(const std::vector<Release>& rs) {
  std::vector<size_t> out;
  for (const Release& r : rs) out.push_back(r.index);
  return out;
}

// A turn that ended well at `done_ns` with `text`.
void Done(ArrivalModel& a, size_t index, MonoNs done_ns, const std::string& text) {
  if (a.WantsText(index)) a.Streamed(index, true, text);
  a.Finished(index, done_ns);
}

TEST(SessionArrivals, StartsTheFirstCSessionsTogetherAtThePhaseStart) {
  auto a = SessionArrivals(Grid(2, 3, 2, 100), nullptr);
  a->Begin(1000, 6);
  const std::vector<Release> got = TakeDue(*a, 1000000);
  EXPECT_THAT(Indices(got), ElementsAre(0u, 2u));
  for (const Release& r : got) {
    EXPECT_EQ(r.intended_ns, 1000);
    EXPECT_THAT(r.not_sent, IsEmpty());
  }
  EXPECT_FALSE(a->Peek());  // nothing more until a turn ends
  EXPECT_FALSE(a->Exhausted());
}

TEST(SessionArrivals, NextTurnIsDueItsThinkTimeAfterThePreviousTurnEnded) {
  auto a = SessionArrivals(Grid(1, 1, 3, 250), nullptr);
  a->Begin(0, 3);
  ASSERT_THAT(Indices(TakeDue(*a, 0)), ElementsAre(0u));
  a->Streamed(0, true, "hello");
  EXPECT_FALSE(a->Peek());  // its text came, the turn has not ended
  a->Finished(0, 5000);
  ASSERT_TRUE(a->Peek());
  EXPECT_EQ(a->Peek()->index, 1u);
  EXPECT_EQ(a->Peek()->intended_ns, 5250);
  EXPECT_THAT(TakeDue(*a, 5249), IsEmpty());
  EXPECT_THAT(Indices(TakeDue(*a, 5250)), ElementsAre(1u));
}

TEST(SessionArrivals, AFinishedSessionsPlaceGoesToTheNextSessionAtItsEnd) {
  auto a = SessionArrivals(Grid(1, 2, 2, 10), nullptr);
  a->Begin(0, 4);
  TakeDue(*a, 0);
  Done(*a, 0, 100, "a");
  EXPECT_THAT(Indices(TakeDue(*a, 110)), ElementsAre(1u));
  Done(*a, 1, 300, "b");
  ASSERT_TRUE(a->Peek());
  EXPECT_EQ(a->Peek()->index, 2u);
  EXPECT_EQ(a->Peek()->intended_ns, 300);  // like a closed loop's freed slot
}

// Session 0 (turns 0, 1) has a sub-agent, session 1 (turns 2, 3), due 500 ns after it, and that
// one a sub-agent of its own, session 2 (turn 4), 100 ns after that; session 3 (turn 5) is
// top-level.
SessionSchedule WithSubAgents() {
  SessionSchedule s;
  s.concurrency = 1;
  s.sessions = {{{0, 0}, {1, 10}}, {{2, 0}, {3, 10}}, {{4, 0}}, {{5, 0}}};
  s.starts = {{-1, 0}, {0, 500}, {1, 100}, {-1, 0}};
  return s;
}

TEST(SessionArrivals, ASubAgentRunsBesideItsParentAndTakesNoPlace) {
  auto a = SessionArrivals(WithSubAgents(), nullptr);
  a->Begin(1000, 6);
  EXPECT_THAT(Indices(TakeDue(*a, 1000)), ElementsAre(0u));
  ASSERT_TRUE(a->Peek());
  EXPECT_EQ(a->Peek()->index, 2u);  // while turn 0 is still in flight
  EXPECT_EQ(a->Peek()->intended_ns, 1500);
  EXPECT_THAT(Indices(TakeDue(*a, 1600)), ElementsAre(2u, 4u));
  // The sub-agents end first: session 3 waits for the place session 0 holds.
  Done(*a, 4, 1700, "d");
  Done(*a, 2, 1800, "c");
  EXPECT_THAT(Indices(TakeDue(*a, 1810)), ElementsAre(3u));
  Done(*a, 3, 1900, "c2");
  EXPECT_FALSE(a->Peek());
  Done(*a, 0, 2000, "a");
  EXPECT_THAT(Indices(TakeDue(*a, 2010)), ElementsAre(1u));
  EXPECT_FALSE(a->Peek());
  Done(*a, 1, 2100, "b");
  ASSERT_TRUE(a->Peek());
  EXPECT_EQ(a->Peek()->index, 5u);
  EXPECT_EQ(a->Peek()->intended_ns, 2100);
  TakeDue(*a, 2100);
  EXPECT_TRUE(a->Exhausted());
}

TEST(SessionArrivals, AFailedTurnReleasesTheRestAsNotSentAndTheNextSessionStarts) {
  auto a = SessionArrivals(Grid(1, 2, 3, 10), nullptr);
  a->Begin(0, 6);
  TakeDue(*a, 0);
  Done(*a, 0, 100, "a");
  TakeDue(*a, 110);
  a->Streamed(1, false, "partial");
  a->Finished(1, 400);
  const std::vector<Release> got = TakeDue(*a, 400);
  ASSERT_THAT(Indices(got), ElementsAre(2u, 3u));
  EXPECT_THAT(got[0].not_sent, HasSubstr("session 0"));
  EXPECT_THAT(got[0].not_sent, HasSubstr("turn 2 of 3"));
  EXPECT_EQ(got[0].intended_ns, 400);
  EXPECT_THAT(got[1].not_sent, IsEmpty());  // session 1's first turn, sent
  EXPECT_EQ(got[1].intended_ns, 400);
}

TEST(SessionArrivals, ATurnWithNoTextOrNoStreamedCallFails) {
  auto a = SessionArrivals(Grid(2, 2, 2, 0), nullptr);
  a->Begin(0, 4);
  TakeDue(*a, 0);
  a->Streamed(0, true, "");  // answered, but nothing to send back
  a->Finished(0, 10);
  a->Finished(2, 10);  // its transfer never started: no Streamed()
  const std::vector<Release> got = TakeDue(*a, 10);
  ASSERT_THAT(Indices(got), ElementsAre(1u, 3u));
  EXPECT_THAT(got[0].not_sent, HasSubstr("session 0"));
  EXPECT_THAT(got[1].not_sent, HasSubstr("session 1"));
  EXPECT_TRUE(a->Exhausted());
}

TEST(SessionArrivals, WantsTheTextOfEveryTurnButTheLast) {
  auto a = SessionArrivals(Grid(1, 2, 3, 0), nullptr);
  a->Begin(0, 6);
  EXPECT_TRUE(a->WantsText(0));
  EXPECT_TRUE(a->WantsText(1));
  EXPECT_FALSE(a->WantsText(2));
  EXPECT_TRUE(a->WantsText(4));
  EXPECT_FALSE(a->WantsText(5));
  EXPECT_FALSE(a->WantsText(99));
}

TEST(SessionArrivals, TheBodyIsBuiltAtTakeFromTheEarlierTextsInOrder) {
  std::map<size_t, std::vector<std::string>> asked;
  TurnBodyFn body = [&](size_t index, const std::vector<std::string>& earlier) {
    asked[index] = earlier;
    return "body" + std::to_string(index);
  };
  auto a = SessionArrivals(Grid(1, 1, 3, 0), body);
  a->Begin(0, 3);
  ASSERT_TRUE(a->Peek());
  EXPECT_THAT(a->Peek()->body, IsEmpty());  // Peek builds nothing
  EXPECT_TRUE(asked.empty());
  Release r = a->Take();
  EXPECT_EQ(r.body, "body0");
  Done(*a, 0, 10, "first");
  EXPECT_EQ(a->Take().body, "body1");
  Done(*a, 1, 20, "second");
  EXPECT_EQ(a->Take().body, "body2");
  EXPECT_THAT(asked[0], IsEmpty());
  EXPECT_THAT(asked[1], ElementsAre("first"));
  EXPECT_THAT(asked[2], ElementsAre("first", "second"));
}

TEST(SessionArrivals, PeekAnswersTheEarliestDueTurnAcrossSessionsLowerIndexFirst) {
  SessionSchedule s;
  s.concurrency = 2;
  s.sessions = {{{1, 0}, {3, 500}}, {{0, 0}, {2, 100}}};
  auto a = SessionArrivals(s, nullptr);
  a->Begin(0, 4);
  EXPECT_THAT(Indices(TakeDue(*a, 0)), ElementsAre(0u, 1u));
  Done(*a, 1, 10, "x");  // its next turn is due at 510
  Done(*a, 0, 20, "y");  // its next turn is due at 120
  ASSERT_TRUE(a->Peek());
  EXPECT_EQ(a->Peek()->index, 2u);
  EXPECT_EQ(a->Peek()->intended_ns, 120);
}

// Sessions of different lengths, every third turn failing: each index is released once.
TEST(SessionArrivals, EveryIndexIsReleasedExactlyOnce) {
  SessionSchedule s;
  s.concurrency = 3;
  size_t n = 0;
  for (size_t i = 0; i < 7; ++i) {
    std::vector<SessionTurn>& v = s.sessions.emplace_back();
    for (size_t t = 0; t < 1 + i % 4; ++t) v.push_back({n++, 5});
  }
  auto a = SessionArrivals(s, nullptr);
  a->Begin(0, n);
  std::vector<size_t> released;
  MonoNs now = 0;
  for (int step = 0; step < 1000 && !a->Exhausted(); ++step) {
    now += 10;
    for (const Release& r : TakeDue(*a, now)) {
      released.push_back(r.index);
      if (!r.not_sent.empty()) continue;
      if (a->WantsText(r.index)) a->Streamed(r.index, r.index % 3 != 2, "t");
      a->Finished(r.index, now);
    }
  }
  EXPECT_TRUE(a->Exhausted());
  EXPECT_FALSE(a->Peek());
  std::sort(released.begin(), released.end());
  std::vector<size_t> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = i;
  EXPECT_EQ(released, want);
}

TEST(ArrivalModels, TakeAnswersWhatPeekAnswered) {
  auto closed = ClosedLoopArrivals(1);
  closed->Begin(7, 2);
  Release r = closed->Take();
  EXPECT_EQ(r.index, 0u);
  EXPECT_EQ(r.intended_ns, 7);
  auto sched = ScheduledArrivals({5, 9});
  sched->Begin(100, 2);
  sched->Take();
  r = sched->Take();
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(r.intended_ns, 109);
  EXPECT_TRUE(r.body.empty());
}

}  // namespace
}  // namespace capq

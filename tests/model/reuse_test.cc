#include "capq/model/reuse.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "row_text.h"

namespace capq {
namespace {

const std::string kRows = std::string(CAPQ_SOURCE_DIR) + "/rows";
const std::string kPrefixRow = kRows + "/sim/sim_small_prefix.yaml";
const std::string kSessionRow = kRows + "/sim/sim_small_sessions.yaml";

using testing::ReadAll;
using testing::Replace;

// A row's text loaded as if it were the file at `path` (relative paths resolve beside it).
Result<Row> LoadAs(const std::string& text, const std::string& path) {
  return LoadRowFromString(text, path);
}

TEST(ReuseRows, ThePrefixAndSessionRowsLoad) {
  Result<Row> p = LoadRow(kPrefixRow);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->prefix.has_value());
  EXPECT_TRUE(p->reuse());
  EXPECT_FALSE(p->open_loop());
  EXPECT_EQ(p->prefix->Prefixes(), 2);
  EXPECT_EQ(p->prefix->groups[0].tokens, 768);
  Result<Row> s = LoadRow(kSessionRow);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_TRUE(s->sessions.has_value());
  EXPECT_EQ(s->workload.arrival_kind, ArrivalKind::kSessions);
  EXPECT_FALSE(s->open_loop());
  EXPECT_EQ(GateClasses(*s), (std::vector<std::string>{"turn1", "turn2", "turn3", "turn4"}));
}

TEST(ReuseRows, RoundTripThroughYaml) {
  for (const std::string& path : {kPrefixRow, kSessionRow}) {
    Result<Row> r = LoadRow(path);
    ASSERT_TRUE(r.ok()) << r.status().message();
    Result<Row> again = LoadAs(RowToYaml(*r), path);
    ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << RowToYaml(*r);
    EXPECT_EQ(RowToYaml(*again), RowToYaml(*r));
  }
}

// A row may allow a share of measured requests to miss their declared reuse; it is kept through a
// round trip, and outside (0, 100) it is refused by name.
TEST(ReuseRows, AMissAllowanceIsReadWrittenAndBounded) {
  const std::string prefix = ReadAll(kPrefixRow);
  const std::string with = Replace(prefix, "ratio_pct: 2}", "ratio_pct: 2, misses_pct: 5}");
  Result<Row> r = LoadAs(with, kPrefixRow);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_DOUBLE_EQ(r->prefix->tolerance.misses_pct, 5);
  Result<Row> again = LoadAs(RowToYaml(*r), kPrefixRow);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_DOUBLE_EQ(again->prefix->tolerance.misses_pct, 5);
  EXPECT_EQ(LoadRow(kPrefixRow)->prefix->tolerance.misses_pct, 0);
  Result<Row> bad =
      LoadAs(Replace(prefix, "ratio_pct: 2}", "ratio_pct: 2, misses_pct: 120}"), kPrefixRow);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("misses_pct"), std::string::npos) << bad.status().message();
}

TEST(ReuseRows, RefusalsNameTheKey) {
  const std::string prefix = ReadAll(kPrefixRow);
  const std::string sessions = ReadAll(kSessionRow);
  struct Case {
    std::string text, key, words;
  } cases[] = {
      {Replace(prefix, "tokens: 768", "tokens: 1024"), "prefix.groups[0].tokens",
       "expected tokens < 1024"},
      {Replace(prefix, "share: 0.75}", "share: 0.75}\n    - {prefixes: 1, tokens: 64, share: 0.5}"),
       "prefix.groups[1].share", "more than every prompt"},
      {Replace(prefix, "prefix_cache: enabled", "prefix_cache: disabled"), "prefix",
       "prefix_cache: enabled"},
      {Replace(sessions, "arrival: {kind: sessions}", "arrival: {kind: closed_loop}"), "sessions",
       "kind: sessions"},
      {Replace(sessions, "min_requests: 80", "min_requests: 64"), "measured.min_requests",
       "only 16 reach turn 1"},
      {Replace(sessions, "  turns: 4\n",
               "  turns: 4\n  trajectory: ../traffic/agent_sessions.jsonl\n"),
       "sessions.turns", "either trajectory or turns"},
  };
  for (const Case& c : cases) {
    Result<Row> r = LoadAs(c.text, kSessionRow);
    ASSERT_FALSE(r.ok()) << c.key;
    EXPECT_NE(r.status().message().find(c.key), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(c.words), std::string::npos) << r.status().message();
  }
}

TEST(Trajectory, ParsesSessionsInOrderAndNamesTheBadLine) {
  Result<std::vector<std::vector<TurnShape>>> t =
      LoadTrajectory(kRows + "/traffic/agent_sessions.jsonl");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->size(), 3u);
  EXPECT_EQ((*t)[0].size(), 3u);
  EXPECT_EQ((*t)[1].size(), 4u);
  EXPECT_EQ((*t)[1][0].input_tokens, 640);
  EXPECT_DOUBLE_EQ((*t)[1][0].think_s, 2.5);
  EXPECT_DOUBLE_EQ((*t)[1][3].think_s, 0);
  const std::string bad =
      "{\"schema\":\"capq/trajectory/v1\",\"session\":\"a\",\"turn\":1,\"input_tokens\":5,"
      "\"output_tokens\":5}\n"
      "{\"schema\":\"capq/trajectory/v1\",\"session\":\"a\",\"turn\":3,\"input_tokens\":5,"
      "\"output_tokens\":5}\n";
  Result<std::vector<std::vector<TurnShape>>> b = ParseTrajectory(bad, "t.jsonl");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("t.jsonl:2: session a: expected turn 2, got 3"),
            std::string::npos)
      << b.status().message();
}

TEST(Sessions, EnoughSessionsForTheSampleAndAtLeastC) {
  Result<Row> s = LoadRow(kSessionRow);
  ASSERT_TRUE(s.ok());
  s->sessions->think = "exponential";
  const auto at1 = SessionShapes(*s, 1, 7);
  EXPECT_EQ(at1.size(), 20u);  // 80 requests of 4 turns
  EXPECT_EQ(TurnCounts(at1), (std::vector<int>{20, 20, 20, 20}));
  EXPECT_EQ(SessionShapes(*s, 8, 7).size(), 32u);  // 16 * 8 = 128 requests
  // Exponential think times of mean 1 s: seeded, positive, the last turn's 0.
  double sum = 0;
  int n = 0;
  for (const auto& session : SessionShapes(*s, 8, 7)) {
    EXPECT_EQ(session.back().think_s, 0);
    for (size_t t = 0; t + 1 < session.size(); ++t) {
      EXPECT_GT(session[t].think_s, 0);
      sum += session[t].think_s;
      ++n;
    }
    EXPECT_EQ(session[0].input_tokens, 512);
    EXPECT_EQ(session[1].input_tokens, 128);
  }
  EXPECT_NEAR(sum / n, 1.0, 0.35);
  EXPECT_EQ(SessionShapes(*s, 8, 7)[3][1].think_s, SessionShapes(*s, 8, 7)[3][1].think_s);
  EXPECT_NE(SessionShapes(*s, 8, 7)[3][1].think_s, SessionShapes(*s, 8, 8)[3][1].think_s);
}

TEST(Prefixes, SharesAreExactAndPrefixesTakeTurns) {
  PrefixReuse p;
  p.groups = {{2, 768, 0.5}, {1, 256, 0.25}};
  const std::vector<int> slots = AssignPrefixes(p, 64, 11);
  std::map<int, int> n;
  for (int s : slots) ++n[s];
  EXPECT_EQ(n[-1], 16);
  EXPECT_EQ(n[0], 16);
  EXPECT_EQ(n[1], 16);
  EXPECT_EQ(n[2], 16);
  EXPECT_EQ(GroupOfPrefix(p, 2).tokens, 256);
  // Spread evenly: 16 uses of 64 come every 4 slots (a cyclic gap of at most 5).
  for (int prefix = 0; prefix < 3; ++prefix) {
    std::vector<int> at;
    for (int i = 0; i < 64; ++i) {
      if (slots[static_cast<size_t>(i)] == prefix) at.push_back(i);
    }
    for (size_t k = 0; k < at.size(); ++k) {
      const int next = k + 1 < at.size() ? at[k + 1] : at[0] + 64;
      EXPECT_LE(next - at[k], 5) << "prefix " << prefix << " at " << at[k];
    }
  }
  std::set<std::vector<int>> seen;
  for (uint64_t seed = 1; seed <= 8; ++seed) seen.insert(AssignPrefixes(p, 64, seed));
  EXPECT_GT(seen.size(), 1u);  // the seed moves where the period starts
}

TEST(PrefixPlan, PrimesComeAfterTheWarmupsAndMeasuredPromptsStartWithTheirPrefix) {
  Result<Row> row = LoadRow(kPrefixRow);
  ASSERT_TRUE(row.ok());
  PlanInputs in;
  in.level = 4;
  Result<TrialPlan> plan = MakeTrialPlan(*row, in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->warmup.size(), 6u);  // 4 warm-ups, 2 primes
  std::vector<std::string> prefixes;
  for (size_t i = 4; i < 6; ++i) {
    const PlanRequest& p = plan->warmup[i];
    EXPECT_TRUE(p.prime);
    EXPECT_EQ(p.id, "p" + std::to_string(i - 4));
    EXPECT_EQ(p.max_tokens, 1);
    EXPECT_EQ(p.prompt.message_tokens, 768);
    prefixes.push_back(p.prompt.text);
  }
  int shared = 0;
  std::set<std::string> unique;
  for (const PlanRequest& r : plan->measured) {
    ASSERT_TRUE(r.declared_cached_tokens.has_value());
    unique.insert(r.prompt.text);
    EXPECT_EQ(r.prompt.message_tokens, 1024);
    if (r.prefix < 0) {
      EXPECT_EQ(*r.declared_cached_tokens, 0);
      continue;
    }
    ++shared;
    EXPECT_EQ(*r.declared_cached_tokens, 768);
    EXPECT_EQ(r.prompt.text.rfind(prefixes[static_cast<size_t>(r.prefix)] + " ", 0), 0u) << r.id;
  }
  EXPECT_EQ(shared, 48);  // 0.75 of 64
  EXPECT_EQ(unique.size(), plan->measured.size());
  Result<TrialPlan> back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(PlanToJson(*back), PlanToJson(*plan));
}

TEST(SessionPlan, TurnsAreConsecutiveAndOnlyTheFirstHasABody) {
  Result<Row> row = LoadRow(kSessionRow);
  ASSERT_TRUE(row.ok());
  PlanInputs in;
  in.level = 2;
  Result<TrialPlan> plan = MakeTrialPlan(*row, in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->sessions());
  ASSERT_EQ(plan->measured.size(), 80u);
  EXPECT_EQ(plan->expected_measured, 80);
  for (size_t i = 0; i < plan->measured.size(); ++i) {
    const PlanRequest& r = plan->measured[i];
    EXPECT_EQ(r.session, static_cast<int>(i / 4));
    EXPECT_EQ(r.turn, static_cast<int>(i % 4) + 1);
    EXPECT_EQ(r.traffic_class, TurnClass(r.turn));
    EXPECT_EQ(r.body.empty(), r.turn > 1) << r.id;
    EXPECT_EQ(r.declared_cached_tokens.has_value(), r.turn == 1);
    EXPECT_EQ(r.think_s > 0, r.turn > 1);
    EXPECT_EQ(r.prompt.message_tokens, r.turn == 1 ? 512 : 128);
  }
  Result<TrialPlan> back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(PlanToJson(*back), PlanToJson(*plan));
  const std::string body = SessionTurnBody(*row, {"a b", "c"}, {"x y"}, 64, 5);
  EXPECT_NE(
      body.find(
          R"("messages":[{"content":"a b","role":"user"},{"content":"x y","role":"assistant"},{"content":"c","role":"user"}])"),
      std::string::npos)
      << body;
}

}  // namespace
}  // namespace capq

namespace capq {
namespace {

std::string Turn(const std::string& session, int turn, const std::string& extra = "") {
  return "{\"schema\":\"capq/trajectory/v1\",\"session\":\"" + session +
         "\",\"turn\":" + std::to_string(turn) +
         ",\"input_tokens\":8,\"output_tokens\":4,\"tool_delay_s\":0.5" + extra + "}\n";
}

// Top-level "p" (2 turns) with sub-agent "p/a" (2 turns, 3 s in) and its own "p/a/b" (1 turn,
// 1 s after it), then top-level "q" (1 turn).
const std::string kNested =
    Turn("p", 1) + Turn("p", 2) + Turn("p/a", 1, ",\"parent\":\"p\",\"start_offset_s\":3") +
    Turn("p/a", 2) + Turn("p/a/b", 1, ",\"parent\":\"p/a\",\"start_offset_s\":1") + Turn("q", 1);

TEST(Sessions, SubAgentsComeWithTheirParentAndTakeNoPlace) {
  std::vector<PathStart> links;
  Result<std::vector<std::vector<TurnShape>>> paths = ParseTrajectory(kNested, "n.jsonl", &links);
  ASSERT_TRUE(paths.ok()) << paths.status().message();
  ASSERT_EQ(links.size(), 4u);
  EXPECT_EQ(links[1].parent, 0);
  EXPECT_DOUBLE_EQ(links[1].after_s, 3);
  EXPECT_EQ(links[2].parent, 1);
  EXPECT_EQ(links[3].parent, -1);
  Result<Row> row = LoadRow(kSessionRow);
  ASSERT_TRUE(row.ok());
  row->sessions->paths = *paths;
  row->sessions->starts = links;
  row->measured = Measured{6, 1};
  std::vector<PathStart> starts;
  // Two top-level sessions at C=2: p with its two sub-agents, then q; 6 turns in all.
  const auto shapes = SessionShapes(*row, 2, 1, &starts);
  ASSERT_EQ(shapes.size(), 4u);
  EXPECT_EQ(shapes[1].size(), 2u);
  EXPECT_EQ(starts[0].parent, -1);
  EXPECT_EQ(starts[1].parent, 0);
  EXPECT_DOUBLE_EQ(starts[1].after_s, 3);
  EXPECT_EQ(starts[2].parent, 1);
  EXPECT_DOUBLE_EQ(starts[2].after_s, 1);
  EXPECT_EQ(starts[3].parent, -1);
  // At C=3 a third top-level session, p again, with its sub-agents after it.
  EXPECT_EQ(SessionShapes(*row, 3, 1, &starts).size(), 7u);
  EXPECT_EQ(starts[5].parent, 4);
  // The plan carries each sub-agent's first turn's link, and plan.json keeps it.
  PlanInputs in;
  in.level = 2;
  Result<TrialPlan> plan = MakeTrialPlan(*row, in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->measured.size(), 6u);
  EXPECT_EQ(plan->measured[2].session, 1);
  EXPECT_EQ(plan->measured[2].turn, 1);
  EXPECT_EQ(plan->measured[2].parent_session, 0);
  EXPECT_DOUBLE_EQ(plan->measured[2].start_after_s, 3);
  EXPECT_EQ(plan->measured[3].parent_session, -1);  // a later turn: no link of its own
  EXPECT_EQ(plan->measured[4].parent_session, 1);
  Result<TrialPlan> back = PlanFromJson(PlanToJson(*plan));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->measured[4].parent_session, 1);
  EXPECT_DOUBLE_EQ(back->measured[4].start_after_s, 1);
}

}  // namespace
}  // namespace capq

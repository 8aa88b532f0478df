// Recorded agent sessions read as their publishers document them (session_import.h) and kept as
// capq trajectories (trajectory.h), on byte-exact copies of the shared slices
// (tests/data/traces/README.md).
#include "capq/model/session_import.h"

#include <gtest/gtest.h>

#include "capq/file_io.h"
#include "capq/model/reuse.h"
#include "capq/model/session_summary.h"

namespace capq {
namespace {

const std::string kTraces = std::string(CAPQ_SOURCE_DIR) + "/tests/data/traces/";

std::string Read(const std::string& name) {
  Result<std::string> text = ReadWholeFile(kTraces + name);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

ImportedSessions Import(TraceFormat f, const std::string& name) {
  Result<ImportedSessions> s = ImportSessionTrace(f, Read(name), name);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : ImportedSessions{};
}

std::string ImportError(TraceFormat f, const std::string& text) {
  Result<ImportedSessions> s = ImportSessionTrace(f, text, "t.json");
  return s.ok() ? std::string("accepted") : s.status().message();
}

TEST(SessionImport, WekaKeepsPromptsOutputsBlocksSendTimesAndTheDelaysWithTheirCause) {
  const ImportedSessions w = Import(TraceFormat::kWeka, "weka_trace_0026.json");
  EXPECT_TRUE(w.local_block_ids);
  ASSERT_EQ(w.sessions.size(), 1u);
  const TrajectorySession& s = w.sessions[0];
  EXPECT_EQ(s.name, "trace_0026");
  EXPECT_TRUE(s.parent.empty());
  ASSERT_EQ(s.turns.size(), 3u);
  const TrajectoryTurn& t1 = s.turns[0];
  EXPECT_EQ(t1.prompt_tokens, 15291);
  EXPECT_EQ(t1.input_tokens, 15291);  // turn 1: the whole prompt
  EXPECT_EQ(t1.output_tokens, 2282);
  EXPECT_EQ(t1.block_tokens, 64);
  EXPECT_EQ(t1.block_ids.size(), 238u);  // floor(15291 / 64): full blocks only
  // Turn 2 shares turn 1's 238 blocks: its new tokens are the rest of its prompt.
  EXPECT_EQ(s.turns[1].input_tokens, 17401 - 238 * 64);
  EXPECT_EQ(s.turns[2].input_tokens, 20068 - 271 * 64);
  EXPECT_DOUBLE_EQ(s.turns[1].offset_s.value_or(-1), 94);
  EXPECT_DOUBLE_EQ(s.turns[2].offset_s.value_or(-1), 146);
  // The next request's think_time; its input is a user's text, then a tool's result.
  EXPECT_DOUBLE_EQ(t1.delay_s, 48);
  EXPECT_EQ(t1.delay_cause, DelayCause::kUser);
  EXPECT_DOUBLE_EQ(s.turns[1].delay_s, 4);
  EXPECT_EQ(s.turns[1].delay_cause, DelayCause::kTool);
  EXPECT_DOUBLE_EQ(s.turns[2].delay_s, 0);
  EXPECT_EQ(s.turns[2].delay_cause, DelayCause::kUnknown);
}

TEST(SessionImport, WekaSubagentsAreSessionsOfTheirOwnLinkedToTheirParentAndItsClock) {
  const ImportedSessions w = Import(TraceFormat::kWeka, "weka_trace_0277_subset.json");
  ASSERT_EQ(w.sessions.size(), 3u);
  const TrajectorySession& parent = w.sessions[0];
  EXPECT_EQ(parent.name, "trace_0277");
  ASSERT_EQ(parent.turns.size(), 2u);
  // The parent waits 209 s after its first answer while its sub-agents run beside it.
  EXPECT_DOUBLE_EQ(parent.turns[0].delay_s, 209);
  EXPECT_EQ(parent.turns[0].delay_cause, DelayCause::kTool);
  EXPECT_EQ(parent.turns[1].input_tokens, 32182 - 305 * 64);
  const TrajectorySession& a1 = w.sessions[1];
  const TrajectorySession& a4 = w.sessions[2];
  EXPECT_EQ(a1.name, "trace_0277/agent_001");
  EXPECT_EQ(a1.parent, "trace_0277");
  EXPECT_DOUBLE_EQ(a1.start_offset_s.value_or(-1), 79.224);
  EXPECT_EQ(a1.agent_type, "Explore");
  EXPECT_EQ(a1.turns.size(), 4u);
  EXPECT_DOUBLE_EQ(a1.turns[0].offset_s.value_or(-1), 0);  // its own clock
  EXPECT_DOUBLE_EQ(a1.turns[1].offset_s.value_or(-1), 6);
  EXPECT_EQ(a4.name, "trace_0277/agent_004");
  EXPECT_DOUBLE_EQ(a4.start_offset_s.value_or(-1), 723.533);
  EXPECT_EQ(a4.agent_type, "Plan");
  EXPECT_EQ(a4.turns.size(), 11u);
  // Sub-agents start their own chains in the file's id space: the two share their lead.
  EXPECT_EQ(a1.turns[0].block_ids.front(), 1448);
  EXPECT_EQ(a4.turns[0].block_ids.front(), 1448);
  EXPECT_NE(parent.turns[0].block_ids.front(), 1448);
}

TEST(SessionImport, TraceLabSendsAtTheLatestInputAndWaitsOnTheToolOrTheUser) {
  const ImportedSessions t = Import(TraceFormat::kTraceLab, "tracelab_round_trace.jsonl");
  ASSERT_EQ(t.sessions.size(), 2u);  // the example holds a Claude and a Codex session
  const TrajectorySession& claude = t.sessions[0];
  EXPECT_EQ(claude.name, "claude:92ee5b8a-429c-e80b-5db6-5381512f4697");
  ASSERT_EQ(claude.turns.size(), 10u);
  EXPECT_EQ(t.sessions[1].turns.size(), 9u);
  const TrajectoryTurn& r0 = claude.turns[0];
  EXPECT_EQ(r0.prompt_tokens, 32272);
  EXPECT_EQ(r0.cached_tokens, 27217);
  EXPECT_EQ(r0.output_tokens, 931);
  EXPECT_TRUE(r0.block_ids.empty());
  EXPECT_EQ(claude.turns[1].input_tokens, 6360);  // newly_append_tokens
  // Round 0's last tool call at 05:40:31.647; round 1 sent at its last tool result, 05:40:50.938.
  EXPECT_NEAR(r0.delay_s, 19.291, 1e-9);
  EXPECT_EQ(r0.delay_cause, DelayCause::kTool);
  EXPECT_NEAR(claude.turns[1].offset_s.value_or(-1), 30.787, 1e-9);
  // Round 4 answers at 05:42:23.420; the user writes again at 05:42:43.333.
  EXPECT_NEAR(claude.turns[4].delay_s, 19.913, 1e-9);
  EXPECT_EQ(claude.turns[4].delay_cause, DelayCause::kUser);
  EXPECT_NEAR(claude.turns[5].offset_s.value_or(-1), 143.182, 1e-9);
  EXPECT_NEAR(t.sessions[1].turns[0].delay_s, 1.162, 1e-9);
}

TEST(SessionImport, MalformedCopiesNameTheFileThePlaceAndTheField) {
  Result<ImportedSessions> w =
      ImportSessionTrace(TraceFormat::kWeka, Read("weka_trace_0026_bad.json"), "w.json");
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().message(),
            "w.json: requests[2].hash_ids: 313 ids for 30068 tokens; full blocks of 64 tokens "
            "need 469");
  Result<ImportedSessions> t =
      ImportSessionTrace(TraceFormat::kTraceLab, Read("tracelab_round_trace_bad.jsonl"), "t.jsonl");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(),
            "t.jsonl:7: timing_events[0].timestamp: expected ISO-8601 UTC "
            "(2026-06-01T05:40:20.151Z), got '2026-06-01 05:43:02.935'");
}

TEST(SessionImport, BadFieldsAreNamedWithTheirJsonPathOrLine) {
  const std::string head = R"({"id":"x","block_size":64,"requests":[)";
  const std::string req = R"({"t":0,"type":"n","in":64,"out":1,"hash_ids":[7]})";
  EXPECT_EQ(ImportError(TraceFormat::kWeka, head + req + R"(,{"t":1,"type":"subagent",)" +
                                                R"("agent_id":"a","requests":[{"t":0,"type":"n",)" +
                                                R"("in":5,"out":-1,"hash_ids":[]}]}]})"),
            "t.json: requests[1].requests[0].out: expected an integer > 0");
  EXPECT_EQ(ImportError(TraceFormat::kWeka, head + R"({"t":0,"type":"x"}]})"),
            "t.json: requests[0].type: expected \"n\", \"s\" or \"subagent\"");
  EXPECT_EQ(ImportError(TraceFormat::kWeka, R"({"id":"x","requests":[]})"),
            "t.json: block_size: expected an integer > 0");
  EXPECT_EQ(ImportError(TraceFormat::kWeka, head + req + R"(,{"t":-2,"type":"n"}]})"),
            "t.json: requests[1].in: expected an integer > 0");
  EXPECT_NE(ImportError(TraceFormat::kWeka, head).find("t.json: not JSON at byte"),
            std::string::npos);
  const std::string round =
      R"({"session_id":"s","round_index":0,"input_tokens_total":10,"prefix_tokens":4,)"
      R"("newly_append_tokens":6,"output_tokens":3,"timing_events":[{"event_type":)"
      R"("user_message","timestamp":"2026-03-21T10:05:59.328Z"}]})";
  EXPECT_EQ(ImportError(TraceFormat::kTraceLab, round + "\n" + round + "\n"),
            "t.json:2: round_index: 0 after 0 in session s (a session's rounds come in order)");
  std::string sum = round;
  sum.replace(sum.find("\"prefix_tokens\":4"), 17, "\"prefix_tokens\":5");
  EXPECT_EQ(ImportError(TraceFormat::kTraceLab, sum),
            "t.json:1: newly_append_tokens: prefix_tokens + newly_append_tokens = 5 + 6, not "
            "input_tokens_total 10");
}

TEST(SessionImport, FilesWithLocalIdsNeverShareBlocksWhenJoined) {
  const ImportedSessions a = Import(TraceFormat::kWeka, "weka_trace_0026.json");
  const ImportedSessions b = Import(TraceFormat::kWeka, "weka_trace_0277_subset.json");
  const SessionSummary alone_a = SummarizeSessions(a.sessions);
  const SessionSummary alone_b = SummarizeSessions(b.sessions);
  Result<std::vector<TrajectorySession>> joined = JoinSessionFiles({a, b});
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  const SessionSummary both = SummarizeSessions(*joined);
  EXPECT_EQ(both.block_references, alone_a.block_references + alone_b.block_references);
  EXPECT_EQ(both.blocks_seen_before, alone_a.blocks_seen_before + alone_b.blocks_seen_before);
  EXPECT_EQ((*joined)[0].turns[0].block_ids.front(), 1);        // the first file keeps its ids
  EXPECT_EQ((*joined)[1].turns[0].block_ids.front(), 1 + 313);  // past 0026's largest, 313
  Result<std::vector<TrajectorySession>> twice = JoinSessionFiles({a, a});
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(),
            "weka_trace_0026.json: session trace_0026 was already read from an earlier file");
}

TEST(SessionSummary, CountsSessionsSubagentsTurnsDelaysAndBlockReuse) {
  const ImportedSessions w = Import(TraceFormat::kWeka, "weka_trace_0277_subset.json");
  const SessionSummary s = SummarizeSessions(w.sessions);
  EXPECT_EQ(s.sessions, 1);
  EXPECT_EQ(s.subagents, 2);
  EXPECT_EQ(s.turns, 17);
  EXPECT_EQ(s.prompt_tokens.count, 17);
  EXPECT_EQ(s.prompt_tokens.max, 59971);
  EXPECT_EQ(s.user_delay_s.count + s.tool_delay_s.count, 14);  // all turns but each session's last
  EXPECT_EQ(s.tool_delay_s.max, 209);
  EXPECT_EQ(s.block_references, 9456);
  EXPECT_EQ(s.blocks_seen_before, 9456 - 2103);  // references less distinct blocks
  EXPECT_NE(SessionSummaryText(s).find("1 sessions, 2 sub-agents, 17 turns"), std::string::npos);
}

TEST(Trajectory, ImportedSessionsRoundTripThroughTheFile) {
  Result<std::vector<TrajectorySession>> all =
      JoinSessionFiles({Import(TraceFormat::kWeka, "weka_trace_0026.json"),
                        Import(TraceFormat::kWeka, "weka_trace_0277_subset.json"),
                        Import(TraceFormat::kTraceLab, "tracelab_round_trace.jsonl")});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  const std::string text = TrajectoryToJsonLines(*all);
  Result<std::vector<TrajectorySession>> back = ParseTrajectorySessions(text, "back.jsonl");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 6u);  // 0026, 0277 with two sub-agents, Claude and Codex
  for (size_t i = 0; i < back->size(); ++i) EXPECT_TRUE((*back)[i] == (*all)[i]) << i;
  EXPECT_EQ(TrajectoryToJsonLines(*back), text);
  // A session row still reads it: each turn's new tokens, output and delay.
  Result<std::vector<std::vector<TurnShape>>> shapes = ParseTrajectory(text, "back.jsonl");
  ASSERT_TRUE(shapes.ok()) << shapes.status().ToString();
  EXPECT_EQ((*shapes)[0][1].input_tokens, 17401 - 238 * 64);
  EXPECT_DOUBLE_EQ((*shapes)[1][0].think_s, 209);
}

TEST(Trajectory, FilesWithoutTheTraceFieldsReadAndWriteAsBefore) {
  const std::string path = std::string(CAPQ_SOURCE_DIR) + "/rows/traffic/agent_sessions.jsonl";
  Result<std::string> text = ReadWholeFile(path);
  ASSERT_TRUE(text.ok());
  Result<std::vector<TrajectorySession>> s = ParseTrajectorySessions(*text, path);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->size(), 3u);
  EXPECT_EQ((*s)[1].turns[0].input_tokens, 640);
  EXPECT_EQ((*s)[1].turns[0].delay_cause, DelayCause::kUnknown);
  EXPECT_FALSE((*s)[1].turns[0].prompt_tokens);
  EXPECT_EQ(TrajectoryToJsonLines(*s), *text);  // byte for byte
}

TEST(Trajectory, SubagentAndTraceFieldsAreChecked) {
  const auto error = [](const std::string& lines) {
    Result<std::vector<TrajectorySession>> s = ParseTrajectorySessions(lines, "t.jsonl");
    return s.ok() ? std::string("accepted") : s.status().message();
  };
  const std::string a1 =
      R"({"schema":"capq/trajectory/v1","session":"a","turn":1,"input_tokens":5,"output_tokens":5})";
  EXPECT_EQ(error(a1 + "\n" +
                  R"({"schema":"capq/trajectory/v1","session":"b","turn":1,"input_tokens":5,)"
                  R"("output_tokens":5,"parent":"c","start_offset_s":1})"),
            "t.jsonl:2: parent: no earlier session named c");
  EXPECT_EQ(error(a1 + "\n" +
                  R"({"schema":"capq/trajectory/v1","session":"a","turn":2,"input_tokens":5,)"
                  R"("output_tokens":5,"parent":"a","start_offset_s":1})"),
            "t.jsonl:2: parent: belongs on the session's first turn");
  EXPECT_EQ(error(R"({"schema":"capq/trajectory/v1","session":"a","turn":1,"input_tokens":5,)"
                  R"("output_tokens":5,"prompt_tokens":4})"),
            "t.jsonl:1: prompt_tokens: expected an integer >= input_tokens");
  EXPECT_EQ(error(R"({"schema":"capq/trajectory/v1","session":"a","turn":1,"input_tokens":5,)"
                  R"("output_tokens":5,"delay_cause":"lunch"})"),
            "t.jsonl:1: delay_cause: expected \"tool\" or \"user\"");
  EXPECT_EQ(error(R"({"schema":"capq/trajectory/v1","session":"a","turn":1,"input_tokens":5,)"
                  R"("output_tokens":5,"prompt_tokens":100,"prefix_blocks":{"block_tokens":64,)"
                  R"("ids":[1,2,3]}})"),
            "t.jsonl:1: prefix_blocks: 3 blocks of 64 tokens exceed prompt_tokens 100");
}

}  // namespace
}  // namespace capq

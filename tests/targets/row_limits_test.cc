// identity.server_expect checked against the limits each engine reports (targets/row_limits.h).
// tests/data/rows_bad_limits/ holds the rows it must refuse, each with its message and line in its
// first two lines, as tests/data/rows_bad/ does for the schema.
#include "capq/targets/row_limits.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capq/model/row_loader.h"
#include "capq/targets/engine_limits.h"

namespace capq {
namespace {

namespace fs = std::filesystem;

const std::string kSource = CAPQ_SOURCE_DIR;
const std::string kGood = kSource + "/tests/data/rows_good";
const std::string kBad = kSource + "/tests/data/rows_bad_limits";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Header(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
  }
  return "";
}

std::vector<std::string> BadFiles() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kBad)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RowLimits, EveryBadRowIsRefusedWithItsMessageAtItsLineAndOnlyByTheEngineCheck) {
  const std::vector<std::string> files = BadFiles();
  ASSERT_GE(files.size(), 7u) << "the corpus went missing";
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    const std::string text = ReadAll(path);
    const std::string expected = Header(text, "# expect: ");
    const std::string line = Header(text, "# line: ");
    ASSERT_FALSE(expected.empty());
    ASSERT_FALSE(line.empty());
    // The schema alone knows no engine's limits: the row reads.
    ASSERT_TRUE(LoadRow(path).ok()) << LoadRow(path).status().ToString();
    Result<Row> checked = LoadRow(path, CheckServerExpect);
    ASSERT_FALSE(checked.ok());
    EXPECT_EQ(checked.status().code(), Status::Code::kInvalidArgument);
    const std::string& message = checked.status().message();
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path + ":" + line + ":", 0), 0u) << message;
  }
}

TEST(RowLimits, CheckRowsGivesOneErrorPerFile) {
  RowSet set = CheckRows({kBad}, CheckServerExpect);
  EXPECT_TRUE(set.rows.empty());
  ASSERT_EQ(set.errors.size(), BadFiles().size());
  std::set<std::string> files;
  for (const RowError& e : set.errors) files.insert(e.file);
  EXPECT_EQ(files.size(), set.errors.size());
}

TEST(RowLimits, ALlamacppRowPinsLlamacppsOwnLimits) {
  Result<Row> r = LoadRow(kGood + "/llamafam/minimal_llamacpp.yaml", CheckServerExpect);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const std::map<std::string, std::string> expect = {
      {"total_slots", "8"}, {"n_ctx", "2048"}, {"build_info", "b9749-d32676d77"}};
  EXPECT_EQ(r->identity.server_expect, expect);
}

TEST(RowLimits, ValuesAreCanonicalisedByTheirType) {
  const std::string path = kGood + "/llamafam/minimal_llamacpp.yaml";
  std::string text = ReadAll(path);
  const std::string from = "n_ctx: 2048";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "n_ctx: +02048");
  Result<Row> r = LoadRowFromString(text, kGood + "/llamafam/x.yaml", CheckServerExpect);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->identity.server_expect.at("n_ctx"), "2048");
  text.replace(text.find("n_ctx: +02048"), 13, "n_ctx: \"2048\"");
  Result<Row> quoted = LoadRowFromString(text, kGood + "/llamafam/x.yaml", CheckServerExpect);
  ASSERT_FALSE(quoted.ok());
  EXPECT_NE(quoted.status().message().find("got the quoted string '2048'"), std::string::npos)
      << quoted.status().message();
}

TEST(RowLimits, EveryEngineNamesItsOwnRequiredLimits) {
  auto required = [](Engine e) {
    std::vector<std::string> keys;
    for (const LimitSpec& l : ReportableLimits(e)) {
      if (l.required) keys.push_back(l.key);
    }
    return keys;
  };
  EXPECT_EQ(required(Engine::kLlamacpp), (std::vector<std::string>{"total_slots", "n_ctx"}));
  EXPECT_EQ(
      required(Engine::kSglang),
      (std::vector<std::string>{"max_total_num_tokens", "max_running_requests", "context_length"}));
  EXPECT_EQ(required(Engine::kVllm),
            (std::vector<std::string>{"max_model_len", "num_gpu_blocks", "block_size"}));
  EXPECT_TRUE(ReportableLimits(Engine::kSim).empty());
}

TEST(RowLimits, ASimRowPinsTheLimitsOfItsDialect) {
  const std::string head =
      "schema: capq/row/v1\nid: sim_dialect_row\nidentity:\n  engine: sim\n"
      "  sim_profile: profiles/tiny.yaml\n  time_scale: 10\n";
  const std::string tail =
      "workload: {input_tokens: 16, output_tokens: 4, sampling: {temperature: 0, ignore_eos: "
      "true}, arrival: {kind: closed_loop}}\ncache: {prefix_cache: enabled, flush_before_trial: "
      "true}\nwarmup: {requests: 2}\nmeasured: {min_requests: 20, per_concurrency: 2}\n"
      "slo:\n  - {metric: ttft, percentile: 95, below_ms: 100}\ntrials: {count: 1}\n";
  const std::string path = kGood + "/simfam/row.yaml";
  Result<Row> llama = LoadRowFromString(
      head + "  sim_dialect: llamacpp\n  server_expect: {total_slots: 8}\n" + tail, path,
      CheckServerExpect);
  ASSERT_TRUE(llama.ok()) << llama.status().ToString();
  EXPECT_EQ(llama->identity.server_expect.at("total_slots"), "8");
  // The default dialect is SGLang's, whose names differ.
  Result<Row> sglang = LoadRowFromString(head + "  server_expect: {total_slots: 8}\n" + tail, path,
                                         CheckServerExpect);
  ASSERT_FALSE(sglang.ok());
  EXPECT_NE(sglang.status().message().find(
                "'total_slots' is not a limit sglang (the simulator's dialect) reports"),
            std::string::npos)
      << sglang.status().message();
  EXPECT_NE(sglang.status().message().find("row.yaml:7:"), std::string::npos)
      << sglang.status().message();
}

}  // namespace
}  // namespace capq

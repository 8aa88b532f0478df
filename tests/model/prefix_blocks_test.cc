// mix.prefix_blocks: prompts built from a trace's chained prefix blocks, so requests that share
// leading block ids share exactly those blocks' tokens, and each declares the reuse the trace
// gives it.
#include "capq/model/prefix_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "capq/hash.h"
#include "capq/model/mix.h"
#include "capq/model/plan.h"
#include "capq/model/row_loader.h"
#include "capq/model/traffic.h"
#include "row_text.h"

namespace capq {
namespace {

const std::string kRow = std::string(CAPQ_SOURCE_DIR) + "/rows/sim/sim_small_mooncake_replay.yaml";
const std::string kTraffic = std::string(CAPQ_SOURCE_DIR) + "/rows/traffic/mooncake_conv.jsonl";

using testing::ReadAll;
using testing::Replace;

TrafficSample Blocks(std::vector<int64_t> ids, int64_t input) {
  TrafficSample s;
  s.block_tokens = 32;
  s.block_ids = std::move(ids);
  s.input_tokens = input;
  return s;
}

TEST(LayOutBlocks, SharesLeadingRunsAndGivesARepeatItsOwnLastBlock) {
  const TrafficSample a = Blocks({0, 1, 2}, 70);  // 32 + 32 + 6
  const TrafficSample b = Blocks({0, 1, 3}, 80);  // shares 0, 1
  const TrafficSample c = Blocks({0, 4}, 40);     // shares 0
  const TrafficSample d = Blocks({0, 1, 2}, 70);  // repeats a word for word
  const TrafficSample e = Blocks({0, 1, 2}, 65);  // block 2 cut shorter: a block of its own
  const TrafficSample f = Blocks({5, 1, 2}, 70);  // block 1 after another block: no shared prefix
  const BlockLayout l = LayOutBlocks({&a, &b, &c, &d, &e, &f});
  EXPECT_EQ(l.shared, (std::vector<int>{0, 2, 1, 2, 2, 0}));
  EXPECT_EQ(l.repeats, 1);
  EXPECT_EQ(l.blocks[1][0], l.blocks[0][0]);
  EXPECT_EQ(l.blocks[1][1], l.blocks[0][1]);
  EXPECT_NE(l.blocks[1][2], l.blocks[0][2]);
  EXPECT_NE(l.blocks[3][2], l.blocks[0][2]);  // the repeat's own last block
  EXPECT_EQ(l.block_tokens[static_cast<size_t>(l.blocks[3][2])], 6);
  EXPECT_NE(l.blocks[4][2], l.blocks[0][2]);
  EXPECT_EQ(l.block_tokens[static_cast<size_t>(l.blocks[4][2])], 1);
  // 0 1 2 | 3 | 4 | 2' (own) | 2'' (short) | 5: f's blocks 1 and 2 are a's texts, but after 5,
  // so no prefix cache serves them (a chained trace never has them).
  EXPECT_EQ(l.block_tokens.size(), 8u);
}

// Chained ids as a trace's hashes are: a block's id stands for its whole prefix.
std::vector<TrafficSample> ChainedTrace(uint64_t seed, int n) {
  std::map<std::vector<int64_t>, int64_t> ids;
  std::vector<std::vector<int64_t>> prompts;  // as paths of choices
  std::vector<TrafficSample> out;
  for (int r = 0; r < n; ++r) {
    const uint64_t h = SplitMix64(seed + static_cast<uint64_t>(r));
    std::vector<int64_t> path;
    if (!prompts.empty() && h % 3 != 0) {  // extend or cut an earlier prompt
      path = prompts[(h >> 8) % prompts.size()];
      path.resize(std::min(path.size(), static_cast<size_t>((h >> 20) % 5 + 1)));
    }
    const size_t extra = (h >> 32) % 4;
    for (size_t j = 0; j < extra; ++j) path.push_back(static_cast<int64_t>((h >> (40 + j)) % 2));
    if (path.empty()) path.push_back(0);
    prompts.push_back(path);
    TrafficSample s;
    s.block_tokens = 32;
    for (size_t j = 1; j <= path.size(); ++j) {
      const std::vector<int64_t> key(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(j));
      s.block_ids.push_back(ids.emplace(key, static_cast<int64_t>(ids.size())).first->second);
    }
    s.input_tokens = 32 * static_cast<int64_t>(path.size());
    out.push_back(s);
  }
  return out;
}

TEST(LayOutBlocks, EachRequestSharesTheLongestLeadingRunOfAnyEarlierRequest) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<TrafficSample> trace = ChainedTrace(seed, 60);
    std::vector<const TrafficSample*> ptrs;
    for (const TrafficSample& s : trace) ptrs.push_back(&s);
    const BlockLayout l = LayOutBlocks(ptrs);
    for (size_t r = 0; r < trace.size(); ++r) {
      size_t best = 0;
      for (size_t q = 0; q < r; ++q) {
        size_t k = 0;
        while (k < trace[q].block_ids.size() && k < trace[r].block_ids.size() &&
               trace[q].block_ids[k] == trace[r].block_ids[k]) {
          ++k;
        }
        best = std::max(best, k);
      }
      const size_t n = trace[r].block_ids.size();
      EXPECT_EQ(static_cast<size_t>(l.shared[r]), best == n ? n - 1 : best)
          << "seed " << seed << " request " << r;
    }
  }
}

TEST(FitTraffic, BlocksScaleWholeAndACapCutsThem) {
  Mix m;
  m.traffic = "trace.jsonl";
  m.blocks.emplace();
  MixClass c;
  c.name = "all";
  TrafficSample s = Blocks({7, 8, 9}, 1100);  // 512 + 512 + 76
  s.block_tokens = 512;
  s.output_tokens = 160;
  s.line = 3;
  c.samples = {s};
  m.classes = {c};
  m.lengths.scale = 0.0625;
  ASSERT_TRUE(FitTraffic(&m).ok());
  EXPECT_EQ(m.blocks->block_tokens, 32);
  EXPECT_EQ(m.classes[0].samples[0].input_tokens, 32 + 32 + 5);  // 76 / 16 = 4.75 -> 5
  EXPECT_EQ(m.classes[0].samples[0].output_tokens, 10);
  m.classes[0].samples = {s};
  m.lengths.cap_input_tokens = 40;  // block 7 whole, block 8 cut to 8 tokens
  ASSERT_TRUE(FitTraffic(&m).ok());
  EXPECT_EQ(m.classes[0].samples[0].block_ids, (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(BlockLength(m.classes[0].samples[0], 1), 8);
  EXPECT_EQ(m.lengths.capped, 1);
  m.classes[0].samples = {s};
  m.lengths.scale = 0.1;  // 51.2 tokens a block
  Status bad = FitTraffic(&m);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("blocks of 512 tokens 51.200 tokens"), std::string::npos)
      << bad.message();
  s.block_ids = {7, 8};  // too few for 1,100 tokens
  m.classes[0].samples = {s};
  m.lengths.scale = 1;
  bad = FitTraffic(&m);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("trace.jsonl:3: 2 blocks of 512 tokens for an input of 1100"),
            std::string::npos)
      << bad.message();
}

// The trace read on its own: each replayed request's blocks, fitted as the row declares (a
// sixteenth: blocks of 32 tokens, the last one scaled and at least a token).
struct TraceRequest {
  std::vector<std::pair<int64_t, int64_t>> blocks;  // (id, fitted length)
  int64_t tokens = 0;
};
std::vector<TraceRequest> TraceRequests() {
  Result<std::vector<TrafficSample>> trace = LoadTraffic(kTraffic);
  EXPECT_TRUE(trace.ok()) << trace.status().ToString();
  std::vector<TraceRequest> out;
  for (const TrafficSample& s : *trace) {
    TraceRequest t;
    const auto n = static_cast<int64_t>(s.block_ids.size());
    for (int64_t j = 0; j < n; ++j) {
      const int64_t len =
          j + 1 < n ? 32
                    : std::max<int64_t>(1, std::llround((s.input_tokens - (n - 1) * 512) / 16.0));
      t.blocks.emplace_back(s.block_ids[static_cast<size_t>(j)], len);
      t.tokens += len;
    }
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> Words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

size_t CommonWords(const std::vector<std::string>& x, const std::vector<std::string>& y) {
  size_t k = 0;
  while (k < x.size() && k < y.size() && x[k] == y[k]) ++k;
  return k;
}

TEST(PrefixBlocks, TheMooncakeRowSharesExactlyTheTracesBlocksAndDeclaresItsReuse) {
  Result<Row> row = LoadRow(kRow);
  ASSERT_TRUE(row.ok()) << row.status().ToString();
  ASSERT_TRUE(row->reuse());
  const std::vector<TraceRequest> trace = TraceRequests();
  for (LoadLevel level : {1, 3}) {
    PlanInputs in;
    in.level = level;
    Result<TrialPlan> plan = MakeTrialPlan(*row, in);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    const std::vector<PlanRequest>& m = plan->measured;
    ASSERT_GT(m.size(), 150u);
    std::set<std::string> texts;
    int64_t declared = 0, tokens = 0, trace_reused = 0;
    std::set<std::pair<int64_t, int64_t>> sent;
    std::vector<bool> own_last;  // a repeat, sent with its last block its own
    std::vector<std::vector<std::string>> words;
    for (size_t i = 0; i < m.size(); ++i) {
      const TraceRequest& t = trace[i];  // request i replays the trace's line i + 1
      EXPECT_EQ(m[i].prompt.message_tokens, t.tokens) << m[i].id;
      EXPECT_TRUE(texts.insert(m[i].prompt.text).second) << m[i].id << " repeats a prompt";
      words.push_back(Words(m[i].prompt.text));
      size_t run = 0;
      while (run < t.blocks.size() && sent.count(t.blocks[run])) ++run;
      own_last.push_back(run == t.blocks.size());
      if (own_last.back()) --run;
      int64_t reuse = 0;
      for (size_t j = 0; j < run; ++j) reuse += t.blocks[j].second;
      ASSERT_TRUE(m[i].declared_cached_tokens) << m[i].id;
      EXPECT_EQ(*m[i].declared_cached_tokens, reuse) << m[i].id;
      sent.insert(t.blocks.begin(), t.blocks.end());
      declared += *m[i].declared_cached_tokens;
      trace_reused += reuse;
      tokens += m[i].prompt.message_tokens;
      // Against every earlier request: the words in common are the shared blocks' tokens.
      for (size_t q = 0; q < i; ++q) {
        size_t k = 0;
        const TraceRequest& u = trace[q];
        while (k < u.blocks.size() && k < t.blocks.size() && u.blocks[k] == t.blocks[k]) ++k;
        if ((k == t.blocks.size() && own_last[i]) || (k == u.blocks.size() && own_last[q])) --k;
        int64_t common = 0;
        for (size_t j = 0; j < k; ++j) common += t.blocks[j].second;
        ASSERT_EQ(static_cast<int64_t>(CommonWords(words[q], words[i])), common)
            << m[q].id << " and " << m[i].id;
      }
    }
    // The reuse ratio the trial declares is the trace's over the same requests (README
    // tolerance: within 1 point; here exact by construction, and never nothing).
    EXPECT_EQ(declared, trace_reused);
    EXPECT_GT(declared, tokens / 50);
    for (const PlanRequest& w : plan->warmup) EXPECT_FALSE(w.declared_cached_tokens) << w.id;
  }
}

TEST(PrefixBlocks, RowsThatCannotBuildTheirBlocksAreRefusedAtLoad) {
  const std::string base = ReadAll(kRow);
  Row row;
  RowError err;
  const std::string fraction = Replace(base, "scale: 0.0625", "scale: 0.1");
  ASSERT_FALSE(ParseRow(fraction, kRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.lengths");
  EXPECT_NE(err.message.find("whole tokens"), std::string::npos) << err.message;
  const std::string cold = Replace(base, "prefix_cache: enabled", "prefix_cache: disabled");
  ASSERT_FALSE(ParseRow(cold, kRow, &row, &err));
  EXPECT_EQ(err.key_path, "mix.prefix_blocks");
  const std::string azure =
      Replace(Replace(base, "../traffic/mooncake_conv.jsonl", "../traffic/azure_conv_2023.jsonl"),
              "max_input_tokens: 8192", "max_input_tokens: 1024");
  ASSERT_FALSE(ParseRow(azure, kRow, &row, &err));
  EXPECT_NE(err.message.find("azure_conv_2023.jsonl:1: no prefix_blocks"), std::string::npos)
      << err.message;
  // Written into a trial directory and read back, the row declares the same blocks.
  ASSERT_TRUE(ParseRow(base, kRow, &row, &err)) << err.message;
  Result<Row> again = LoadRowFromString(RowToYaml(row), kRow);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_TRUE(again->mix && again->mix->blocks);
  EXPECT_EQ(again->mix->blocks->block_tokens, 32);
  EXPECT_EQ(again->mix->blocks->tolerance.misses_pct, row.mix->blocks->tolerance.misses_pct);
}

}  // namespace
}  // namespace capq

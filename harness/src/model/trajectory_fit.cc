#include "capq/model/trajectory_fit.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "capq/model/prefix_blocks.h"
#include "capq/text.h"

namespace capq {
namespace {

Status TurnError(const Sessions& s, const TurnShape& t, const std::string& what) {
  return Status::InvalidArgument(s.trajectory + ":" + std::to_string(t.line) + ": " + what);
}

int64_t Scaled(int64_t v, double scale) {
  return std::max<int64_t>(1, std::llround(static_cast<double>(v) * scale));
}

// Every turn carries its prompt and blocks of one size covering it (the trace hashes whole blocks
// only, so up to a block's worth of tokens may follow them); returns that size.
Result<int64_t> TraceBlockTokens(const Sessions& s) {
  int64_t size = 0;
  for (const auto& path : s.paths) {
    for (const TurnShape& t : path) {
      if (t.block_ids.empty() || !t.prompt_tokens) {
        return TurnError(s, t,
                         "no prefix_blocks or prompt_tokens, but sessions.prefix_blocks builds "
                         "every turn's whole prompt from its blocks");
      }
      if (size == 0) size = t.block_tokens;
      const auto covered = static_cast<int64_t>(t.block_ids.size()) * t.block_tokens;
      if (t.block_tokens != size || covered > *t.prompt_tokens ||
          *t.prompt_tokens - covered >= size) {
        return TurnError(s, t,
                         std::to_string(t.block_ids.size()) + " blocks of " +
                             std::to_string(t.block_tokens) + " tokens for a prompt of " +
                             std::to_string(*t.prompt_tokens) + "; the trajectory's blocks of " +
                             std::to_string(size) + " tokens must cover it but for less than one");
      }
    }
  }
  return size;
}

// The row's block size: `merge` trace blocks, scaled, in whole tokens.
Status FitBlockTokens(Sessions* s) {
  Result<int64_t> trace = TraceBlockTokens(*s);
  if (!trace.ok()) return trace.status();
  Result<int64_t> block =
      ScaledBlockTokens(*trace * s->blocks->merge, s->token_scale, "sessions.scale.tokens");
  if (!block.ok()) return block.status();
  s->blocks->block_tokens = *block;
  return Status::Ok();
}

// Turn `t` as the row's blocks: every `merge` trace blocks one block, named by the last one's
// chained id (equal ids mean equal prompts up to there), then the rest of the prompt, scaled, as
// a block of its own (id -line: no other turn has it).
void MergeBlocks(const Sessions& s, TurnShape* t) {
  const auto k = static_cast<size_t>(s.blocks->merge);
  const size_t groups = t->block_ids.size() / k;
  std::vector<int64_t> ids;
  for (size_t g = 0; g < groups; ++g) ids.push_back(t->block_ids[(g + 1) * k - 1]);
  const int64_t rest = *t->prompt_tokens - static_cast<int64_t>(groups * k) * t->block_tokens;
  int64_t last = std::llround(static_cast<double>(rest) * s.token_scale);
  if (ids.empty()) last = std::max<int64_t>(1, last);
  if (last > 0) ids.push_back(-static_cast<int64_t>(t->line));
  t->input_tokens = static_cast<int64_t>(groups) * s.blocks->block_tokens + last;
  t->block_tokens = s.blocks->block_tokens;
  t->block_ids = std::move(ids);
}

}  // namespace

Status FitTrajectory(Sessions* s) {
  s->scaled_turns = 0;
  if (s->blocks) {
    if (Status st = FitBlockTokens(s); !st.ok()) return st;
  }
  for (auto& path : s->paths) {
    for (TurnShape& t : path) {
      const int64_t in = s->blocks ? *t.prompt_tokens : t.input_tokens, out = t.output_tokens;
      if (s->blocks) {
        MergeBlocks(*s, &t);
      } else {
        t.input_tokens = Scaled(in, s->token_scale);
      }
      t.output_tokens = Scaled(out, s->token_scale);
      t.think_s *= s->time_scale;
      s->scaled_turns += t.input_tokens != in || t.output_tokens != out ? 1 : 0;
      if (s->context_tokens && t.input_tokens + t.output_tokens > *s->context_tokens) {
        return TurnError(
            *s, t,
            std::to_string(in) + " + " + std::to_string(out) + " tokens, fitted to " +
                std::to_string(t.input_tokens) + " + " + std::to_string(t.output_tokens) +
                " (scale " + FormatFixed(s->token_scale, 6) + "), exceed the context of " +
                std::to_string(*s->context_tokens) + " tokens; lower sessions.scale.tokens");
      }
    }
  }
  for (PathStart& p : s->starts) p.after_s *= s->time_scale;
  return Status::Ok();
}

}  // namespace capq

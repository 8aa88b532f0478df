// A session row's recorded trajectory fitted to its server (sessions.scale and
// sessions.prefix_blocks, row.h Sessions). Pure; errors name the trajectory file's line and the
// numbers at fault.
#pragma once

#include "capq/model/row.h"
#include "capq/status.h"

namespace capq {

// Scales every turn's lengths by s->token_scale (at least a token each) and every delay and
// sub-agent start by s->time_scale, counting the turns whose lengths changed. With prefix blocks,
// every turn must carry its whole prompt and its blocks, all of one size that covers the prompt
// but for less than a block; `merge` of them make one block of the row, whose fitted size must be
// whole tokens (Blocks::block_tokens is set), and each turn becomes its whole prompt: its groups of
// blocks, each named by its last block's chained id, then what no whole group covers as a last
// block of its own. A fitted turn above context_tokens is refused.
Status FitTrajectory(Sessions* s);

}  // namespace capq

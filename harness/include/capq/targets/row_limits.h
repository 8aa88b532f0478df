// A row's identity.server_expect checked against the limits its engine reports
// (engine_limits.h): the row reader keeps the values as written and where; this check, which knows
// the engines, refuses at load what an identity check could never compare.
//
//  - a key the engine does not report is refused: it would fail every trial;
//  - a real engine's row pins every limit that decides how much work the server admits (the
//    `required` ones); a simulator row need not, its profile digest pins them already;
//  - each value has its limit's type (a count, a flag, text) and is canonicalised ("8", "true").
//
// Every refusal names file:line:column and the key path, as the row reader's own do.
#pragma once

#include <optional>

#include "capq/model/row.h"
#include "capq/model/row_loader.h"

namespace capq {

// nullopt when `row`'s server_expect holds; its values are then canonical. A RowCheck
// (model/row_loader.h): pass it to LoadRow, LoadRows or CheckRows.
std::optional<RowError> CheckServerExpect(Row* row);

}  // namespace capq

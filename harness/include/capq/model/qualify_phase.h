// The phase of a qualification a trial belongs to: a value inside capq, its name only at the edges
// (plan.json, verdict.json, the capacity data, `capq trial --phase`, trial folders, messages).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace capq {

// kBaseline: the C=1 trial; kProbe: a trial the locator placed; kConfirm: one of the independent
// trials at the boundary and one step above it (and every capacity test).
enum class QualifyPhase { kBaseline, kProbe, kConfirm };

const char* PhaseName(QualifyPhase p);  // "baseline", "probe", "confirm"
// The phase named `name`; nullopt for any other text.
std::optional<QualifyPhase> ParsePhase(std::string_view name);

}  // namespace capq

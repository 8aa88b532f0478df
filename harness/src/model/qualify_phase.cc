#include "capq/model/qualify_phase.h"

namespace capq {

const char* PhaseName(QualifyPhase p) {
  switch (p) {
    case QualifyPhase::kBaseline:
      return "baseline";
    case QualifyPhase::kProbe:
      return "probe";
    case QualifyPhase::kConfirm:
      return "confirm";
  }
  return "confirm";
}

std::optional<QualifyPhase> ParsePhase(std::string_view name) {
  for (QualifyPhase p : {QualifyPhase::kBaseline, QualifyPhase::kProbe, QualifyPhase::kConfirm}) {
    if (name == PhaseName(p)) return p;
  }
  return std::nullopt;
}

}  // namespace capq

// The enums that carry a qualification's facts inside capq and their names at its edges: every
// value's name reads back as that value, and any other text is refused rather than defaulted.
#include <gtest/gtest.h>

#include "capq/model/qualify_phase.h"
#include "capq/model/row.h"

namespace capq {
namespace {

TEST(EnumNamesTest, EveryPhaseReadsBackFromItsName) {
  for (QualifyPhase p : {QualifyPhase::kBaseline, QualifyPhase::kProbe, QualifyPhase::kConfirm}) {
    ASSERT_TRUE(ParsePhase(PhaseName(p)).has_value()) << PhaseName(p);
    EXPECT_EQ(*ParsePhase(PhaseName(p)), p);
  }
  EXPECT_STREQ(PhaseName(QualifyPhase::kBaseline), "baseline");
  EXPECT_STREQ(PhaseName(QualifyPhase::kProbe), "probe");
  EXPECT_STREQ(PhaseName(QualifyPhase::kConfirm), "confirm");
}

TEST(EnumNamesTest, AnyOtherPhaseNameIsRefused) {
  for (const char* bad : {"", "Confirm", "locate", "warmup", "confirm ", "tiers"}) {
    EXPECT_FALSE(ParsePhase(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(EnumNamesTest, EveryArrivalKindReadsBackFromItsName) {
  for (ArrivalKind k : {ArrivalKind::kClosedLoop, ArrivalKind::kConstant, ArrivalKind::kPoisson,
                        ArrivalKind::kGamma, ArrivalKind::kSessions, ArrivalKind::kReplay}) {
    ASSERT_TRUE(ParseArrivalKind(ArrivalKindName(k)).has_value()) << ArrivalKindName(k);
    EXPECT_EQ(*ParseArrivalKind(ArrivalKindName(k)), k);
  }
  for (const char* bad : {"", "open_loop", "Poisson", "trace"}) {
    EXPECT_FALSE(ParseArrivalKind(bad).has_value()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace capq

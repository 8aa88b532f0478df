#include "capq/measurement/text_digest.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "capq/measurement/decode.h"

namespace capq {
namespace {

// Bytes that are mostly characters of every length, with now and then a stray byte that breaks
// them: lone continuations, cut sequences, overlongs, surrogates.
std::string MixedBytes(std::mt19937* rng) {
  static const std::vector<std::string> kPieces = {
      "a",    " ",        "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xe4\xb8\xad", "\x80",
      "\xc3", "\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff"};
  std::uniform_int_distribution<size_t> n(0, 12), pick(0, kPieces.size() - 1), clean(0, 9);
  std::string s;
  for (size_t i = 0, len = n(*rng); i < len; ++i) {
    s += kPieces[clean(*rng) < 8 ? pick(*rng) % 6 : pick(*rng)];
  }
  return s;
}

// Cuts `s` at random places (empty pieces included), as deltas may cut a character.
std::vector<std::string> Pieces(const std::string& s, std::mt19937* rng) {
  std::vector<std::string> out;
  std::uniform_int_distribution<size_t> step(0, 4);
  for (size_t at = 0; at < s.size();) {
    const size_t take = std::min(step(*rng), s.size() - at);
    out.push_back(s.substr(at, take));
    at += take;
  }
  out.push_back("");
  return out;
}

TEST(Utf8Check, AgreesWithTheWholeTextHoweverItIsCut) {
  std::mt19937 rng(16);
  int valid = 0;
  for (int round = 0; round < 20000; ++round) {
    const std::string s = MixedBytes(&rng);
    Utf8Check check;
    for (const std::string& p : Pieces(s, &rng)) check.Append(p);
    ASSERT_EQ(check.valid(), IsValidUtf8(s)) << "round " << round;
    valid += check.valid() ? 1 : 0;
  }
  EXPECT_GT(valid, 2000) << "both kinds of text are tried";
  EXPECT_LT(valid, 18000);
}

TEST(Utf8Check, ACharacterCutAcrossPiecesIsHeldUntilItCompletes) {
  Utf8Check euro;
  euro.Append("price \xe2");
  EXPECT_FALSE(euro.valid()) << "cut short so far";
  euro.Append("\x82");
  euro.Append("\xac!");
  EXPECT_TRUE(euro.valid());
  Utf8Check broken;
  broken.Append("\xe2\x82");
  broken.Append("A");
  EXPECT_FALSE(broken.valid());
  broken.Append("\xac");
  EXPECT_FALSE(broken.valid()) << "once invalid, always";
}

TEST(TextDigest, Sha256AndSizeOfThePiecesAreThoseOfTheWholeText) {
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    const std::string s = MixedBytes(&rng) + MixedBytes(&rng);
    TextDigest d;
    for (const std::string& p : Pieces(s, &rng)) d.Append(p);
    EXPECT_EQ(d.bytes(), static_cast<int64_t>(s.size()));
    EXPECT_EQ(d.valid_utf8(), IsValidUtf8(s));
    ASSERT_EQ(d.FinishSha256Hex(), Sha256Hex(s)) << "round " << round;
  }
  TextDigest none;
  EXPECT_EQ(none.FinishSha256Hex(), Sha256Hex(""));
}

}  // namespace
}  // namespace capq

#include "capq/targets/row_limits.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

#include "capq/targets/engine_limits.h"

namespace capq {
namespace {

using PinnedKey = ServerExpectSource::Key;

std::string Shown(const std::string& s) { return "'" + s + "'"; }

class LimitsCheck {
 public:
  explicit LimitsCheck(Row* row)
      : row_(row),
        engine_(LimitsEngine(row->identity)),
        limits_(ReportableLimits(engine_)),
        who_(std::string(EngineName(engine_)) +
             (row->identity.engine == Engine::kSim ? " (the simulator's dialect)" : "")) {}

  std::optional<RowError> Run() {
    for (const std::string& key : KeysInFileOrder()) {
      if (!Spec(key)) {
        return Refuse(Source(key).key, key,
                      Shown(key) + " is not a limit " + who_ +
                          " reports, so it could never be compared; the keys " + who_ +
                          " can pin are: " + LimitKeysText(engine_));
      }
    }
    if (std::optional<RowError> missing = MissingRequired()) return missing;
    for (const std::string& key : KeysInFileOrder()) {
      if (std::optional<RowError> bad = Canonicalise(key)) return bad;
    }
    return std::nullopt;
  }

 private:
  const LimitSpec* Spec(const std::string& key) const {
    auto it = std::find_if(limits_.begin(), limits_.end(),
                           [&](const LimitSpec& l) { return key == l.key; });
    return it == limits_.end() ? nullptr : &*it;
  }
  PinnedKey Source(const std::string& key) const {
    const auto& keys = row_->identity.server_expect_source.keys;
    auto it = keys.find(key);
    return it == keys.end() ? PinnedKey{} : it->second;
  }
  std::vector<std::string> KeysInFileOrder() const {
    std::vector<std::string> keys;
    for (const auto& [key, value] : row_->identity.server_expect) keys.push_back(key);
    std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
      return Source(a).key.line < Source(b).key.line;
    });
    return keys;
  }
  RowError Refuse(SourceMark at, const std::string& key, const std::string& message) const {
    return RowError{row_->source_path, at.line, at.column, "identity.server_expect." + key,
                    message};
  }

  // The limits that decide how much work a real server admits: without them the row is not
  // portable. A simulator's limits are already pinned by its profile digest.
  std::optional<RowError> MissingRequired() const {
    if (row_->identity.engine == Engine::kSim) return std::nullopt;
    for (const LimitSpec& l : limits_) {
      if (l.required && !row_->identity.server_expect.count(l.key)) {
        return Refuse(row_->identity.server_expect_source.at, l.key,
                      "missing required key '" + std::string(l.key) + "' (a limit " + who_ +
                          " reports: " + l.source + ") in identity.server_expect");
      }
    }
    return std::nullopt;
  }

  std::optional<RowError> Canonicalise(const std::string& key) {
    const LimitSpec& spec = *Spec(key);
    const PinnedKey at = Source(key);
    std::string& text = row_->identity.server_expect[key];
    switch (spec.type) {
      case LimitType::kText:
        if (text.empty()) return Refuse(at.value, key, "expected a non-empty string, got ''");
        return std::nullopt;
      case LimitType::kFlag:
        if (at.quoted || (text != "true" && text != "false")) {
          return Refuse(at.value, key, "expected true or false, got " + Written(at, text));
        }
        return std::nullopt;
      case LimitType::kCount:
      case LimitType::kCountOrZero:
        return CanonicalCount(key, spec.type == LimitType::kCountOrZero ? 0 : 1, at, &text);
    }
    return std::nullopt;
  }

  static std::string Written(const PinnedKey& at, const std::string& text) {
    return (at.quoted ? "the quoted string " : "") + Shown(text);
  }

  std::optional<RowError> CanonicalCount(const std::string& key, int64_t min, const PinnedKey& at,
                                         std::string* text) const {
    constexpr int64_t kMax = int64_t{1} << 40;
    const std::string range =
        "expected an integer in [" + std::to_string(min) + ", " + std::to_string(kMax) + "], got ";
    int64_t v = 0;
    const char* begin = text->data() + (!text->empty() && (*text)[0] == '+' ? 1 : 0);
    const char* end = text->data() + text->size();
    auto [ptr, ec] = std::from_chars(begin, end, v);
    if (at.quoted || text->empty() || ec != std::errc() || ptr != end || v < min || v > kMax) {
      return Refuse(at.value, key, range + Written(at, *text));
    }
    *text = std::to_string(v);
    return std::nullopt;
  }

  Row* row_;
  Engine engine_;
  const std::vector<LimitSpec>& limits_;
  std::string who_;
};

}  // namespace

std::optional<RowError> CheckServerExpect(Row* row) { return LimitsCheck(row).Run(); }

}  // namespace capq

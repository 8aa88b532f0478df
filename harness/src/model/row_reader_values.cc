// Mappings, keys and typed scalars of a row, each refused with its position and key path, and the
// text of values in those messages.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>
#include <system_error>

#include "row_reader_internal.h"

namespace capq::row_reader {

// A scalar as it may appear in a message: bounded and printable.
std::string Shown(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 60) {
      out += "...";
      break;
    }
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return "'" + out + "'";
}

std::string Describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Sequence:
      return n.size() == 0 ? "an empty list" : "a sequence";
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Scalar:
      return Shown(n.Scalar());
    default:
      return "nothing";
  }
}

bool IsQuoted(const YAML::Node& n) { return n.Tag() == "!"; }

bool IsHex(const std::string& s, size_t len) {
  return s.size() == len && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool IsValidId(const std::string& s) {
  if (s.empty() || s.size() > 128 || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// The gates as a set: two tiers with the same gates in another order are the same contract.
std::set<std::tuple<int, double, double>> GateSet(const std::vector<SloGate>& slo) {
  std::set<std::tuple<int, double, double>> out;
  for (const SloGate& g : slo) out.insert({static_cast<int>(g.metric), g.percentile, g.below_ms});
  return out;
}

bool IsDate(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  int month = (s[5] - '0') * 10 + (s[6] - '0');
  int day = (s[8] - '0') * 10 + (s[9] - '0');
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

std::string JoinKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

std::string Num(double v) {
  char buf[64];
  auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, ptr) : std::to_string(v);
}

bool Positive(double v) { return v > 0; }
bool NonNegative(double v) { return v >= 0; }
bool OpenPercent(double v) { return v > 0 && v < 100; }
bool UnitInterval(double v) { return v > 0 && v <= 1; }
bool OpenUnitInterval(double v) { return v > 0 && v < 1; }

bool RowParser::OpenMap(const YAML::Node& node, const YAML::Mark& at, const std::string& path,
                        const std::string& what, MapView* out) {
  if (!node.IsMap()) {
    return Fail(at, path, "expected " + what + " (a mapping), got " + Describe(node));
  }
  out->path = path;
  out->mark = node.Mark().is_null() ? at : node.Mark();
  out->missing_at = out->mark;
  out->entries.clear();
  std::set<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    // Copies, not references: yaml-cpp's iterator hands out a temporary pair.
    const YAML::Node k = it->first;
    const YAML::Node v = it->second;
    if (!k.IsScalar()) {
      return Fail(k.Mark().is_null() ? out->mark : k.Mark(), path,
                  "expected plain string keys, got " + Describe(k) + " as a key");
    }
    if (!seen.insert(k.Scalar()).second) {
      return Fail(k.Mark(), Join(path, k.Scalar()),
                  "duplicate key " + Shown(k.Scalar()) + ": each key appears once");
    }
    out->entries.push_back(Entry{k.Scalar(), k.Mark(), v});
  }
  return true;
}

bool RowParser::CheckKeys(const MapView& m, const std::vector<std::string>& allowed) {
  for (const auto& e : m.entries) {
    if (std::find(allowed.begin(), allowed.end(), e.key) == allowed.end()) {
      return Fail(e.key_mark, Join(m.path, e.key),
                  "unknown key " + Shown(e.key) + "; expected one of: " + JoinKeys(allowed));
    }
  }
  return true;
}

bool RowParser::Required(const MapView& m, const std::string& key, const std::string& what,
                         const Entry** out) {
  *out = m.Find(key);
  if (*out) return true;
  return Fail(m.missing_at, Join(m.path, key),
              "missing required key " + Shown(key) + " (" + what + ")" +
                  (m.path.empty() ? "" : " in " + m.path));
}

bool RowParser::GetString(const Entry& e, const std::string& path, std::string* out) {
  if (!e.value.IsScalar() || e.value.Scalar().empty()) {
    return Fail(ValueMark(e), path, "expected a non-empty string, got " + Describe(e.value));
  }
  *out = e.value.Scalar();
  return true;
}

bool RowParser::GetInt(const Entry& e, const std::string& path, int64_t min, int64_t max,
                       int64_t* out) {
  std::string range = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!e.value.IsScalar())
    return Fail(ValueMark(e), path, "expected " + range + ", got " + Describe(e.value));
  const std::string& s = e.value.Scalar();
  if (IsQuoted(e.value)) {
    return Fail(ValueMark(e), path, "expected " + range + ", got the quoted string " + Shown(s));
  }
  int64_t v = 0;
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return Fail(ValueMark(e), path, "expected " + range + ", got " + Shown(s));
  }
  if (v < min || v > max) return Fail(ValueMark(e), path, "expected " + range + ", got " + s);
  *out = v;
  return true;
}

bool RowParser::GetUint(const Entry& e, const std::string& path, uint64_t* out) {
  const std::string expected = "expected a non-negative integer seed, got ";
  if (!e.value.IsScalar()) return Fail(ValueMark(e), path, expected + Describe(e.value));
  const std::string& s = e.value.Scalar();
  if (IsQuoted(e.value))
    return Fail(ValueMark(e), path, expected + "the quoted string " + Shown(s));
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) {
    return Fail(ValueMark(e), path, expected + Shown(s));
  }
  *out = v;
  return true;
}

bool RowParser::GetNumber(const Entry& e, const std::string& path, const std::string& expected,
                          bool (*ok)(double), double* out) {
  if (!e.value.IsScalar()) {
    return Fail(ValueMark(e), path, "expected " + expected + ", got " + Describe(e.value));
  }
  const std::string& s = e.value.Scalar();
  if (IsQuoted(e.value)) {
    return Fail(ValueMark(e), path, "expected " + expected + ", got the quoted string " + Shown(s));
  }
  double v = 0;
  const char* begin = s.data() + (!s.empty() && s[0] == '+' ? 1 : 0);
  auto [ptr, ec] = std::from_chars(begin, s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v)) {
    return Fail(ValueMark(e), path, "expected " + expected + ", got " + Shown(s));
  }
  if (!ok(v)) return Fail(ValueMark(e), path, "expected " + expected + ", got " + s);
  *out = v;
  return true;
}

bool RowParser::GetBool(const Entry& e, const std::string& path, bool* out) {
  if (e.value.IsScalar() && !IsQuoted(e.value)) {
    if (e.value.Scalar() == "true") return *out = true, true;
    if (e.value.Scalar() == "false") return *out = false, true;
  }
  return Fail(ValueMark(e), path, "expected true or false, got " + Describe(e.value));
}

bool RowParser::GetEnum(const Entry& e, const std::string& path,
                        const std::vector<std::string>& options, std::string* out) {
  if (e.value.IsScalar() &&
      std::find(options.begin(), options.end(), e.value.Scalar()) != options.end()) {
    *out = e.value.Scalar();
    return true;
  }
  return Fail(ValueMark(e), path,
              "expected one of: " + JoinKeys(options) + "; got " + Describe(e.value));
}

}  // namespace capq::row_reader

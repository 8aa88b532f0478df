#include "capq/cli/args.h"

#include <cstdio>
#include <cstdlib>

namespace capq::cli {

Status ArgParser::Parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positionals_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags_.count(name)) {
      if (inline_value) return Status::InvalidArgument("flag --" + name + " takes no value");
      bools_.insert(name);
    } else if (value_flags_.count(name)) {
      if (inline_value) {
        values_[name] = *inline_value;
      } else if (i + 1 < args.size()) {
        values_[name] = args[++i];
      } else {
        return Status::InvalidArgument("flag --" + name + " needs a value");
      }
    } else {
      return Status::InvalidArgument("unknown flag --" + name);
    }
  }
  return Status::Ok();
}

std::optional<std::string> ArgParser::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ArgParser::GetOr(const std::string& flag, const std::string& fallback) const {
  auto v = Get(flag);
  return v ? *v : fallback;
}

Result<long long> ArgParser::GetInt(const std::string& flag, long long fallback) const {
  auto v = Get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0') {
    return Status::InvalidArgument("flag --" + flag + ": expected an integer, got '" + *v + "'");
  }
  return n;
}

Result<double> ArgParser::GetDouble(const std::string& flag, double fallback) const {
  auto v = Get(flag);
  if (!v) return fallback;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0') {
    return Status::InvalidArgument("flag --" + flag + ": expected a number, got '" + *v + "'");
  }
  return d;
}

std::optional<int> ParseCommand(ArgParser& p, const std::vector<std::string>& args,
                                const char* name, const char* usage, int usage_error) {
  if (Status st = p.Parse(args); !st.ok()) {
    std::fprintf(stderr, "capq %s: %s\n%s", name, st.message().c_str(), usage);
    return usage_error;
  }
  if (p.Has("help")) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (p.positionals().empty()) {
    std::fputs(usage, stderr);
    return usage_error;
  }
  return std::nullopt;
}

}  // namespace capq::cli

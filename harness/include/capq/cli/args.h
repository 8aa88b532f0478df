// A small flag parser shared by the subcommands: "--name value", "--name=value", "--flag",
// positionals.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "capq/status.h"

namespace capq::cli {

class ArgParser {
 public:
  // `value_flags` take a value; `bool_flags` do not. Anything else starting with "--" is an error.
  ArgParser(std::set<std::string> value_flags, std::set<std::string> bool_flags)
      : value_flags_(std::move(value_flags)), bool_flags_(std::move(bool_flags)) {}

  Status Parse(const std::vector<std::string>& args);

  bool Has(const std::string& flag) const { return values_.count(flag) || bools_.count(flag); }
  std::optional<std::string> Get(const std::string& flag) const;
  std::string GetOr(const std::string& flag, const std::string& fallback) const;
  // Parses an integer or number flag; an error names the flag and the bad value.
  Result<long long> GetInt(const std::string& flag, long long fallback) const;
  Result<double> GetDouble(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::set<std::string> value_flags_;
  std::set<std::string> bool_flags_;
  std::map<std::string, std::string> values_;
  std::set<std::string> bools_;
  std::vector<std::string> positionals_;
};

// The start shared by the commands of the form "capq NAME [flags] ARG...": parses `args` into `p`.
// A bad flag prints its message and `usage` to stderr, and so does a missing ARG (just `usage`);
// both return `usage_error`. --help prints `usage` to stdout and returns 0. std::nullopt: go on.
std::optional<int> ParseCommand(ArgParser& p, const std::vector<std::string>& args,
                                const char* name, const char* usage, int usage_error);

}  // namespace capq::cli

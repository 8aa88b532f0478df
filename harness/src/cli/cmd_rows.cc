// capq rows check [PATHS] | capq rows show ID [--rows DIR] | capq rows new ... (cmd_rows_new.cc)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/model/row_loader.h"
#include "capq/targets/row_limits.h"

namespace capq::cli {
namespace {

constexpr const char* kRowsUsage =
    "usage: capq rows check [PATHS...]      validate rows (default: rows/), list them, exit 1 on "
    "any "
    "error\n"
    "       capq rows show ID [--rows DIR]  print one resolved row as YAML (default DIR: rows/)\n"
    "       capq rows new --url URL --engine E --isl N --osl N --slo TEXT [--out FILE] ...\n"
    "                                      write a row from the running server (--help)\n";

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string SloText(const Row& row) {
  std::string out;
  for (const auto& g : row.slo) {
    if (!out.empty()) out += ", ";
    out += "p" + FormatNumber(g.percentile) + " " + SloMetricName(g.metric) + " < " +
           FormatNumber(g.below_ms) + " ms";
  }
  const size_t tiers = row.slo_tiers.size();
  if (tiers > 0) out += " +" + std::to_string(tiers) + (tiers == 1 ? " tier" : " tiers");
  return out;
}

std::string IdentityText(const Row& row) {
  if (row.identity.engine == Engine::kSim) {
    // The loader resolves profiles to absolute paths; relative to here they read like the row.
    std::error_code ec;
    std::filesystem::path shown = std::filesystem::proximate(row.identity.sim_profile, ec);
    return std::string("sim ") + (ec ? row.identity.sim_profile : shown.string()) +
           " (time_scale " + FormatNumber(row.identity.time_scale) + ")";
  }
  return std::string(EngineName(row.identity.engine)) + " " + row.identity.image;
}

void PrintTable(const std::vector<Row>& rows) {
  std::vector<std::vector<std::string>> cells = {
      {"ID", "FAMILY", "ISL/OSL", "SLO", "CMAX", "IDENTITY"}};
  for (const auto& r : rows) {
    cells.push_back(
        {r.id, r.family,
         std::to_string(r.workload.input_tokens) + "/" + std::to_string(r.workload.output_tokens),
         SloText(r), r.expect.cmax ? std::to_string(*r.expect.cmax) : "-", IdentityText(r)});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& line : cells) {
    for (size_t i = 0; i < line.size(); ++i) width[i] = std::max(width[i], line[i].size());
  }
  for (const auto& line : cells) {
    std::string out;
    for (size_t i = 0; i < line.size(); ++i) {
      out += line[i];
      if (i + 1 < line.size()) out += std::string(width[i] - line[i].size() + 2, ' ');
    }
    std::printf("%s\n", out.c_str());
  }
}

int Check(const std::vector<std::string>& paths) {
  RowSet set =
      CheckRows(paths.empty() ? std::vector<std::string>{"rows/"} : paths, CheckServerExpect);
  if (!set.rows.empty()) PrintTable(set.rows);
  std::fflush(stdout);
  for (const auto& e : set.errors) std::fprintf(stderr, "error: %s\n", e.ToString().c_str());
  std::printf("%zu row%s OK, %zu error%s\n", set.rows.size(), set.rows.size() == 1 ? "" : "s",
              set.errors.size(), set.errors.size() == 1 ? "" : "s");
  return set.errors.empty() ? 0 : 1;
}

int Show(const std::string& id, const std::string& dir) {
  RowSet set = CheckRows({dir}, CheckServerExpect);
  for (const auto& row : set.rows) {
    if (row.id != id) continue;
    // Errors elsewhere do not hide a good row, but they are not hidden either.
    for (const auto& e : set.errors) std::fprintf(stderr, "warning: %s\n", e.ToString().c_str());
    std::printf("# %s (family %s)\n%s", row.source_path.c_str(), row.family.c_str(),
                RowToYaml(row).c_str());
    return 0;
  }
  for (const auto& e : set.errors) std::fprintf(stderr, "error: %s\n", e.ToString().c_str());
  std::fprintf(stderr, "capq rows show: no row with id '%s' under %s\n", id.c_str(), dir.c_str());
  return 1;
}

}  // namespace

int RunRows(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kRowsUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string sub = args[0];
  if (sub == "new") return RunRowsNew(Args(args.begin() + 1, args.end()));
  ArgParser parser(sub == "show" ? std::set<std::string>{"rows"} : std::set<std::string>{}, {});
  if (Status s = parser.Parse(Args(args.begin() + 1, args.end())); !s.ok()) {
    std::fprintf(stderr, "capq rows %s: %s\n%s", sub.c_str(), s.message().c_str(), kRowsUsage);
    return 2;
  }
  if (sub == "check") return Check(parser.positionals());
  if (sub == "show") {
    if (parser.positionals().size() != 1) {
      std::fprintf(stderr, "capq rows show: expected exactly one row id\n%s", kRowsUsage);
      return 2;
    }
    return Show(parser.positionals()[0], parser.GetOr("rows", "rows/"));
  }
  std::fprintf(stderr, "capq rows: unknown subcommand '%s'\n%s", sub.c_str(), kRowsUsage);
  return 2;
}

}  // namespace capq::cli

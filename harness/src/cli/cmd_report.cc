// capq report: rebuild report.html from capacity data alone.
#include <cstdio>
#include <filesystem>

#include "capq/cli/args.h"
#include "capq/cli/commands.h"
#include "capq/qualify/recommend.h"
#include "capq/record/capacity_data.h"
#include "capq/report/report.h"

namespace capq::cli {

namespace fs = std::filesystem;

int RunReport(const Args& args) {
  ArgParser p({"out"}, {"help"});
  constexpr const char* kUsage =
      "usage: capq report DIR... [--out FILE]\n"
      "  Rebuilds DIR/report.html from DIR/capacity-data.json for each DIR. With --out, writes "
      "one\n"
      "  report over the rows of every DIR instead (the capacity surface needs several rows).\n";
  if (std::optional<int> rc = ParseCommand(p, args, "report", kUsage, 3)) return *rc;
  CapacityData merged;
  int rc = 0;
  for (const auto& dir : p.positionals()) {
    fs::path data_path =
        fs::is_directory(dir) ? fs::path(dir) / "capacity-data.json" : fs::path(dir);
    Result<CapacityData> d = ReadCapacityData(data_path.string());
    if (!d.ok()) {
      std::fprintf(stderr, "capq report: %s\n", d.status().ToString().c_str());
      rc = 3;
      continue;
    }
    RecommendWhereNotRecorded(&*d);
    if (p.Has("out")) {
      for (auto& r : d->rows) merged.rows.push_back(std::move(r));
      if (merged.generated_utc < d->generated_utc) merged.generated_utc = d->generated_utc;
      continue;
    }
    fs::path html = data_path.parent_path() / "report.html";
    if (Status st = WriteReport(html.string(), *d); !st.ok()) {
      std::fprintf(stderr, "capq report: %s\n", st.ToString().c_str());
      rc = 3;
      continue;
    }
    std::printf("%s (%zu rows)\n", html.string().c_str(), d->rows.size());
  }
  if (p.Has("out") && !merged.rows.empty()) {
    merged.command = "capq report";
    for (const auto& a : args) merged.command += " " + a;
    std::string out = *p.Get("out");
    if (Status st = WriteReport(out, merged); !st.ok()) {
      std::fprintf(stderr, "capq report: %s\n", st.ToString().c_str());
      return 3;
    }
    std::printf("%s (%zu rows)\n", out.c_str(), merged.rows.size());
  }
  return rc;
}

}  // namespace capq::cli

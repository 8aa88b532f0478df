// libFuzzer target for the row loader: any bytes either load as a row or are refused with a
// position and a message; nothing throws or crashes. A row that loads must survive RowToYaml ->
// load -> RowToYaml unchanged, so the resolved form `capq rows show` prints is always a valid row.
//
// Run (from a build configured with clang and -DCAPQ_FUZZ=ON):
//   capq_row_loader_fuzz -max_total_time=60 CORPUS_DIR rows/b70 tests/data/rows_good/realfam \
//       tests/data/rows_good/simfam tests/data/rows_bad
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "capq/model/row_loader.h"

namespace {

// Rows parse as if they lived in <tmp>/fuzz_rows/fam/, next to a profiles/tiny.yaml, so that sim
// rows naming profiles/tiny.yaml can load and reach the rest of the checks.
std::string g_row_path;
std::string g_tmp_root;

void RemoveTmp() {
  std::error_code ec;
  std::filesystem::remove_all(g_tmp_root, ec);
}

void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "row_loader_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("capq_row_fuzz_" + std::to_string(::getpid()));
  g_tmp_root = root.string();
  std::atexit(RemoveTmp);
  fs::path dir = root / "fam";
  fs::create_directories(dir / "profiles");
  std::ofstream(dir / "profiles" / "tiny.yaml") << "name: tiny\n";
  g_row_path = (dir / "row.yaml").string();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  capq::Row row;
  capq::RowError error;
  if (!capq::ParseRow(text, g_row_path, &row, &error)) {
    if (error.line < 1 || error.column < 1 || error.message.empty() || error.file != g_row_path) {
      Die("a refusal without a position or message", error.ToString());
    }
    return 0;
  }
  const std::string yaml = capq::RowToYaml(row);
  capq::Row again;
  if (!capq::ParseRow(yaml, g_row_path, &again, &error)) {
    Die("RowToYaml produced a row the loader refuses", error.ToString() + "\n" + yaml);
  }
  if (capq::RowToYaml(again) != yaml) {
    Die("RowToYaml is not stable across a reload", yaml + "\n---\n" + capq::RowToYaml(again));
  }
  return 0;
}

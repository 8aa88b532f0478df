// Finding and loading row files together: ids unique across files, profiles folders skipped, .yml
// files reported, missing paths and empty selections refused, one error per bad file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "capq/model/row_loader.h"
#include "row_test_files.h"
#include "row_text.h"

namespace capq {
namespace {

using testing::ReadAll;
using testing::Replace;
using testing::TempDir;
using testing::WriteFile;

const std::string kSource = CAPQ_SOURCE_DIR;
const std::string kGood = kSource + "/tests/data/rows_good";

TEST(LoadRows, DuplicateIdsAcrossFilesAreRefusedAtTheSecondFile) {
  TempDir dir;
  const std::string row = ReadAll(kGood + "/realfam/minimal_real.yaml");
  WriteFile(dir.path() / "a" / "first.yaml", row);
  WriteFile(dir.path() / "b" / "second.yaml", row);
  RowSet set = CheckRows({dir.path().string()});
  ASSERT_EQ(set.rows.size(), 1u);
  EXPECT_EQ(set.rows[0].source_path, (dir.path() / "a" / "first.yaml").string());
  ASSERT_EQ(set.errors.size(), 1u);
  const RowError& e = set.errors[0];
  EXPECT_EQ(e.file, (dir.path() / "b" / "second.yaml").string());
  EXPECT_EQ(e.key_path, "id");
  EXPECT_EQ(e.line, 3);  // "id: minimal_real" is the file's third line
  EXPECT_EQ(e.column, 5);
  EXPECT_NE(e.message.find("duplicate id 'minimal_real'"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find((dir.path() / "a" / "first.yaml").string() + ":3:5"), std::string::npos)
      << e.message;

  Result<std::vector<Row>> all = LoadRows({dir.path().string()});
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("duplicate id"), std::string::npos);
}

TEST(LoadRows, TheSameFileGivenTwiceIsADuplicateToo) {
  const std::string path = kGood + "/realfam/minimal_real.yaml";
  RowSet set = CheckRows({path, path});
  EXPECT_EQ(set.rows.size(), 1u);
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_NE(set.errors[0].message.find("duplicate id"), std::string::npos);
}

TEST(LoadRows, ProfilesFoldersAreSkippedAndYmlFilesAreNotSilentlyIgnored) {
  TempDir dir;
  WriteFile(dir.path() / "fam" / "good.yaml", ReadAll(kGood + "/realfam/minimal_real.yaml"));
  WriteFile(dir.path() / "fam" / "profiles" / "engine.yaml", "name: not a row\nb0_s: 0.1\n");
  WriteFile(dir.path() / "fam" / "notes.txt", "not yaml\n");
  Result<std::vector<Row>> rows = LoadRows({dir.path().string()});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->size(), 1u);

  WriteFile(dir.path() / "fam" / "typo.yml", "schema: capq/row/v1\n");
  RowSet set = CheckRows({dir.path().string()});
  EXPECT_EQ(set.rows.size(), 1u);
  ASSERT_EQ(set.errors.size(), 1u);
  EXPECT_NE(set.errors[0].file.find("typo.yml"), std::string::npos);
  EXPECT_NE(set.errors[0].message.find(".yaml"), std::string::npos);
}

TEST(LoadRows, MissingPathsAndEmptySelectionsAreErrors) {
  RowSet missing = CheckRows({kSource + "/tests/data/no_such_dir"});
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_NE(missing.errors[0].ToString().find("no such file or directory"), std::string::npos);

  TempDir dir;
  RowSet empty = CheckRows({dir.path().string()});
  EXPECT_TRUE(empty.rows.empty());
  ASSERT_EQ(empty.errors.size(), 1u);
  EXPECT_NE(empty.errors[0].message.find("no row files"), std::string::npos);

  Result<Row> r = LoadRow(kSource + "/tests/data/no_such_row.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIoError);
}

TEST(LoadRows, CheckRowsReportsOneErrorPerBadFileAndKeepsTheGoodRows) {
  TempDir dir;
  const std::string good = ReadAll(kGood + "/realfam/minimal_real.yaml");
  WriteFile(dir.path() / "f" / "a_good.yaml", good);
  // Two defects in one file: only the first is reported, so each file contributes one error.
  WriteFile(dir.path() / "f" / "b_bad.yaml", Replace(Replace(good, "id: minimal_real", "id: Bad"),
                                                     "input_tokens: 1024", "input_tokens: 0"));
  WriteFile(dir.path() / "f" / "c_bad.yaml", Replace(good, "below_ms: 500", "at_most_ms: 500"));
  RowSet set = CheckRows({dir.path().string()});
  ASSERT_EQ(set.rows.size(), 1u);
  ASSERT_EQ(set.errors.size(), 2u);
  EXPECT_EQ(set.errors[0].key_path, "id");
  EXPECT_EQ(set.errors[1].key_path, "slo[0].at_most_ms");
}

}  // namespace
}  // namespace capq

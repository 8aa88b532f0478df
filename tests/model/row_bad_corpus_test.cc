// Every file in tests/data/rows_bad/ is one malformed row. Its first two lines pin the refusal:
//   # expect: <a substring of the error>
//   # line: <the line the error must point at>
// Each file must give exactly one error, containing that text, at that line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capq/model/row_loader.h"

namespace capq {
namespace {

namespace fs = std::filesystem;

const std::string kCorpus = std::string(CAPQ_SOURCE_DIR) + "/tests/data/rows_bad";

struct BadRow {
  std::string path;
  std::string name;
};

// Names the case in failure output instead of dumping the struct's bytes.
void PrintTo(const BadRow& row, std::ostream* os) { *os << row.name; }

std::vector<BadRow> Corpus() {
  std::vector<BadRow> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kCorpus, ec)) {
    if (e.path().extension() == ".yaml")
      out.push_back({e.path().string(), e.path().stem().string()});
  }
  std::sort(out.begin(), out.end(),
            [](const BadRow& a, const BadRow& b) { return a.name < b.name; });
  return out;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class BadRowTest : public ::testing::TestWithParam<BadRow> {};

TEST_P(BadRowTest, RefusedWithItsMessageAtItsLine) {
  const std::string text = ReadAll(GetParam().path);
  std::istringstream lines(text);
  std::string expect_line, line_line;
  std::getline(lines, expect_line);
  std::getline(lines, line_line);
  const std::string kExpect = "# expect: ", kLine = "# line: ";
  ASSERT_EQ(expect_line.rfind(kExpect, 0), 0u) << GetParam().path << " has no '# expect:' line";
  ASSERT_EQ(line_line.rfind(kLine, 0), 0u) << GetParam().path << " has no '# line:' line";
  const std::string expected = expect_line.substr(kExpect.size());
  const int expected_line = std::stoi(line_line.substr(kLine.size()));
  ASSERT_FALSE(expected.empty());

  Row row;
  RowError error;
  ASSERT_FALSE(ParseRow(text, GetParam().path, &row, &error)) << "accepted: " << GetParam().path;
  EXPECT_NE(error.ToString().find(expected), std::string::npos)
      << "expected '" << expected << "' in: " << error.ToString();
  EXPECT_EQ(error.line, expected_line) << error.ToString();
  EXPECT_GE(error.column, 1) << error.ToString();
  EXPECT_EQ(error.file, GetParam().path);

  // The file API says the same thing, prefixed with the path and position.
  Result<Row> loaded = LoadRow(GetParam().path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(
      loaded.status().message().find(GetParam().path + ":" + std::to_string(expected_line) + ":"),
      std::string::npos)
      << loaded.status().message();
}

INSTANTIATE_TEST_SUITE_P(RowsBad, BadRowTest, ::testing::ValuesIn(Corpus()),
                         [](const ::testing::TestParamInfo<BadRow>& info) {
                           return info.param.name;
                         });

// `capq rows check tests/data/rows_bad` relies on this: one error per file, nothing accepted, the
// simulator profiles folder skipped.
TEST(RowsBadCorpus, CheckRowsGivesExactlyOneErrorPerFile) {
  const std::vector<BadRow> corpus = Corpus();
  ASSERT_GE(corpus.size(), 60u) << "the malformed-row corpus went missing";
  RowSet set = CheckRows({kCorpus});
  EXPECT_TRUE(set.rows.empty());
  ASSERT_EQ(set.errors.size(), corpus.size());
  std::set<std::string> files;
  for (const auto& e : set.errors) files.insert(e.file);
  EXPECT_EQ(files.size(), corpus.size()) << "some file gave two errors and another none";
  for (const auto& e : set.errors) {
    EXPECT_EQ(e.file.find("/profiles/"), std::string::npos) << "profiles/ must be skipped";
  }
}

}  // namespace
}  // namespace capq

#include "capq/record/artifacts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace capq {
namespace {

std::string Scratch(const std::string& name) {
  std::string d = std::string(CAPQ_BINARY_DIR) + "/test-scratch/h5-art-" + name + "-" +
                  std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(WriteFileAtomic, WritesAndReplacesWithoutLeftovers) {
  std::string d = Scratch("atomic");
  ASSERT_TRUE(WriteFileAtomic(d + "/a.txt", "one").ok());
  ASSERT_TRUE(WriteFileAtomic(d + "/a.txt", "two").ok());
  EXPECT_EQ(*ReadWholeFile(d + "/a.txt"), "two");
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(d)) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  EXPECT_FALSE(WriteFileAtomic(d + "/no/such/dir/a.txt", "x").ok());
}

// Capacity data, reports and rows go where the user says, folders made as needed.
TEST(WriteFileAtomic, CreatesMissingFoldersWhenAsked) {
  std::string d = Scratch("atomic-dirs");
  ASSERT_TRUE(WriteFileAtomic(d + "/new/dir/a.txt", "one", ParentDirs::kCreate).ok());
  EXPECT_EQ(*ReadWholeFile(d + "/new/dir/a.txt"), "one");
}

TEST(TrialDirWriter, CommitsWithChecksumsAndReplacesAPreviousTrial) {
  std::string d = Scratch("writer");
  for (const char* content : {"first", "second"}) {
    auto w = TrialDirWriter::Create(d + "/trial");
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE(w->Write("verdict.json", content).ok());
    ASSERT_TRUE(w->Write("raw.jsonl", "{}\n").ok());
    EXPECT_FALSE(std::filesystem::exists(d + "/trial/" + std::string("x")));
    ASSERT_TRUE(w->Commit().ok());
  }
  EXPECT_EQ(*ReadWholeFile(d + "/trial/verdict.json"), "second");
  EXPECT_FALSE(std::filesystem::exists(d + "/trial.partial-" + std::to_string(::getpid())));
  ChecksumReport ok = VerifyChecksums(d + "/trial");
  EXPECT_TRUE(ok.ok) << (ok.problems.empty() ? "" : ok.problems[0]);
  EXPECT_EQ(ok.files.size(), 2u);
  // The format sha256sum -c reads.
  std::string sums = *ReadWholeFile(d + "/trial/SHA256SUMS");
  EXPECT_EQ(sums.substr(0, 64), *FileSha256Hex(d + "/trial/verdict.json"));
  EXPECT_EQ(sums.substr(64, 15), "  verdict.json\n");
}

TEST(TrialDirWriter, RefusesToReplaceSomethingElse) {
  std::string d = Scratch("refuse");
  std::ofstream(d + "/notes.txt") << "mine";
  auto w = TrialDirWriter::Create(d);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("refusing"), std::string::npos);
}

TEST(VerifyChecksums, ReportsTamperedMissingAndUnlistedFiles) {
  std::string d = Scratch("verify");
  auto w = TrialDirWriter::Create(d + "/t");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE(w->Write("a.json", "{\"x\":1}").ok());
  ASSERT_TRUE(w->Write("b.json", "{}").ok());
  ASSERT_TRUE(w->Commit().ok());
  std::ofstream(d + "/t/a.json") << "{\"x\":2}";
  std::filesystem::remove(d + "/t/b.json");
  std::ofstream(d + "/t/extra.txt") << "?";
  ChecksumReport r = VerifyChecksums(d + "/t");
  EXPECT_FALSE(r.ok);
  std::string all;
  for (auto& p : r.problems) all += p + "\n";
  EXPECT_NE(all.find("a.json: checksum mismatch"), std::string::npos) << all;
  EXPECT_NE(all.find("b.json: listed in SHA256SUMS but missing"), std::string::npos) << all;
  EXPECT_NE(all.find("extra.txt: not listed"), std::string::npos) << all;
  EXPECT_FALSE(VerifyChecksums(d).ok);  // no SHA256SUMS at all
}

}  // namespace
}  // namespace capq

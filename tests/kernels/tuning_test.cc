#include "attn/tuning.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "attn/attention.h"
#include "attn/ladder.h"

namespace attn {
namespace {

TEST(TuningTableTest, ParsesEntriesCommentsAndNotes) {
  absl::StatusOr<std::vector<TuningEntry>> entries = ParseTuningTable(
      "# comment\n\nNVIDIA H200\tk07/128x64_w4_sliced_db\tmeasured\nNVIDIA A100\tk07/x\r\n");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].device, "NVIDIA H200");
  EXPECT_EQ((*entries)[0].candidate, "k07/128x64_w4_sliced_db");
  EXPECT_EQ((*entries)[0].note, "measured");
  EXPECT_EQ((*entries)[1].candidate, "k07/x");
  EXPECT_EQ((*entries)[1].note, "");
}

TEST(TuningTableTest, RejectsMalformedLinesNamingTheLine) {
  absl::StatusOr<std::vector<TuningEntry>> entries = ParseTuningTable("# ok\nonly-one-field\n");
  ASSERT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(entries.status().message().find("line 2"), std::string::npos);
}

TEST(TuningTableTest, RejectsControlCharactersNamingTheLineAndField) {
  // A stray carriage return before the line's own (found by
  // tuning_table_fuzzer: it did not survive FormatTuningTable).
  absl::StatusOr<std::vector<TuningEntry>> entries = ParseTuningTable("dev\tk07/a\r\r\n");
  ASSERT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument) << entries.status();
  EXPECT_EQ(entries.status().message(),
            "tuning table line 1: field 2 has control character 0x0d; fields are text separated "
            "by tabs");
  entries = ParseTuningTable("# ok\nde\x01v\tk07/a\n");
  ASSERT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(entries.status().message().find("line 2: field 1 has control character 0x01"),
            std::string::npos)
      << entries.status();
  entries = ParseTuningTable(std::string("dev\tk07/a\tnote \0 with a NUL\n", 28));
  ASSERT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(entries.status().message().find("line 1: field 3 has control character 0x00"),
            std::string::npos)
      << entries.status();
}

TEST(TuningTableTest, FormatParsesBack) {
  const std::vector<TuningEntry> in = {{"Dev A", "k07/a", "note 1"}, {"Dev B", "k07/b", ""}};
  absl::StatusOr<std::vector<TuningEntry>> out = ParseTuningTable(FormatTuningTable(in));
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0].note, "note 1");
  EXPECT_EQ((*out)[1].candidate, "k07/b");
}

TEST(TuningTableTest, BuiltinTableParsesAndNamesKnownCandidates) {
  absl::StatusOr<std::vector<TuningEntry>> entries = ParseTuningTable(BuiltinTuningTable());
  ASSERT_TRUE(entries.ok()) << entries.status();
  ladder::Register();
  std::vector<KernelInfo> candidates = ListTuningCandidates();
  if (candidates.empty()) GTEST_SKIP() << "CPU-only build: no candidates to check against";
  for (const TuningEntry& e : *entries) {
    bool known = false;
    for (const KernelInfo& c : candidates) known = known || c.name == e.candidate;
    EXPECT_TRUE(known) << e.device << " -> unknown candidate " << e.candidate;
  }
}

TEST(TuningTableTest, LoadedTablesAreSearchedEnvironmentFirst) {
  TuningTables tables;
  tables.builtin = {{"GPU A", "k07/builtin", ""}, {"GPU A", "k08/builtin", ""}};
  tables.environment = {{"GPU A", "k07/old", ""}, {"GPU A", "k07/new", ""}};
  EXPECT_EQ(FindTunedCandidate(tables, "GPU A", "k07/"), "k07/new") << "later lines win";
  EXPECT_EQ(FindTunedCandidate(tables, "GPU A", "k08/"), "k08/builtin");
  EXPECT_EQ(FindTunedCandidate(tables, "GPU B", "k07/"), "");
}

TEST(TuningTableTest, EnvironmentTableComesFirst) {
  // A name of this process's own: test runs of other checkouts share the directory.
  const std::string path =
      ::testing::TempDir() + "/tuning_env_test_" + std::to_string(getpid()) + ".tsv";
  std::ofstream(path) << "Test GPU 9000\tk07/from_env\nTest GPU 9000\tk08/step8_env\n";
  setenv("ATTN_TUNING_TABLE", path.c_str(), 1);
  absl::StatusOr<std::string> found = LookupTunedCandidate("Test GPU 9000", "k07/");
  absl::StatusOr<std::string> step8 = LookupTunedCandidate("Test GPU 9000", "k08/");
  absl::StatusOr<std::string> no_step9 = LookupTunedCandidate("Test GPU 9000", "k09/");
  absl::StatusOr<std::string> missing = LookupTunedCandidate("Unknown GPU", "k07/");
  setenv("ATTN_TUNING_TABLE", (path + ".absent").c_str(), 1);
  absl::StatusOr<std::string> unreadable = LookupTunedCandidate("Test GPU 9000", "k07/");
  unsetenv("ATTN_TUNING_TABLE");
  std::remove(path.c_str());
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, "k07/from_env");
  ASSERT_TRUE(step8.ok()) << step8.status();
  EXPECT_EQ(*step8, "k08/step8_env") << "tuning is keyed by (device, step)";
  ASSERT_TRUE(no_step9.ok());
  EXPECT_EQ(*no_step9, "");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, "");
  EXPECT_EQ(unreadable.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace attn

// Runs the real `mkserve megakernel-schedule` binary: North's schedules build and verify on the
// CPU, and a policy, batch or model the megakernel cannot take fails with exit status 1.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace mkserve::megakernel {
namespace {

struct CliRun {
  int status = -1;
  std::string output;  // stdout and stderr
};

CliRun Schedule(const std::string& flags) {
  const std::string command =
      std::string(MKSERVE_BINARY_DIR) + "/mkserve megakernel-schedule " + flags + " 2>&1";
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    run.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

std::string WritePolicy(const std::string& name, const std::string& json) {
  const std::filesystem::path path = std::filesystem::path(testing::TempDir()) / name;
  std::ofstream(path) << json;
  return path.string();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(MegakernelScheduleCliTest, NorthBuildsAndVerifiesAtEachBatch) {
  const CliRun run = Schedule("--batch 1,2,33 --context 8192");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_EQ(Count(run.output, "ok (3 instances)"), 3u) << run.output;
  EXPECT_NE(run.output.find("| 33 |"), std::string::npos) << run.output;
}

TEST(MegakernelScheduleCliTest, APolicyIsCheckedAndItsTilesShow) {
  const CliRun good = Schedule("--batch 4 --megakernel-policy " +
                               WritePolicy("up128.json", R"({"tiles": {"expert_up_tile": 128}})"));
  EXPECT_EQ(good.status, 0) << good.output;
  EXPECT_NE(good.output.find("up 128"), std::string::npos) << good.output;
  // 100 does not divide the experts' 768 features: the schedule cannot be built.
  const CliRun bad = Schedule("--batch 4 --megakernel-policy " +
                              WritePolicy("up100.json", R"({"tiles": {"expert_up_tile": 100}})"));
  EXPECT_EQ(bad.status, 1) << bad.output;
  EXPECT_NE(bad.output.find("FAILED"), std::string::npos) << bad.output;
  EXPECT_NE(bad.output.find("expert_up_tile"), std::string::npos) << bad.output;
  const CliRun unreadable = Schedule("--megakernel-policy /nonexistent/policy.json");
  EXPECT_EQ(unreadable.status, 1) << unreadable.output;
}

TEST(MegakernelScheduleCliTest, WhatTheMegakernelCannotRunIsAnError) {
  EXPECT_EQ(Schedule("--batch 65").status, 1);
  EXPECT_EQ(Schedule("--batch 0").status, 1);
  EXPECT_EQ(Schedule("--sms 0").status, 1);
  EXPECT_EQ(Schedule("--sms 100000").status, 1);  // not a GPU: refused, not minutes of building
  EXPECT_EQ(Schedule("--context 999999999").status, 1);  // beyond the largest bucket
  const CliRun tiny = Schedule("--preset tiny");         // head_dim 16
  EXPECT_EQ(tiny.status, 1);
  EXPECT_NE(tiny.output.find("head_dim 128"), std::string::npos) << tiny.output;
  // An empty policy (an unset variable in a script) is not the default policy checked instead.
  const CliRun empty = Schedule("--batch 1 --megakernel-policy ''");
  EXPECT_EQ(empty.status, 1);
  EXPECT_NE(empty.output.find("needs a file"), std::string::npos) << empty.output;
  // A folder, and a value nested past the input bound (a stack overflow before).
  EXPECT_EQ(Schedule("--batch 1 --megakernel-policy " + testing::TempDir()).status, 1);
  const CliRun deep =
      Schedule("--batch 1 --megakernel-policy " +
               WritePolicy("deep_policy.json", "{\"placement\": " + std::string(100000, '[') +
                                                   std::string(100000, ']') + "}"));
  EXPECT_EQ(deep.status, 1);
  EXPECT_NE(deep.output.find("levels deep"), std::string::npos) << deep.output;
}

}  // namespace
}  // namespace mkserve::megakernel

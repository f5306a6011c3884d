// `mkserve generate` end to end: the real binary on the HF-verified north fixture, whose greedy
// continuation golden.json records.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const fs::path kNorth = fs::path(MKSERVE_SOURCE_DIR) / "tests/fixtures/golden/north";

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunGenerate(const std::string& flags) {
  std::string command = std::string(MKSERVE_BINARY_DIR) + "/mkserve generate " + flags + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) result.output.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

nlohmann::json ReadJson(const fs::path& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

std::string Join(const std::vector<int>& ids, const std::string& separator, size_t count) {
  std::string text;
  for (size_t i = 0; i < count; ++i) text += (i ? separator : "") + std::to_string(ids[i]);
  return text;
}

class GenerateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    nlohmann::json golden = ReadJson(kNorth / "golden.json");
    prompt_ = Join(golden["prompt_ids"].get<std::vector<int>>(), ",", golden["prompt_ids"].size());
    greedy_ = golden["greedy_ids"].get<std::vector<int>>();
  }
  std::string prompt_;
  std::vector<int> greedy_;
};

TEST_F(GenerateCommandTest, PrintsTheGreedyContinuation) {
  CommandResult result =
      RunGenerate("--model " + kNorth.string() + " --prompt-ids " + prompt_ + " --max-tokens 16");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, Join(greedy_, " ", 16) + "\n");
}

TEST_F(GenerateCommandTest, StopsAtEosUnlessIgnored) {
  // A copy of the model whose EOS is the fourth greedy token.
  fs::path dir = fs::temp_directory_path() / ("mkserve_generate_eos_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy(kNorth, dir, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  nlohmann::json config = ReadJson(kNorth / "config.json");
  config["eos_token_id"] = greedy_[3];
  std::ofstream(dir / "config.json") << config.dump(2);
  ASSERT_NE(greedy_[0], greedy_[3]);
  std::string flags = "--model " + dir.string() + " --prompt-ids " + prompt_ + " --max-tokens 8";
  CommandResult stopped = RunGenerate(flags);
  CommandResult ignored = RunGenerate(flags + " --ignore-eos");
  fs::remove_all(dir);
  EXPECT_EQ(stopped.output, Join(greedy_, " ", 4) + "\n");
  EXPECT_EQ(ignored.output, Join(greedy_, " ", 8) + "\n");
}

TEST_F(GenerateCommandTest, SeededSamplingRepeats) {
  std::string flags = "--model " + kNorth.string() + " --prompt-ids " + prompt_ +
                      " --max-tokens 6 --temperature 1.5 --seed 11";
  CommandResult first = RunGenerate(flags);
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(first.output, RunGenerate(flags).output);
}

TEST_F(GenerateCommandTest, BadInputIsAClearError) {
  CommandResult text = RunGenerate("--model " + kNorth.string() + " --prompt hello");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.output.find("--prompt-ids"), std::string::npos) << text.output;
  CommandResult vocab = RunGenerate("--model " + kNorth.string() + " --prompt-ids 1,100000");
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.output.find("100000"), std::string::npos) << vocab.output;
  CommandResult missing = RunGenerate("--prompt-ids 1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.output.find("--model"), std::string::npos) << missing.output;
}

}  // namespace

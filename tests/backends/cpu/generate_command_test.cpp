// `mkserve generate` end to end, running the real binary: token-id prompts on the HF-verified
// north fixture (whose greedy continuation golden.json records), and text and chat prompts on the
// tiny model, checked against the separate `tokenize` / `detokenize` commands.
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const fs::path kNorth = fs::path(MKSERVE_SOURCE_DIR) / "tests/fixtures/golden/north";

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Single-quoted for /bin/sh.
std::string Quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `mkserve ARGS` with `input` on stdin; stdout and stderr come back separately.
CommandResult RunMkserve(const std::string& args, const std::string& input = "") {
  static int counter = 0;
  fs::path base = fs::path(testing::TempDir()) /
                  ("generate_cmd_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  std::ofstream(base.string() + ".in", std::ios::binary) << input;
  std::string command = std::string(MKSERVE_BINARY_DIR) + "/mkserve " + args + " < " +
                        base.string() + ".in 2> " + base.string() + ".err";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) result.out.append(buffer, n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFile(base.string() + ".err");
  fs::remove(base.string() + ".in");
  fs::remove(base.string() + ".err");
  return result;
}

CommandResult RunGenerate(const std::string& flags) { return RunMkserve("generate " + flags); }

nlohmann::json ReadJson(const fs::path& path) { return nlohmann::json::parse(ReadFile(path)); }

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
    flags_ = "--model " + kNorth.string() + " --prompt-ids " + prompt_;
  }
  std::string prompt_;
  std::vector<int> greedy_;
  std::string flags_;
};

TEST_F(GenerateCommandTest, PrintsTheGreedyContinuation) {
  CommandResult result = RunGenerate(flags_ + " --max-tokens 16");
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out, Join(greedy_, " ", 16) + "\n");
}

TEST_F(GenerateCommandTest, StopsAtEosUnlessIgnored) {
  // A copy of the model whose EOS is the fourth greedy token; the EOS itself is not printed.
  fs::path dir = fs::path(testing::TempDir()) / ("generate_eos_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy(kNorth, dir, fs::copy_options::overwrite_existing | fs::copy_options::recursive);
  nlohmann::json config = ReadJson(kNorth / "config.json");
  config["eos_token_id"] = greedy_[3];
  std::ofstream(dir / "config.json") << config.dump(2);
  ASSERT_NE(greedy_[0], greedy_[3]);
  ASSERT_NE(greedy_[1], greedy_[3]);
  ASSERT_NE(greedy_[2], greedy_[3]);
  std::string flags = "--model " + dir.string() + " --prompt-ids " + prompt_ + " --max-tokens 8";
  CommandResult stopped = RunGenerate(flags);
  CommandResult ignored = RunGenerate(flags + " --ignore-eos");
  fs::remove_all(dir);
  EXPECT_EQ(stopped.out, Join(greedy_, " ", 3) + "\n") << stopped.err;
  EXPECT_EQ(ignored.out, Join(greedy_, " ", 8) + "\n") << ignored.err;
}

TEST_F(GenerateCommandTest, SeededSamplingRepeats) {
  std::string flags = flags_ + " --max-tokens 6 --temperature 1.5 --seed 11";
  CommandResult first = RunGenerate(flags);
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, RunGenerate(flags).out);
}

TEST_F(GenerateCommandTest, TopKOneAndTinyTopPAreGreedy) {
  // At a high temperature only the truncation keeps the sampler on the greedy path.
  std::string greedy = Join(greedy_, " ", 6) + "\n";
  std::string sampled = flags_ + " --max-tokens 6 --temperature 5 --seed 3";
  EXPECT_EQ(RunGenerate(sampled + " --top-k 1").out, greedy);
  EXPECT_EQ(RunGenerate(sampled + " --top-p 0.000001").out, greedy);
  EXPECT_NE(RunGenerate(sampled).out, greedy) << "temperature 5 should leave the greedy path";
}

TEST_F(GenerateCommandTest, BadInputIsAClearError) {
  CommandResult text = RunGenerate("--model " + kNorth.string() + " --prompt hello");
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.err.find("tokenizer.json"), std::string::npos) << text.err;
  CommandResult both = RunGenerate(flags_ + " --prompt hello");
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("--prompt and --prompt-ids"), std::string::npos) << both.err;
  CommandResult vocab = RunGenerate("--model " + kNorth.string() + " --prompt-ids 1,100000");
  EXPECT_EQ(vocab.exit_code, 1);
  EXPECT_NE(vocab.err.find("100000"), std::string::npos) << vocab.err;
  CommandResult missing = RunGenerate("--prompt-ids 1");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("--model"), std::string::npos) << missing.err;
  CommandResult chat = RunGenerate(flags_ + " --chat");
  EXPECT_EQ(chat.exit_code, 1);
  EXPECT_NE(chat.err.find("--chat needs --prompt"), std::string::npos) << chat.err;
  // Counts are checked before they narrow to int: 4294967297 threads ran as 1.
  for (const char* threads : {"4294967297", "100000", "-1"}) {
    CommandResult many = RunGenerate(flags_ + " --threads " + threads);
    EXPECT_EQ(many.exit_code, 1) << threads;
    EXPECT_NE(many.err.find(std::string("--threads must be 0..1024, got ") + threads),
              std::string::npos)
        << many.err;
  }
}

// Text prompts on the tiny model, which ships a trained tokenizer and no chat template.
class TinyGenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(testing::TempDir()) / ("generate_tiny_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    CommandResult made = RunMkserve("make-model --preset tiny --out " + dir_.string());
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string Model() { return "--model " + dir_.string() + " "; }

  // `mkserve tokenize` of `text` as a --prompt-ids list.
  static std::string TokenizeToFlag(const std::string& text, bool special) {
    CommandResult ids = RunMkserve(
        "tokenize --tokenizer " + dir_.string() + (special ? "" : " --no-special"), text);
    EXPECT_EQ(ids.exit_code, 0) << ids.err;
    std::vector<int> list = nlohmann::json::parse(ids.out).get<std::vector<int>>();
    return Join(list, ",", list.size());
  }

  // `mkserve detokenize` of the ids `generate --prompt-ids` printed (special tokens kept).
  static std::string Detokenize(const std::string& printed_ids) {
    std::string json = "[";
    std::istringstream words(printed_ids);
    for (std::string id; words >> id;) json += (json.size() > 1 ? "," : "") + id;
    CommandResult text = RunMkserve("detokenize --tokenizer " + dir_.string(), json + "]");
    EXPECT_EQ(text.exit_code, 0) << text.err;
    return text.out;
  }

  static fs::path dir_;
};

fs::path TinyGenerateTest::dir_;

constexpr char kPrompt[] = "The quick brown fox jumps over";
// The random tiny model's greedy text is one repeated token; sampling varies it.
constexpr char kLength[] = " --max-tokens 12 --ignore-eos";
constexpr char kSampled[] = " --max-tokens 12 --ignore-eos --temperature 1 --seed 5";

std::string TrimEnd(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

TEST_F(TinyGenerateTest, TextPromptStreamsTheTextOfTheIdPrompt) {
  std::string prompt_ids = TokenizeToFlag(kPrompt, true);
  for (const char* sampling : {kLength, kSampled}) {
    CommandResult ids = RunGenerate(Model() + "--prompt-ids " + prompt_ids + sampling);
    ASSERT_EQ(ids.exit_code, 0) << ids.err;
    std::istringstream words(ids.out);
    EXPECT_EQ(std::distance(std::istream_iterator<std::string>(words), {}), 12) << ids.out;
    CommandResult text = RunGenerate(Model() + "--prompt " + Quote(kPrompt) + sampling);
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_EQ(text.out, Detokenize(ids.out) + "\n") << sampling;
  }
}

TEST_F(TinyGenerateTest, StopStringEndsTheTextBeforeIt) {
  std::string flags = Model() + "--prompt " + Quote(kPrompt) + kSampled;
  std::string full = RunGenerate(flags).out;
  // A stop string from the second half of the sampled text, made of plain ASCII.
  size_t at = full.size() / 2;
  while (at + 2 < full.size() && !(std::isgraph(full[at]) && std::isgraph(full[at + 1]))) ++at;
  ASSERT_LT(at + 2, full.size()) << "no ASCII pair in: " << full;
  std::string stop = full.substr(at, 2);
  CommandResult stopped = RunGenerate(flags + " --stop " + Quote(stop));
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  EXPECT_EQ(stopped.out, full.substr(0, full.find(stop)) + "\n") << "stop: " << stop;
  EXPECT_LT(stopped.out.size(), full.size());
}

TEST_F(TinyGenerateTest, ChatRendersTheCommand4Prompt) {
  std::string flags = Model() + "--chat --prompt 'hello there' --system 'be brief' --print-prompt";
  CommandResult on = RunGenerate(flags);
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_NE(on.out.find("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>be brief"),
            std::string::npos)
      << on.out;
  EXPECT_NE(on.out.find("<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>hello "
                        "there<|END_TEXT|><|END_OF_TURN_TOKEN|>"),
            std::string::npos)
      << on.out;
  EXPECT_TRUE(on.out.ends_with("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>"))
      << on.out;
  CommandResult off = RunGenerate(flags + " --no-reasoning");
  EXPECT_TRUE(off.out.ends_with("<|CHATBOT_TOKEN|><|START_THINKING|><|END_THINKING|>")) << off.out;
}

TEST_F(TinyGenerateTest, ChatGeneratesFromTheRenderedPrompt) {
  std::string chat = Model() + "--chat --prompt 'hello there' --no-reasoning";
  std::string rendered = RunGenerate(chat + " --print-prompt").out;
  CommandResult ids =
      RunGenerate(Model() + "--prompt-ids " + TokenizeToFlag(rendered, false) + kSampled);
  ASSERT_EQ(ids.exit_code, 0) << ids.err;
  CommandResult raw = RunGenerate(chat + " --raw" + kSampled);
  ASSERT_EQ(raw.exit_code, 0) << raw.err;
  EXPECT_EQ(raw.out, Detokenize(ids.out) + "\n");
}

TEST_F(TinyGenerateTest, ChatSplitsReasoningFromContent) {
  // A sampled output with no Command-4 marker in it: with reasoning on it is all reasoning (on
  // stderr), with reasoning off all content (on stdout). Seeds are tried until one has none.
  std::string chat = Model() + "--chat --prompt 'hello there' --max-tokens 12 --temperature 1";
  for (const char* reasoning : {"", " --no-reasoning"}) {
    std::string flags;
    std::string raw;
    for (int seed = 1; seed <= 20 && (flags.empty() || raw.find("<|") != std::string::npos);
         ++seed) {
      flags = chat + reasoning + " --seed " + std::to_string(seed);
      raw = RunGenerate(flags + " --raw").out;
    }
    ASSERT_EQ(raw.find("<|"), std::string::npos) << "every seed generated a marker";
    ASSERT_FALSE(TrimEnd(raw).empty());
    CommandResult parsed = RunGenerate(flags);
    EXPECT_EQ(parsed.exit_code, 0) << parsed.err;
    if (*reasoning == '\0') {
      EXPECT_EQ(parsed.out, "\n");
      EXPECT_EQ(TrimEnd(parsed.err), TrimEnd(raw)) << flags;
    } else {
      EXPECT_EQ(parsed.err, "");
      EXPECT_EQ(TrimEnd(parsed.out), TrimEnd(raw)) << flags;
    }
  }
}

TEST_F(TinyGenerateTest, MissingTokenizerIsAClearError) {
  fs::path dir = fs::path(testing::TempDir()) / ("generate_no_tok_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy(dir_ / "config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  CommandResult result = RunGenerate("--model " + dir.string() + " --prompt hi");
  fs::remove_all(dir);
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_NE(result.err.find((dir / "tokenizer.json").string()), std::string::npos) << result.err;
}

// Output that cannot be written (a full disk) fails the command; detokenize refuses ids past 32
// bits (4294967373 read as token 77) and JSON nested past the input bound (a stack overflow).
TEST_F(TinyGenerateTest, OutputAndInputFailuresAreErrors) {
  CommandResult full = RunMkserve("tokenize --tokenizer " + dir_.string() + " > /dev/full", "hi");
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find("writing the output failed"), std::string::npos) << full.err;
  CommandResult wide = RunMkserve("detokenize --tokenizer " + dir_.string(), "[4294967373]");
  EXPECT_EQ(wide.exit_code, 1) << wide.err;
  EXPECT_NE(wide.err.find("got 4294967373"), std::string::npos) << wide.err;
  CommandResult deep = RunMkserve("detokenize --tokenizer " + dir_.string(),
                                  std::string(100000, '[') + std::string(100000, ']'));
  EXPECT_EQ(deep.exit_code, 1) << deep.err;
  EXPECT_NE(deep.err.find("levels deep"), std::string::npos) << deep.err;
}

// The other commands' inputs: a folder given as a file, a schema that is not JSON and a shard size
// past the byte count's range are refused by name (exit 1), not an internal error or a wrong run.
TEST_F(TinyGenerateTest, CommandInputsAreCheckedByName) {
  const std::string folder = testing::TempDir();
  CommandResult input =
      RunMkserve("bench-tokenizer --tokenizer " + dir_.string() + " --input " + folder);
  EXPECT_EQ(input.exit_code, 1) << input.err;
  EXPECT_NE(input.err.find("is not a regular file"), std::string::npos) << input.err;
  const fs::path schema = fs::path(folder) / "broken_schema.json";
  std::ofstream(schema) << "{\"type\": ";
  CommandResult grammar = RunMkserve("bench-grammar --vocab 300 --schema " + schema.string());
  EXPECT_EQ(grammar.exit_code, 1) << grammar.err;
  EXPECT_NE(grammar.err.find("not valid JSON"), std::string::npos) << grammar.err;
  CommandResult huge_vocab = RunMkserve("bench-grammar --vocab 9223372036854775807");
  EXPECT_EQ(huge_vocab.exit_code, 1) << huge_vocab.err;
  EXPECT_NE(huge_vocab.err.find("--vocab must be 256..16777216"), std::string::npos)
      << huge_vocab.err;
  CommandResult shards = RunMkserve("make-model --preset tiny --shard-mb 17592186044416 --out " +
                                    (fs::path(folder) / "wide_shards").string());
  EXPECT_EQ(shards.exit_code, 1) << shards.err;
  EXPECT_NE(shards.err.find("--shard-mb must be"), std::string::npos) << shards.err;
  CommandResult nowhere = RunMkserve("make-model --preset tiny --out ''");
  EXPECT_EQ(nowhere.exit_code, 1) << nowhere.err;
  // A write that fails half way (files capped at 100 KB, as on a full disk) leaves nothing behind.
  const fs::path capped = fs::path(folder) / "capped_model";
  fs::remove_all(capped);
  const std::string command =
      "sh -c \"ulimit -f 200; trap '' XFSZ; " + std::string(MKSERVE_BINARY_DIR) +
      "/mkserve make-model --preset tiny --out " + capped.string() + "\" 2> /dev/null";
  const int status = std::system(command.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_TRUE(fs::is_directory(capped) && fs::is_empty(capped));
}

}  // namespace

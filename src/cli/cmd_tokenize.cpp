// `mkserve tokenize --tokenizer PATH [--lines] [--no-special] [--json-post-processor]`: UTF-8
// text on stdin -> token ids as a JSON array (one array per input line with --lines).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "common/args.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: mkserve tokenize --tokenizer PATH [--lines] [--no-special] [--json-post-processor]\n"
    "\n"
    "UTF-8 text on stdin -> its token ids as a JSON array on stdout.\n"
    "  --tokenizer PATH       a tokenizer.json, or a checkpoint folder holding one\n"
    "  --lines                one array per input line\n"
    "  --no-special           no BOS/EOS added around the text\n"
    "  --json-post-processor  add them as tokenizer.json's post-processor says, not as\n"
    "                         tokenizer_config.json's add_bos_token / add_eos_token do\n";

int RunTokenize(std::span<const std::string> argv) {
  Args args(argv);
  std::string path = args.RequiredString("tokenizer");
  bool lines = args.Switch("lines");
  bool add_special_tokens = !args.Switch("no-special");
  tokenizer::TokenizerOptions options;
  options.apply_config_bos_eos = !args.Switch("json-post-processor");
  args.Finish();
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::Load(path, options);
  auto print = [&](const std::string& text) {
    std::string out = nlohmann::json(tokenizer.Encode(text, add_special_tokens)).dump();
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  };
  if (lines) {
    for (std::string line; std::getline(std::cin, line);) print(line);
  } else {
    print(std::string(std::istreambuf_iterator<char>(std::cin), {}));
  }
  return 0;
}

const CommandRegistration kRegistration({"tokenize", "text on stdin -> token ids (JSON)", kUsage,
                                         RunTokenize});

}  // namespace
}  // namespace mkserve::cli

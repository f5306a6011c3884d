// `mkserve detokenize --tokenizer PATH [--skip-special]`: a JSON array of token ids on stdin ->
// the decoded text on stdout.
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "common/input_json.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

std::vector<int32_t> ReadIds() {
  std::string input(std::istreambuf_iterator<char>(std::cin), {});
  nlohmann::json json = ParseInputJson(input, "stdin");
  if (!json.is_array()) throw Error("stdin must hold a JSON array of token ids");
  std::vector<int32_t> ids;
  for (const nlohmann::json& id : json) {
    // Range-checked before the narrowing: 4294967373 is not token 77.
    // (An unsigned id past INT64_MAX reads as a negative int64.)
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      std::string shown = id.dump();
      if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
      throw Error("token ids must be integers in 0.." + std::to_string(INT32_MAX) + ", got " +
                  shown);
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

constexpr char kUsage[] =
    "usage: mkserve detokenize --tokenizer PATH [--skip-special]\n"
    "\n"
    "A JSON array of token ids on stdin -> their text on stdout.\n"
    "  --tokenizer PATH  a tokenizer.json, or a checkpoint folder holding one\n"
    "  --skip-special    leave special tokens out of the text\n";

int RunDetokenize(std::span<const std::string> argv) {
  Args args(argv);
  std::string path = args.RequiredString("tokenizer");
  bool skip_special = args.Switch("skip-special");
  args.Finish();
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::Load(path);
  std::string text = tokenizer.Decode(ReadIds(), skip_special);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

const CommandRegistration kRegistration({"detokenize", "token ids (JSON) on stdin -> text", kUsage,
                                         RunDetokenize});

}  // namespace
}  // namespace mkserve::cli

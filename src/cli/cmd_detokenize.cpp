// `mkserve detokenize --tokenizer PATH [--skip-special]`: a JSON array of token ids on stdin ->
// the decoded text on stdout.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace mkserve::cli {
namespace {

std::vector<int32_t> ReadIds() {
  std::string input(std::istreambuf_iterator<char>(std::cin), {});
  nlohmann::json json = nlohmann::json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (!json.is_array()) throw Error("stdin must hold a JSON array of token ids");
  std::vector<int32_t> ids;
  for (const nlohmann::json& id : json) {
    if (!id.is_number_integer()) throw Error("token ids must be integers, got " + id.dump());
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

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

const CommandRegistration kRegistration({"detokenize", "token ids (JSON) on stdin -> text",
                                         RunDetokenize});

}  // namespace
}  // namespace mkserve::cli

// libFuzzer target for the tokenizer (the tiny byte-level BPE one, which has North's special and
// marker tokens). Byte 0 picks the check: (even) the rest, when it is valid UTF-8, encodes to ids
// that decode back to it; (odd) the rest, read as 16-bit ids, detokenizes incrementally into
// valid UTF-8 deltas whose concatenation with Flush equals Decode of all ids.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

using mkserve::tokenizer::Tokenizer;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

const Tokenizer& Tiny() {
  static const Tokenizer tokenizer = [] {
    const auto dir = std::filesystem::temp_directory_path() / "mkserve_tokenizer_fuzz";
    std::filesystem::create_directories(dir);
    mkserve::tokenizer::WriteTinyTokenizer(dir);
    return Tokenizer::Load(dir);
  }();
  return tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Tokenizer& tokenizer = Tiny();
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    if (!mkserve::IsValidUtf8(rest)) return 0;
    const std::vector<int32_t> ids = tokenizer.Encode(rest, /*add_special_tokens=*/false);
    if (tokenizer.Decode(ids, /*skip_special_tokens=*/false) != rest) Fail("no round trip");
    return 0;
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < rest.size(); i += 2) {
    const int id = static_cast<uint8_t>(rest[i]) | static_cast<uint8_t>(rest[i + 1]) << 8;
    ids.push_back(id % tokenizer.vocab_size());
  }
  for (bool skip : {false, true}) {
    mkserve::tokenizer::IncrementalDetokenizer detokenizer(tokenizer, skip);
    std::string text;
    for (int32_t id : ids) {
      const std::string delta = detokenizer.Next(id);
      if (!mkserve::IsValidUtf8(delta)) Fail("a delta is not valid UTF-8");
      text += delta;
    }
    const std::string tail = detokenizer.Flush();
    if (!mkserve::IsValidUtf8(tail)) Fail("the flushed tail is not valid UTF-8");
    if (text + tail != tokenizer.Decode(ids, skip)) Fail("deltas differ from Decode");
  }
  return 0;
}

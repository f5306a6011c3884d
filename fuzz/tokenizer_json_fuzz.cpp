// libFuzzer target for loading a checkpoint's tokenizer: tokenizer.json (model, normalizers,
// pre-tokenizers with their regular expressions, decoders, post-processor, added tokens) and
// optionally tokenizer_config.json after a NUL byte. A broken or hostile checkpoint reaches this
// at load. Checked: the load succeeds or throws mkserve::Error naming what is wrong (never another
// exception, a crash or a hang); a loaded tokenizer encodes a fixed text, with and without
// special tokens, to ids inside its vocabulary, and decodes them to valid UTF-8.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

[[noreturn]] void Fail(const char* what, const char* detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail);
  std::abort();
}

// Letters, digits, punctuation, spaces of several kinds, a multi-byte character, an emoji, code,
// and the spelling of special tokens a tokenizer may define.
constexpr std::string_view kSample =
    "Hello, w\xc3\xb6rld! It's 2026 \xf0\x9f\x98\x80\n\tdef f(x):  return x**2\r\n"
    "<BOS_TOKEN><|END_OF_TURN_TOKEN|><unk> \xe4\xb8\xad\xe6\x96\x87   ";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const char* nul = std::find(text, text + size, '\0');
  const std::string_view tokenizer_json(text, nul - text);
  const std::string_view config_json =
      nul == text + size ? std::string_view() : std::string_view(nul + 1, text + size - nul - 1);
  try {
    const auto tokenizer = mkserve::tokenizer::Tokenizer::FromJsonText(tokenizer_json, config_json);
    for (bool add_special : {false, true}) {
      const std::vector<int32_t> ids = tokenizer.Encode(kSample, add_special);
      for (int32_t id : ids) {
        if (id < 0 || id >= tokenizer.vocab_size()) Fail("an id outside the vocabulary", "");
      }
      for (bool skip_special : {false, true}) {
        if (!mkserve::IsValidUtf8(tokenizer.Decode(ids, skip_special)))
          Fail("a decode is not valid UTF-8", "");
      }
    }
  } catch (const mkserve::Error&) {
    return 0;  // refused by name, as loading such a checkpoint is
  } catch (const std::exception& e) {
    Fail("an exception other than mkserve::Error", e.what());
  }
  return 0;
}

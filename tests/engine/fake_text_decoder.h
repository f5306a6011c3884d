// A TextDecoder for tests: token id i decodes to pieces[i]; ids past the table decode to "<i>";
// hidden ids decode to nothing; the ids in `special` are special tokens (their text whole).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "engine/text_decoder.h"

namespace mkserve::testing {

class FakeTextDecoder : public TextDecoder {
 public:
  explicit FakeTextDecoder(std::vector<std::string> pieces, std::vector<int32_t> special = {})
      : pieces_(std::move(pieces)), special_(std::move(special)) {}
  std::unique_ptr<TokenTextStream> NewStream(
      std::span<const int32_t>, std::shared_ptr<const HiddenTokens> hidden) const override {
    return std::make_unique<Stream>(*this, std::move(hidden));
  }

 private:
  class Stream : public TokenTextStream {
   public:
    Stream(const FakeTextDecoder& decoder, std::shared_ptr<const HiddenTokens> hidden)
        : decoder_(decoder), hidden_(std::move(hidden)) {}
    TokenText Append(int32_t id) override {
      if (IsHidden(hidden_.get(), id)) return {};
      const auto& pieces = decoder_.pieces_;
      TokenText out{id >= 0 && id < static_cast<int32_t>(pieces.size())
                        ? pieces[id]
                        : "<" + std::to_string(id) + ">"};
      if (std::ranges::find(decoder_.special_, id) != decoder_.special_.end()) {
        out.whole_bytes = out.text.size();
      }
      return out;
    }
    std::string Flush() override { return ""; }

   private:
    const FakeTextDecoder& decoder_;
    std::shared_ptr<const HiddenTokens> hidden_;
  };
  std::vector<std::string> pieces_;
  std::vector<int32_t> special_;
};

}  // namespace mkserve::testing

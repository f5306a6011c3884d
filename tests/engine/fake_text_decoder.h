// A TextDecoder for tests: token id i decodes to pieces[i]; ids past the table decode to "<i>";
// hidden ids decode to nothing.
#pragma once

#include <string>
#include <vector>

#include "engine/text_decoder.h"

namespace mkserve::testing {

class FakeTextDecoder : public TextDecoder {
 public:
  explicit FakeTextDecoder(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::unique_ptr<TokenTextStream> NewStream(
      std::span<const int32_t>, std::shared_ptr<const HiddenTokens> hidden) const override {
    return std::make_unique<Stream>(pieces_, std::move(hidden));
  }

 private:
  class Stream : public TokenTextStream {
   public:
    Stream(const std::vector<std::string>& pieces, std::shared_ptr<const HiddenTokens> hidden)
        : pieces_(pieces), hidden_(std::move(hidden)) {}
    std::string Append(int32_t id) override {
      if (IsHidden(hidden_.get(), id)) return "";
      if (id >= 0 && id < static_cast<int32_t>(pieces_.size())) return pieces_[id];
      return "<" + std::to_string(id) + ">";
    }
    std::string Flush() override { return ""; }

   private:
    const std::vector<std::string>& pieces_;
    std::shared_ptr<const HiddenTokens> hidden_;
  };
  std::vector<std::string> pieces_;
};

}  // namespace mkserve::testing

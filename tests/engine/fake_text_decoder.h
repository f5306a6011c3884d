// A TextDecoder for tests: token id i decodes to pieces[i]; ids past the table decode to "<i>".
#pragma once

#include <string>
#include <vector>

#include "engine/text_decoder.h"

namespace mkserve::testing {

class FakeTextDecoder : public TextDecoder {
 public:
  explicit FakeTextDecoder(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::unique_ptr<TokenTextStream> NewStream(std::span<const int32_t>) const override {
    return std::make_unique<Stream>(pieces_);
  }

 private:
  class Stream : public TokenTextStream {
   public:
    explicit Stream(const std::vector<std::string>& pieces) : pieces_(pieces) {}
    std::string Append(int32_t id) override {
      if (id >= 0 && id < static_cast<int32_t>(pieces_.size())) return pieces_[id];
      return "<" + std::to_string(id) + ">";
    }
    std::string Flush() override { return ""; }

   private:
    const std::vector<std::string>& pieces_;
  };
  std::vector<std::string> pieces_;
};

}  // namespace mkserve::testing

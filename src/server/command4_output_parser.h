// OutputParser over src/chat's Command4Parser: reasoning, answer text and tool calls of
// North Mini Code's output format.
#pragma once

#include "chat/command4_parser.h"
#include "server/output_parser.h"

namespace mkserve::server {

class Command4OutputParser : public OutputParser {
 public:
  explicit Command4OutputParser(chat::Command4ParserOptions options)
      : parser_(std::move(options)) {}

  ParsedDelta Feed(std::string_view text) override { return Convert(parser_.Feed(text)); }
  ParsedDelta Finish() override { return Convert(parser_.Finish()); }
  bool holding() const override { return parser_.holding(); }
  std::span<const std::string_view> markers() const override { return chat::Command4Markers(); }

 private:
  static ParsedDelta Convert(const std::vector<chat::Command4Event>& events);

  chat::Command4Parser parser_;
};

}  // namespace mkserve::server

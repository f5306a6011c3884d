// SingleToolCallParser: enforces `parallel_tool_calls: false`. It wraps another OutputParser and
// lets through only the first tool call the model makes; pieces of any later call are dropped
// before they become deltas, so a client never sees a partial second call.
#pragma once

#include <memory>

#include "server/output_parser.h"

namespace mkserve::server {

class SingleToolCallParser : public OutputParser {
 public:
  explicit SingleToolCallParser(std::unique_ptr<OutputParser> inner) : inner_(std::move(inner)) {}

  ParsedDelta Feed(std::string_view text) override { return Filter(inner_->Feed(text)); }
  ParsedDelta Finish() override { return Filter(inner_->Finish()); }

 private:
  ParsedDelta Filter(ParsedDelta delta);

  std::unique_ptr<OutputParser> inner_;
  int32_t kept_index_ = -1;  // the call let through; -1 until the first one begins
};

}  // namespace mkserve::server

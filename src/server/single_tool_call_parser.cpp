#include "server/single_tool_call_parser.h"

#include <vector>

namespace mkserve::server {

ParsedDelta SingleToolCallParser::Filter(ParsedDelta delta) {
  if (kept_index_ < 0 && !delta.tool_calls.empty()) kept_index_ = delta.tool_calls.front().index;
  std::erase_if(delta.tool_calls,
                [this](const ToolCallDelta& call) { return call.index != kept_index_; });
  return delta;
}

}  // namespace mkserve::server

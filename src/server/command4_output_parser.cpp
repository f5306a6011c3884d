#include "server/command4_output_parser.h"

namespace mkserve::server {

ParsedDelta Command4OutputParser::Convert(const std::vector<chat::Command4Event>& events) {
  using Kind = chat::Command4Event::Kind;
  ParsedDelta delta;
  for (const chat::Command4Event& event : events) {
    switch (event.kind) {
      case Kind::kReasoning:
        delta.reasoning += event.text;
        break;
      case Kind::kContent:
        delta.content += event.text;
        break;
      case Kind::kToolCallBegin:
        delta.tool_calls.push_back({event.tool_index, event.tool_call_id, event.tool_name, ""});
        break;
      case Kind::kToolCallArguments:
        delta.tool_calls.push_back({event.tool_index, "", "", event.text});
        break;
      case Kind::kError:  // the rejected text already came as content
      case Kind::kFinish:
        break;
    }
  }
  return delta;
}

}  // namespace mkserve::server

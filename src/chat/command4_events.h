// What the Command-4 output parser reports while it reads generated text.
#pragma once

#include <string>
#include <vector>

namespace mkserve::chat {

struct Command4Event {
  enum class Kind {
    kReasoning,          // text: a piece of the reasoning (OpenAI reasoning_content)
    kContent,            // text: a piece of the answer (OpenAI content)
    kToolCallBegin,      // tool_index, tool_call_id, tool_name: a new tool call
    kToolCallArguments,  // tool_index, text: a piece of that call's arguments JSON
    kError,              // text: why the content event before it is not a tool call
    kFinish,             // the end of the output; last event of Finish()
  };

  static Command4Event Make(Kind kind, std::string text = {}) {
    Command4Event event;
    event.kind = kind;
    event.text = std::move(text);
    return event;
  }

  Kind kind = Kind::kFinish;
  std::string text;
  int tool_index = -1;
  std::string tool_call_id;
  std::string tool_name;
};

// Appends `event`, merging it into the previous one when both are pieces of the same stream
// (reasoning, content, or arguments of the same call), so callers get few, large deltas.
void AppendEvent(std::vector<Command4Event>& events, Command4Event event);

}  // namespace mkserve::chat

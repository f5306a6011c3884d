// Streams the body of one <|START_ACTION|>...<|END_ACTION|> block, a JSON array of
// {"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, into tool-call events:
// a begin event as soon as a call's name is known, then argument pieces that concatenate to
// exactly the `parameters` JSON text as generated. The JSON is checked as it arrives; the first
// syntax or shape error is reported once, at Finish(), with the raw block text.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "chat/command4_events.h"
#include "chat/json_stream_validator.h"

namespace mkserve::chat {

class Command4ActionParser {
 public:
  using IdMaker = std::function<std::string(int tool_index)>;

  // `first_tool_index`: calls are numbered on from the calls of earlier blocks.
  Command4ActionParser(int first_tool_index, IdMaker make_id)
      : next_tool_index_(first_tool_index), make_id_(std::move(make_id)) {}

  void Push(char c, std::vector<Command4Event>& events);
  // The block ended (END_ACTION, end of turn or end of output).
  void Finish(std::vector<Command4Event>& events);

  // Markers are only recognised outside JSON strings (anywhere once the JSON is invalid).
  bool in_string() const { return validator_.in_string() && validator_.error().empty(); }
  int next_tool_index() const { return next_tool_index_; }

 private:
  void Fail(const std::string& message);
  void OnCallLevel(JsonStreamValidator::Event event, char c, std::vector<Command4Event>& events);
  void OnValueStart(JsonStreamValidator::Event event, char c, std::vector<Command4Event>& events);
  void BeginCall(std::vector<Command4Event>& events);
  void AppendArguments(const std::string& text, std::vector<Command4Event>& events);
  void EndCall(std::vector<Command4Event>& events);

  JsonStreamValidator validator_;
  std::string raw_;
  std::string error_;
  int next_tool_index_;
  IdMaker make_id_;

  // The call being read (an object at depth 2 of the array).
  std::string key_;
  bool awaiting_value_ = false;
  bool reading_name_ = false;
  bool reading_arguments_ = false;
  std::string name_json_;
  bool has_name_ = false;
  bool has_arguments_ = false;
  std::string pending_arguments_;  // arguments read before the name
  int tool_index_ = -1;
};

}  // namespace mkserve::chat

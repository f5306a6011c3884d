// Reads the body of one <|START_ACTION|>...<|END_ACTION|> block, a JSON array of
// {"tool_call_id": "0", "tool_name": "f", "parameters": {...}}, into tool-call events (a lone
// call object without the array is accepted too).
//
// A call is released whole when its object closes, and only when it is usable: a tool_name
// string the request offered and a JSON-object `parameters` (absent: {}). Its arguments are
// exactly the `parameters` text as generated, so they always parse. Whatever is not a usable
// call (a call to an undeclared tool, a call without a name, invalid JSON, text that is not JSON)
// comes back as content, followed by an error event saying why; nothing is both a call and
// content. A syntax error costs only the call it is in: reading resumes at the next object that
// starts with "tool_call_id" or "tool_name" after a ',' or '['.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "chat/command4_events.h"
#include "chat/json_stream_validator.h"

namespace mkserve::chat {

class Command4ActionParser {
 public:
  using IdMaker = std::function<std::string(int tool_index)>;

  // `first_tool_index`: calls are numbered on from the calls of earlier blocks.
  // `allowed_tools`: the names that may be called; nullopt: any name.
  Command4ActionParser(int first_tool_index, IdMaker make_id,
                       std::optional<std::set<std::string>> allowed_tools)
      : next_tool_index_(first_tool_index),
        make_id_(std::move(make_id)),
        allowed_tools_(std::move(allowed_tools)) {}

  void Push(char c, std::vector<Command4Event>& events);
  // The block ended (END_ACTION, end of turn or end of output).
  void Finish(std::vector<Command4Event>& events);

  // Markers are only recognised outside JSON strings (anywhere once the JSON is invalid).
  bool in_string() const { return !recovering_ && validator_.in_string(); }
  int next_tool_index() const { return next_tool_index_; }

 private:
  void Read(char c, std::vector<Command4Event>& events);
  void Recover(char c, std::vector<Command4Event>& events);
  // Starts skipping unusable text (`text` so far) until the next call begins.
  void Fail(std::string why, std::string text);
  void OnCallLevel(JsonStreamValidator::Event event, char c);
  void OnValueStart(JsonStreamValidator::Event event, char c);
  void EndCall(std::vector<Command4Event>& events);
  void Reject(const std::string& why, const std::string& text,
              std::vector<Command4Event>& events) const;
  void ResetCall();

  JsonStreamValidator validator_;
  int next_tool_index_;
  IdMaker make_id_;
  std::optional<std::set<std::string>> allowed_tools_;

  // After a syntax or shape error: the unusable text, until a call begins or the block ends.
  bool recovering_ = false;
  std::string broken_;
  std::string broken_why_;

  std::string array_text_;  // text between calls (brackets, separators), for error content

  // The call being read (an object at depth 2 of the array).
  bool in_call_ = false;
  std::string call_text_;   // the object as generated
  std::string call_error_;  // why it cannot be used; empty while it can
  std::string key_;
  bool awaiting_value_ = false;
  bool reading_name_ = false;
  bool reading_arguments_ = false;
  std::string name_json_;
  std::string name_;
  bool has_name_ = false;
  bool has_arguments_ = false;
  std::string arguments_;
};

}  // namespace mkserve::chat

#include "chat/command4_action_parser.h"

#include <nlohmann/json.hpp>

namespace mkserve::chat {

namespace {

using Event = JsonStreamValidator::Event;

// Depths while reading: the array is depth 1, a call object 2, inside `parameters` 3 and more.
constexpr size_t kArrayDepth = 1;
constexpr size_t kCallDepth = 2;

bool StartsValue(Event event) {
  return event == Event::kOpen || event == Event::kStringStart || event == Event::kScalar;
}

}  // namespace

void AppendEvent(std::vector<Command4Event>& events, Command4Event event) {
  using Kind = Command4Event::Kind;
  bool is_delta = event.kind == Kind::kReasoning || event.kind == Kind::kContent ||
                  event.kind == Kind::kToolCallArguments;
  if (is_delta && event.text.empty()) return;
  if (is_delta && !events.empty() && events.back().kind == event.kind &&
      events.back().tool_index == event.tool_index) {
    events.back().text += event.text;
    return;
  }
  events.push_back(std::move(event));
}

void Command4ActionParser::Fail(const std::string& message) {
  if (error_.empty()) error_ = message;
}

void Command4ActionParser::Push(char c, std::vector<Command4Event>& events) {
  raw_ += c;
  size_t depth = validator_.depth();
  Event event = validator_.Push(c);  // even after a shape error, so in_string() stays right
  if (event == Event::kError) return Fail("invalid tool call JSON: " + validator_.error());
  if (!error_.empty()) return;
  if (event == Event::kWhitespace && !reading_arguments_) return;
  if (depth == 0) {
    if (c != '[') Fail("tool calls must be a JSON array");
    return;
  }
  if (depth == kArrayDepth) {
    if (event == Event::kOpen && c == '{') return;  // a call object begins
    if (StartsValue(event)) Fail("each tool call must be a JSON object");
    return;
  }
  if (reading_arguments_) {
    AppendArguments(std::string(1, c), events);
    if (event == Event::kClose && validator_.depth() == kCallDepth) reading_arguments_ = false;
    return;
  }
  if (depth == kCallDepth) OnCallLevel(event, c, events);
}

void Command4ActionParser::OnCallLevel(Event event, char c, std::vector<Command4Event>& events) {
  if (reading_name_) {
    name_json_ += c;
    if (event == Event::kStringEnd) {
      reading_name_ = false;
      BeginCall(events);
    }
    return;
  }
  switch (event) {
    case Event::kKeyStart:
      key_.clear();
      return;
    case Event::kKeyChar:
      key_ += c;
      return;
    case Event::kKeyEnd:
      awaiting_value_ = true;
      return;
    case Event::kClose:
      EndCall(events);
      return;
    default:
      break;
  }
  if (awaiting_value_ && StartsValue(event)) {
    awaiting_value_ = false;
    OnValueStart(event, c, events);
  }
}

void Command4ActionParser::OnValueStart(Event event, char c, std::vector<Command4Event>& events) {
  if (key_ == "tool_name") {
    if (event != Event::kStringStart) return Fail("tool_name must be a string");
    if (has_name_) return Fail("tool call has two tool_name keys");
    reading_name_ = true;
    name_json_.assign(1, '"');
  } else if (key_ == "parameters") {
    if (event != Event::kOpen || c != '{') return Fail("parameters must be a JSON object");
    if (has_arguments_) return Fail("tool call has two parameters keys");
    has_arguments_ = reading_arguments_ = true;
    AppendArguments("{", events);
  }
}

void Command4ActionParser::BeginCall(std::vector<Command4Event>& events) {
  Command4Event begin = Command4Event::Make(Command4Event::Kind::kToolCallBegin);
  try {
    begin.tool_name = nlohmann::json::parse(name_json_).get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return Fail("tool_name is not a valid JSON string");
  }
  if (begin.tool_name.empty()) return Fail("tool_name is empty");
  has_name_ = true;
  tool_index_ = next_tool_index_++;
  begin.tool_index = tool_index_;
  begin.tool_call_id = make_id_(tool_index_);
  AppendEvent(events, std::move(begin));
  AppendArguments("", events);
}

void Command4ActionParser::AppendArguments(const std::string& text,
                                           std::vector<Command4Event>& events) {
  pending_arguments_ += text;
  if (!has_name_) return;
  Command4Event delta = Command4Event::Make(Command4Event::Kind::kToolCallArguments);
  delta.tool_index = tool_index_;
  delta.text = std::move(pending_arguments_);
  pending_arguments_.clear();
  AppendEvent(events, std::move(delta));
}

void Command4ActionParser::EndCall(std::vector<Command4Event>& events) {
  if (!has_name_) return Fail("a tool call has no tool_name");
  if (!has_arguments_) AppendArguments("{}", events);
  reading_name_ = reading_arguments_ = awaiting_value_ = false;
  has_name_ = has_arguments_ = false;
  key_.clear();
  tool_index_ = -1;
}

void Command4ActionParser::Finish(std::vector<Command4Event>& events) {
  if (error_.empty() && !validator_.Finish()) {
    Fail(validator_.error().empty() ? "tool call JSON ends before it is complete"
                                    : "invalid tool call JSON: " + validator_.error());
  }
  if (error_.empty()) return;
  Command4Event error = Command4Event::Make(Command4Event::Kind::kError);
  error.text = error_;
  error.raw = raw_;
  events.push_back(std::move(error));
}

}  // namespace mkserve::chat

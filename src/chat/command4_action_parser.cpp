#include "chat/command4_action_parser.h"

#include <nlohmann/json.hpp>
#include <string_view>

namespace mkserve::chat {

namespace {

using Event = JsonStreamValidator::Event;

// Depths while reading: the array is depth 1, a call object 2, inside `parameters` 3 and more.
constexpr size_t kArrayDepth = 1;
constexpr size_t kCallDepth = 2;

constexpr std::string_view kWhitespace = " \t\r\n";

bool StartsValue(Event event) {
  return event == Event::kOpen || event == Event::kStringStart || event == Event::kScalar;
}

// Where a new call begins at the end of `text`: the position of the ',' or '[' before
// `{ "tool_call_id"` or `{ "tool_name"`, or npos.
size_t CallStartAtEnd(const std::string& text) {
  for (std::string_view key :
       {std::string_view("\"tool_call_id\""), std::string_view("\"tool_name\"")}) {
    if (text.size() < key.size() || text.compare(text.size() - key.size(), key.size(), key) != 0) {
      continue;
    }
    size_t brace = text.find_last_not_of(kWhitespace, text.size() - key.size() - 1);
    if (brace == std::string::npos || text[brace] != '{' || brace == 0) continue;
    size_t separator = text.find_last_not_of(kWhitespace, brace - 1);
    if (separator != std::string::npos && (text[separator] == ',' || text[separator] == '[')) {
      return separator;
    }
  }
  return std::string::npos;
}

// Unusable text without the whitespace and separator around it. The array's closing bracket
// goes too, unless the text is the whole block from its opening bracket on.
std::string TrimBroken(std::string text) {
  size_t first = text.find_first_not_of(kWhitespace);
  if (first != std::string::npos && text[first] == ',') ++first;
  first = first == std::string::npos ? text.size() : text.find_first_not_of(kWhitespace, first);
  text.erase(0, first == std::string::npos ? text.size() : first);
  size_t last = text.find_last_not_of(kWhitespace);
  text.erase(last == std::string::npos ? 0 : last + 1);
  if (!text.empty() && text.front() != '[' && text.back() == ']') {
    text.pop_back();
    last = text.find_last_not_of(kWhitespace);
    text.erase(last == std::string::npos ? 0 : last + 1);
  }
  return text;
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

void Command4ActionParser::Push(char c, std::vector<Command4Event>& events) {
  if (recovering_) {
    Recover(c, events);
  } else {
    Read(c, events);
  }
}

void Command4ActionParser::Read(char c, std::vector<Command4Event>& events) {
  // A lone call object without the array around it is read as a one-call array.
  if (validator_.depth() == 0 && !validator_.complete() && c == '{') validator_.Push('[');
  bool after_array = validator_.complete();
  size_t depth = validator_.depth();
  Event event = validator_.Push(c);
  if (event == Event::kError) {
    std::string text = in_call_      ? call_text_ + c
                       : after_array ? std::string(1, c)
                                     : array_text_ + c;
    return Fail("invalid tool call JSON: " + validator_.error(), std::move(text));
  }
  (in_call_ ? call_text_ : array_text_) += c;
  if (event == Event::kWhitespace && !reading_arguments_) return;
  if (depth == 0) {
    if (c != '[') Fail("tool calls must be a JSON array", array_text_);
    return;
  }
  if (depth == kArrayDepth) {
    if (event == Event::kOpen && c == '{') {
      in_call_ = true;
      call_text_ = "{";
      array_text_.clear();
    } else if (StartsValue(event)) {
      Fail("each tool call must be a JSON object", array_text_);
    }
    return;
  }
  if (reading_arguments_) {
    arguments_ += c;
    if (event == Event::kClose && validator_.depth() == kCallDepth) reading_arguments_ = false;
    return;
  }
  if (depth == kCallDepth) {
    if (event == Event::kClose) return EndCall(events);
    OnCallLevel(event, c);
  }
}

void Command4ActionParser::Fail(std::string why, std::string text) {
  recovering_ = true;
  broken_why_ = std::move(why);
  broken_ = std::move(text);
  array_text_.clear();
  ResetCall();
}

void Command4ActionParser::Recover(char c, std::vector<Command4Event>& events) {
  broken_ += c;
  if (c != '"') return;
  size_t separator = CallStartAtEnd(broken_);
  if (separator == std::string::npos) return;
  // A new call begins: what came before it comes back as content; read on with fresh JSON state.
  Reject(broken_why_, TrimBroken(broken_.substr(0, separator)), events);
  std::string replay = broken_.substr(separator);
  recovering_ = false;
  broken_.clear();
  validator_ = JsonStreamValidator();
  if (replay.front() == ',') {
    validator_.Push('[');
    replay.erase(0, 1);
  }
  for (char r : replay) Push(r, events);
}

void Command4ActionParser::OnCallLevel(Event event, char c) {
  if (reading_name_) {
    name_json_ += c;
    if (event != Event::kStringEnd) return;
    reading_name_ = false;
    try {
      name_ = nlohmann::json::parse(name_json_).get<std::string>();
    } catch (const nlohmann::json::exception&) {
      call_error_ = "tool_name is not a valid JSON string";
    }
    if (name_.empty() && call_error_.empty()) call_error_ = "tool_name is empty";
    has_name_ = true;
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
    default:
      break;
  }
  if (awaiting_value_ && StartsValue(event)) {
    awaiting_value_ = false;
    OnValueStart(event, c);
  }
}

void Command4ActionParser::OnValueStart(Event event, char c) {
  if (key_ == "tool_name") {
    if (event != Event::kStringStart) {
      call_error_ = "tool_name must be a string";
    } else if (has_name_) {
      call_error_ = "tool call has two tool_name keys";
    } else {
      reading_name_ = true;
      name_json_.assign(1, '"');
    }
  } else if (key_ == "parameters") {
    if (event != Event::kOpen || c != '{') {
      call_error_ = "parameters must be a JSON object";
    } else if (has_arguments_) {
      call_error_ = "tool call has two parameters keys";
    } else {
      has_arguments_ = reading_arguments_ = true;
      arguments_ = "{";
    }
  }
}

void Command4ActionParser::EndCall(std::vector<Command4Event>& events) {
  std::string why = call_error_;
  if (why.empty() && !has_name_) why = "a tool call has no tool_name";
  if (why.empty() && allowed_tools_ && !allowed_tools_->count(name_)) {
    why = "the model called '" + name_ + "', a tool the request did not offer";
  }
  if (!why.empty()) {
    Reject(why, call_text_, events);
  } else {
    Command4Event begin = Command4Event::Make(Command4Event::Kind::kToolCallBegin);
    begin.tool_index = next_tool_index_++;
    begin.tool_call_id = make_id_(begin.tool_index);
    begin.tool_name = name_;
    Command4Event arguments = Command4Event::Make(Command4Event::Kind::kToolCallArguments,
                                                  has_arguments_ ? arguments_ : "{}");
    arguments.tool_index = begin.tool_index;
    events.push_back(std::move(begin));
    AppendEvent(events, std::move(arguments));
  }
  ResetCall();
}

void Command4ActionParser::Reject(const std::string& why, const std::string& text,
                                  std::vector<Command4Event>& events) const {
  AppendEvent(events, Command4Event::Make(Command4Event::Kind::kContent, text));
  events.push_back(Command4Event::Make(Command4Event::Kind::kError, why));
}

void Command4ActionParser::ResetCall() {
  in_call_ = awaiting_value_ = reading_name_ = reading_arguments_ = false;
  has_name_ = has_arguments_ = false;
  call_text_.clear();
  call_error_.clear();
  key_.clear();
  name_json_.clear();
  name_.clear();
  arguments_.clear();
}

void Command4ActionParser::Finish(std::vector<Command4Event>& events) {
  if (recovering_) {
    Reject(broken_why_, TrimBroken(broken_), events);
  } else if (in_call_) {
    Reject("tool call JSON ends before it is complete", call_text_, events);
  }
  recovering_ = false;
  ResetCall();
}

}  // namespace mkserve::chat

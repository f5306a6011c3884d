#include "chat/command4_parser.h"

#include <random>

#include "chat/command4_action_parser.h"

namespace mkserve::chat {

namespace {

constexpr std::string_view kStartThinking = "<|START_THINKING|>";
constexpr std::string_view kEndThinking = "<|END_THINKING|>";
constexpr std::string_view kStartText = "<|START_TEXT|>";
constexpr std::string_view kEndText = "<|END_TEXT|>";
constexpr std::string_view kStartResponse = "<|START_RESPONSE|>";
constexpr std::string_view kEndResponse = "<|END_RESPONSE|>";
constexpr std::string_view kStartAction = "<|START_ACTION|>";
constexpr std::string_view kEndAction = "<|END_ACTION|>";
constexpr std::string_view kEndOfTurn = "<|END_OF_TURN_TOKEN|>";
constexpr std::string_view kMarkers[] = {kStartThinking, kEndThinking,   kStartText,
                                         kEndText,       kStartResponse, kEndResponse,
                                         kStartAction,   kEndAction,     kEndOfTurn};

// OpenAI ids look like "call_" plus random alphanumerics.
constexpr int kRandomIdLength = 24;

std::string RandomToolCallId(int) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 generator{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, kAlphabet.size() - 1);
  std::string id = "call_";
  for (int i = 0; i < kRandomIdLength; ++i) id += kAlphabet[pick(generator)];
  return id;
}

}  // namespace

std::span<const std::string_view> Command4Markers() { return kMarkers; }

Command4Parser::Command4Parser(Command4ParserOptions options) : options_(std::move(options)) {
  if (!options_.make_tool_call_id) options_.make_tool_call_id = RandomToolCallId;
  switch (options_.start) {
    case Command4Start::kReasoning:
      mode_ = Mode::kReasoning;
      break;
    case Command4Start::kAnswer:
      mode_ = Mode::kAnswer;
      holding_ = true;
      break;
    case Command4Start::kText:
      mode_ = Mode::kText;
      break;
  }
}

Command4Parser::~Command4Parser() = default;
Command4Parser::Command4Parser(Command4Parser&&) noexcept = default;
Command4Parser& Command4Parser::operator=(Command4Parser&&) noexcept = default;

std::vector<Command4Event> Command4Parser::Feed(std::string_view delta) {
  std::vector<Command4Event> events;
  if (finished_) return events;
  buffer_.append(delta);
  Process(false, events);
  return events;
}

std::vector<Command4Event> Command4Parser::Finish() {
  std::vector<Command4Event> events;
  if (finished_) return events;
  Process(true, events);
  ReleaseHeld("", events);
  if (mode_ == Mode::kAction) CloseAction(events);
  finished_ = true;
  events.push_back(Command4Event::Make(Command4Event::Kind::kFinish));
  return events;
}

void Command4Parser::Process(bool at_end, std::vector<Command4Event>& events) {
  size_t pos = 0;
  while (pos < buffer_.size()) {
    size_t next = mode_ == Mode::kDone     ? buffer_.size()
                  : mode_ == Mode::kAction ? ProcessAction(pos, at_end, events)
                                           : ProcessText(pos, at_end, events);
    if (next == pos) break;  // waiting for more text to decide a marker
    pos = next;
  }
  buffer_.erase(0, pos);
}

size_t Command4Parser::MatchMarker(size_t pos, bool at_end, std::string_view* marker) const {
  std::string_view rest = std::string_view(buffer_).substr(pos);
  bool undecided = false;
  for (std::string_view candidate : kMarkers) {
    if (rest.substr(0, candidate.size()) == candidate) {
      *marker = candidate;
      return candidate.size();
    }
    undecided =
        undecided || (rest.size() < candidate.size() && candidate.substr(0, rest.size()) == rest);
  }
  return undecided && !at_end ? std::string_view::npos : 0;
}

size_t Command4Parser::ProcessText(size_t pos, bool at_end, std::vector<Command4Event>& events) {
  size_t open = buffer_.find('<', pos);
  if (open == std::string::npos) open = buffer_.size();
  if (open > pos) {
    EmitText(std::string_view(buffer_).substr(pos, open - pos), events);
    return open;
  }
  std::string_view marker;
  size_t length = MatchMarker(pos, at_end, &marker);
  if (length == std::string_view::npos) return pos;
  if (length == 0) {
    EmitText("<", events);
    return pos + 1;
  }
  OnMarker(marker, events);
  return pos + length;
}

size_t Command4Parser::ProcessAction(size_t pos, bool at_end, std::vector<Command4Event>& events) {
  if (buffer_[pos] == '<' && !action_->in_string()) {
    std::string_view marker;
    size_t length = MatchMarker(pos, at_end, &marker);
    if (length == std::string_view::npos) return pos;
    if (length > 0 && (marker == kEndAction || marker == kEndOfTurn)) {
      OnMarker(marker, events);
      return pos + length;
    }
  }
  action_->Push(buffer_[pos], events);  // other markers outside strings are JSON errors
  return pos + 1;
}

void Command4Parser::EmitText(std::string_view text, std::vector<Command4Event>& events) {
  if (mode_ == Mode::kReasoning) {
    AppendEvent(events, Command4Event::Make(Command4Event::Kind::kReasoning, std::string(text)));
    return;
  }
  if (holding_) {
    held_.append(text);
    return;
  }
  if (mode_ == Mode::kAnswer) {
    // Outside blocks, whitespace counts only when text follows it: trailing whitespace is held
    // (whatever the delta boundaries) and dropped at the next marker or the end.
    answer_whitespace_.append(text);
    size_t last = answer_whitespace_.find_last_not_of(" \t\r\n");
    if (last == std::string::npos) return;
    AppendEvent(events, Command4Event::Make(Command4Event::Kind::kContent,
                                            answer_whitespace_.substr(0, last + 1)));
    answer_whitespace_.erase(0, last + 1);
    return;
  }
  AppendEvent(events, Command4Event::Make(Command4Event::Kind::kContent, std::string(text)));
}

void Command4Parser::ReleaseHeld(std::string_view marker, std::vector<Command4Event>& events) {
  if (!holding_) return;
  holding_ = false;
  if (marker == kEndThinking) {
    AppendEvent(events, Command4Event::Make(Command4Event::Kind::kReasoning, std::move(held_)));
  } else {
    EmitText(held_, events);
  }
  held_.clear();
}

void Command4Parser::OnMarker(std::string_view marker, std::vector<Command4Event>& events) {
  ReleaseHeld(marker, events);
  answer_whitespace_.clear();
  if (mode_ == Mode::kAction) {  // only END_ACTION and END_OF_TURN get here
    CloseAction(events);
    mode_ = marker == kEndOfTurn ? Mode::kDone : Mode::kAnswer;
    return;
  }
  if (marker == kEndOfTurn) {
    mode_ = Mode::kDone;
  } else if (marker == kStartAction && options_.allowed_tools && options_.allowed_tools->empty()) {
    mode_ = Mode::kText;  // no tool may be called: the block's body is plain text
  } else if (marker == kStartAction) {
    action_ = std::make_unique<Command4ActionParser>(num_tool_calls_, options_.make_tool_call_id,
                                                     options_.allowed_tools);
    mode_ = Mode::kAction;
  } else if (marker == kStartText || marker == kStartResponse) {
    mode_ = Mode::kText;
  } else if (marker == kStartThinking) {
    mode_ = Mode::kReasoning;
  } else {  // END_THINKING, END_TEXT, END_RESPONSE; END_ACTION outside a parsed block
    mode_ = Mode::kAnswer;
  }
}

void Command4Parser::CloseAction(std::vector<Command4Event>& events) {
  action_->Finish(events);
  num_tool_calls_ = action_->next_tool_index();
  action_.reset();
}

Command4Output Command4Parser::ParseAll(std::string_view text, Command4ParserOptions options) {
  Command4Parser parser(std::move(options));
  std::vector<Command4Event> events = parser.Feed(text);
  for (Command4Event& event : parser.Finish()) events.push_back(std::move(event));
  Command4Output output;
  for (Command4Event& event : events) {
    switch (event.kind) {
      case Command4Event::Kind::kReasoning:
        output.reasoning += event.text;
        break;
      case Command4Event::Kind::kContent:
        output.content += event.text;
        break;
      case Command4Event::Kind::kToolCallBegin:
        output.tool_calls.push_back({event.tool_call_id, event.tool_name, ""});
        break;
      case Command4Event::Kind::kToolCallArguments:
        output.tool_calls.at(event.tool_index).arguments += event.text;
        break;
      case Command4Event::Kind::kError:
        output.errors.push_back(event.text);
        break;
      case Command4Event::Kind::kFinish:
        break;
    }
  }
  return output;
}

}  // namespace mkserve::chat

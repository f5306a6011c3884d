// Turns North Mini Code's generated text (Cohere Command-4 format) into OpenAI-shaped pieces:
// reasoning, content and tool calls, streaming.
//
//   Command4Parser parser({.start = Command4Start::kReasoning});
//   for each detokenized delta:  for (auto& e : parser.Feed(delta)) Send(e);
//   at the end of generation:    for (auto& e : parser.Finish()) Send(e);
//
// The output grammar: [reasoning] <|END_THINKING|> then <|START_TEXT|>answer<|END_TEXT|> or
// <|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {...}},
// ...]<|END_ACTION|>, then <|END_OF_TURN_TOKEN|>. <|START_RESPONSE|>/<|END_RESPONSE|> are accepted
// as aliases of START/END_TEXT. Markers may be split across deltas: text that could still be the
// start of a marker is held back until it is decided, so nothing is ever retracted. Inside an
// action block markers count only outside JSON strings. Whatever the deltas' boundaries, the
// concatenated events are the same. Text after <|END_OF_TURN_TOKEN|> is ignored.
//
// Tool calls follow Command4ActionParser's rules (whole, valid, offered calls only; the rest is
// content). With no tool allowed, an action block is not parsed at all: its body is content.
// With reasoning off the model still sometimes thinks aloud and closes with <|END_THINKING|>:
// text before the first marker is held until that marker decides whether it was reasoning.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/command4_events.h"

namespace mkserve::chat {

class Command4ActionParser;

// The markers the parser reads (their text must reach it, special tokens or not).
std::span<const std::string_view> Command4Markers();

// Where the prompt left the model.
enum class Command4Start {
  kReasoning,  // the prompt ended with <|START_THINKING|> (reasoning on)
  kAnswer,     // after <|START_THINKING|><|END_THINKING|> (reasoning off)
  kText,       // inside <|START_TEXT|>: an assistant prefill being continued
};

struct Command4ParserOptions {
  Command4Start start = Command4Start::kReasoning;
  // The tool names a call may use; nullopt: any. Empty: no tool calls at all.
  std::optional<std::set<std::string>> allowed_tools;
  // OpenAI id of tool call `index` (0, 1, ... over the whole output). Default: "call_" plus
  // 24 random letters and digits.
  std::function<std::string(int tool_index)> make_tool_call_id;
};

// The whole output at once (ParseAll).
struct Command4ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of the `parameters` object, as generated
};
struct Command4Output {
  std::string reasoning;
  std::string content;
  std::vector<Command4ToolCall> tool_calls;
  std::vector<std::string> errors;  // why parts of action blocks came back as content
};

class Command4Parser {
 public:
  explicit Command4Parser(Command4ParserOptions options = {});
  ~Command4Parser();
  Command4Parser(Command4Parser&&) noexcept;
  Command4Parser& operator=(Command4Parser&&) noexcept;

  // Events decided by this delta (possibly none).
  std::vector<Command4Event> Feed(std::string_view delta);
  // Flushes held-back text, closes an open action block (an incomplete call comes back as
  // content, with an error event) and ends with a kFinish event. Feed after Finish is ignored.
  std::vector<Command4Event> Finish();

  // Runs the same machine over a complete output.
  static Command4Output ParseAll(std::string_view text, Command4ParserOptions options = {});

  int num_tool_calls() const { return num_tool_calls_; }
  // Reasoning off and no marker seen yet: the text so far waits for one to say what it is.
  bool holding() const { return holding_; }

 private:
  enum class Mode { kReasoning, kAnswer, kText, kAction, kDone };

  void Process(bool at_end, std::vector<Command4Event>& events);
  size_t ProcessText(size_t pos, bool at_end, std::vector<Command4Event>& events);
  size_t ProcessAction(size_t pos, bool at_end, std::vector<Command4Event>& events);
  // Returns the marker length at `pos`, 0 for no marker, or npos when undecided yet.
  size_t MatchMarker(size_t pos, bool at_end, std::string_view* marker) const;
  void OnMarker(std::string_view marker, std::vector<Command4Event>& events);
  void EmitText(std::string_view text, std::vector<Command4Event>& events);
  // Text held before the first marker (reasoning off): reasoning if `marker` is END_THINKING.
  void ReleaseHeld(std::string_view marker, std::vector<Command4Event>& events);
  void CloseAction(std::vector<Command4Event>& events);

  Command4ParserOptions options_;
  Mode mode_;
  std::string buffer_;
  std::string answer_whitespace_;  // whitespace between blocks, kept only if text follows
  bool holding_ = false;           // reasoning off and no marker seen yet
  std::string held_;
  std::unique_ptr<Command4ActionParser> action_;
  int num_tool_calls_ = 0;
  bool finished_ = false;
};

}  // namespace mkserve::chat

// OutputParser: splits a chat model's streamed text into reasoning, answer content and tool calls.
// The server feeds it the engine's text deltas in order; each call returns what became certain.
// Command-4 models use the src/chat parser (command4_output_parser.cpp); other templates get
// PlainOutputParser, where everything is content.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mkserve::server {

// One tool call's piece of a delta. The first piece of a call carries its name; later pieces
// append argument text. Concatenating a call's `arguments` pieces gives valid JSON.
struct ToolCallDelta {
  int32_t index = 0;  // call number within the message
  std::string id;     // first piece only; empty: the server makes one
  std::string name;   // first piece only
  std::string arguments;
};

struct ParsedDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;

  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
};

class OutputParser {
 public:
  virtual ~OutputParser() = default;
  virtual ParsedDelta Feed(std::string_view text) = 0;
  // End of generation: releases anything held back (e.g. an unterminated block).
  virtual ParsedDelta Finish() = 0;
  // Whether the text fed so far is held until a later marker says whether it is reasoning or
  // answer (so the tokens' logprobs wait with it).
  virtual bool holding() const { return false; }
  // The marker texts the parser reads as structure: tokens that write one write no answer text.
  virtual std::span<const std::string_view> markers() const { return {}; }
};

class PlainOutputParser : public OutputParser {
 public:
  ParsedDelta Feed(std::string_view text) override { return {"", std::string(text), {}}; }
  ParsedDelta Finish() override { return {}; }
};

}  // namespace mkserve::server

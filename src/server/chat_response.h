// Builds /v1/chat/completions output from engine events: per choice, the text goes through an
// OutputParser and comes out as reasoning_content, content and tool_calls, either as SSE chunks
// (chat.completion.chunk) or as one chat.completion object.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/generation_run.h"
#include "server/logprobs_json.h"
#include "server/output_parser.h"
#include "server/response_meta.h"

namespace mkserve::server {

struct ChatOutputOptions {
  std::function<std::unique_ptr<OutputParser>()> make_parser;
  LogprobNames logprob_names;
  bool logprobs = false;
  bool include_usage = false;  // streaming: `usage: null` on chunks, then one usage chunk
};

class ChatChoices {
 public:
  ChatChoices(int32_t num_choices, ResponseMeta meta, ChatOutputOptions options);

  // Streaming. The role chunk of every choice; then per event zero or more SSE events; then the
  // usage chunk (when asked for) and [DONE].
  std::string StreamStart() const;
  std::string StreamEvent(const ChoiceEvent& event);
  std::string StreamEnd(const Usage& usage) const;

  // Non-streaming.
  void Accumulate(const ChoiceEvent& event);
  Json FinalResponse(const Usage& usage) const;

  // True when any choice called a tool.
  bool made_tool_calls() const;

 private:
  struct ToolCallState {
    std::string id;
    std::string name;
    std::string arguments;
  };
  struct Choice {
    std::unique_ptr<OutputParser> parser;
    std::string reasoning;
    std::string content;
    std::vector<ToolCallState> tool_calls;
    Json logprobs = Json::array();
    std::string finish_reason;  // empty while running
  };

  // Applies a parsed delta to the choice and returns the chunk `delta` object for it.
  Json ApplyDelta(int32_t index, const ParsedDelta& delta);
  Json Chunk(int32_t index, Json delta, Json logprobs, Json finish_reason) const;
  Json LogprobsOf(const TokensEvent& tokens) const;

  ResponseMeta meta_;
  ChatOutputOptions options_;
  std::vector<Choice> choices_;
};

}  // namespace mkserve::server

#include "server/output_parser_factory.h"

#include "server/command4_output_parser.h"
#include "server/single_tool_call_parser.h"

namespace mkserve::server {

bool IsCommand4Template(const chat::ChatTemplate& chat_template) {
  const std::string& source = chat_template.source();
  return source.find("<|START_ACTION|>") != std::string::npos &&
         source.find("<|START_TEXT|>") != std::string::npos;
}

namespace {

std::set<std::string> AllowedTools(const ChatRequest& request) {
  std::set<std::string> names;
  if (request.tool_choice.mode == ToolChoice::Mode::kNone) return names;
  if (request.tool_choice.mode == ToolChoice::Mode::kNamed) return {request.tool_choice.name};
  for (const ToolDefinition& tool : request.tools) names.insert(tool.name);
  return names;
}

chat::Command4Start StartOf(const ChatPrompt& prompt) {
  if (prompt.prefill) return chat::Command4Start::kText;
  return prompt.thinking ? chat::Command4Start::kReasoning : chat::Command4Start::kAnswer;
}

}  // namespace

std::function<std::unique_ptr<OutputParser>()> MakeOutputParserFactory(const ServedModel& model,
                                                                       const ChatRequest& request,
                                                                       const ChatPrompt& prompt) {
  if (!model.command4_format) {
    return [] { return std::make_unique<PlainOutputParser>(); };
  }
  chat::Command4ParserOptions options;
  options.start = StartOf(prompt);
  options.allowed_tools = AllowedTools(request);
  bool parallel = request.parallel_tool_calls;
  return [options, parallel]() -> std::unique_ptr<OutputParser> {
    auto parser = std::make_unique<Command4OutputParser>(options);
    if (parallel) return parser;
    return std::make_unique<SingleToolCallParser>(std::move(parser));
  };
}

}  // namespace mkserve::server

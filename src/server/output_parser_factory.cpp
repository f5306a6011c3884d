#include "server/output_parser_factory.h"

#include "server/command4_output_parser.h"

namespace mkserve::server {

bool IsCommand4Template(const chat::ChatTemplate& chat_template) {
  const std::string& source = chat_template.source();
  return source.find("<|START_ACTION|>") != std::string::npos &&
         source.find("<|START_TEXT|>") != std::string::npos;
}

std::function<std::unique_ptr<OutputParser>()> MakeOutputParserFactory(const ServedModel& model,
                                                                       bool thinking) {
  if (!model.chat_template || !IsCommand4Template(*model.chat_template)) {
    return [] { return std::make_unique<PlainOutputParser>(); };
  }
  return [thinking]() -> std::unique_ptr<OutputParser> {
    chat::Command4ParserOptions options;
    options.starts_in_reasoning = thinking;
    return std::make_unique<Command4OutputParser>(std::move(options));
  };
}

}  // namespace mkserve::server

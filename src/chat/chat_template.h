// A Hugging Face chat template (Jinja), rendered the way transformers' apply_chat_template
// renders it: jinja2 with trim_blocks and lstrip_blocks, transformers' tojson, and the globals
// raise_exception and strftime_now.
//
// Usage:
//   ChatTemplate chat_template = ChatTemplate::Parse(tokenizer_config["chat_template"]);
//   std::string prompt = chat_template.Render({
//       {"messages", messages},              // OpenAI shape: role, content, tool_calls, ...
//       {"tools", tools},                    // list of {"type":"function","function":{...}}
//       {"add_generation_prompt", true},
//       {"bos_token", "<BOS_TOKEN>"}, {"eos_token", "<|END_OF_TURN_TOKEN|>"},
//       {"enable_thinking", false}});        // any extra kwargs the template reads
//
// Pass the request's JSON as nlohmann::ordered_json so object keys keep the client's order (as
// Python dicts do); tool schemas are printed with tojson and their key order is visible.
// Tool-call `arguments` are printed by most templates with tojson, so pass them as JSON objects
// (parsed), not as the OpenAI JSON string.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace mkserve::chat {

class ChatTemplate {
 public:
  // Parses the template once; throws jinja::TemplateError (an mkserve::Error) naming the line
  // of a syntax error or an unsupported construct.
  static ChatTemplate Parse(std::string source);

  // Renders with `context` (a JSON object) as the template's variables. Like transformers,
  // `tools` and `documents` default to null and `add_generation_prompt` to false. Throws
  // jinja::TemplateError naming the line on a render error, including raise_exception().
  std::string Render(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return *source_; }

 private:
  struct Parsed;
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace mkserve::chat

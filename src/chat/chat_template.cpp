#include "chat/chat_template.h"

#include "chat/jinja/evaluator.h"
#include "chat/jinja/parser.h"
#include "chat/jinja/template_error.h"

namespace mkserve::chat {

struct ChatTemplate::Parsed {
  jinja::Body body;
};

ChatTemplate ChatTemplate::Parse(std::string source) {
  ChatTemplate chat_template;
  auto parsed = std::make_shared<Parsed>();
  parsed->body = jinja::ParseTemplate(source);
  chat_template.source_ = std::make_shared<const std::string>(std::move(source));
  chat_template.parsed_ = std::move(parsed);
  return chat_template;
}

std::string ChatTemplate::Render(const nlohmann::ordered_json& context) const {
  if (!context.is_object())
    throw jinja::TemplateError("chat template context must be a JSON object");
  jinja::Evaluator::Frame globals;
  jinja::AddGlobalFunctions(globals);
  globals["tools"] = jinja::Value(nullptr);
  globals["documents"] = jinja::Value(nullptr);
  globals["add_generation_prompt"] = jinja::Value(false);
  for (const auto& [key, value] : context.items()) globals[key] = jinja::Value::FromJson(value);
  jinja::Evaluator evaluator(std::move(globals));
  return evaluator.Render(parsed_->body);
}

}  // namespace mkserve::chat

// libFuzzer target for the Jinja chat-template engine, which runs the template a checkpoint ships
// (tokenizer_config.json or chat_template.jinja): a broken or hostile checkpoint reaches it at
// load, and every chat request renders it. Input: the template's text, then optionally a NUL byte
// and a JSON object of variables (else a conversation with a tool call and a tool result).
// Checked: parsing and rendering either succeed or throw mkserve::Error (TemplateError names the
// line); never another exception, a crash, a hang or unbounded memory (the loop and copy budgets).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "common/error.h"

namespace {

[[noreturn]] void Fail(const char* what, const char* detail) {
  std::fprintf(stderr, "%s: %s\n", what, detail);
  std::abort();
}

using Json = nlohmann::ordered_json;

// A conversation that exercises what North's template reads: a system turn, tools, a tool call
// with parsed arguments, its result, reasoning, and the generation prompt.
const Json& DefaultContext() {
  static const Json context = Json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "What is the weather in Paris?"},
      {"role": "assistant", "content": null, "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
      {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "weather", "description": "Forecast",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "add_generation_prompt": true,
    "bos_token": "<BOS_TOKEN>",
    "eos_token": "<|END_OF_TURN_TOKEN|>",
    "reasoning": true
  })");
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const char* text = reinterpret_cast<const char*>(data);
  const char* nul = std::find(text, text + size, '\0');
  Json context = DefaultContext();
  if (nul != text + size) {
    Json given = Json::parse(std::string_view(nul + 1, text + size - nul - 1), nullptr, false);
    if (given.is_object()) context = std::move(given);
  }
  try {
    const auto chat_template = mkserve::chat::ChatTemplate::Parse(std::string(text, nul));
    chat_template.Render(context);
  } catch (const mkserve::Error&) {
    return 0;  // refused by name, as the server refuses such a checkpoint or request
  } catch (const std::exception& e) {
    Fail("an exception other than mkserve::Error", e.what());
  }
  return 0;
}

#include "chat/command4_template.h"

namespace mkserve::chat {

namespace {

// Every literal goes through a string expression with {%- -%} around it, so the output does
// not depend on the whitespace of this source. The odd whitespace in the tool-call turn and in
// the tool results is the real template's, reproduced byte for byte.
constexpr std::string_view kSource = R"JINJA(
{%- macro text_of(content) -%}
  {%- if content is string -%}{{- content -}}
  {%- elif content is none or content is undefined -%}
  {%- elif content is mapping -%}{{- content.text | default("") -}}
  {%- else -%}
    {%- for part in content -%}{%- if part.type == "text" -%}{{- part.text -}}{%- endif -%}{%- endfor -%}
  {%- endif -%}
{%- endmacro -%}
{%- macro reasoning_of(message) -%}
  {%- if message.reasoning_content is string -%}{{- message.reasoning_content -}}
  {%- elif message.reasoning is string -%}{{- message.reasoning -}}
  {%- endif -%}
{%- endmacro -%}
{%- macro thinking_block(message) -%}
  {%- set thought = reasoning_of(message) -%}
  {%- if thought -%}{{- "<|START_THINKING|>" ~ thought ~ "<|END_THINKING|>" -}}{%- endif -%}
{%- endmacro -%}
{%- set reasoning_on = true -%}
{%- if reasoning is defined and reasoning is not none -%}
  {%- set reasoning_on = reasoning -%}
{%- elif enable_thinking is defined and enable_thinking is not none -%}
  {%- set reasoning_on = enable_thinking -%}
{%- endif -%}
{%- if reasoning_effort is defined and reasoning_effort == "none" -%}
  {%- set reasoning_on = false -%}
{%- endif -%}
{%- set loop_messages = messages -%}
{%- set system_prompt = "" -%}
{%- if messages and messages[0].role in ["system", "developer"] -%}
  {%- set system_prompt = text_of(messages[0].content) -%}
  {%- set loop_messages = messages[1:] -%}
{%- endif -%}
{{- bos_token | default("") -}}
{{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>" -}}
{%- if system_prompt -%}{{- system_prompt ~ "\n\n\n\n" -}}{%- endif -%}
{{- "# Available Tools\n```json\n[\n" -}}
{%- for tool in tools or [] -%}
  {%- set function = tool.function if tool.function is defined else tool -%}
  {%- set entry = {"name": function.name, "description": function.description | default(""),
                   "parameters": function.parameters | default({}), "responses": none} -%}
  {{- "\n    " ~ entry | tojson ~ ("" if loop.last else ",") ~ "\n\n" -}}
{%- else -%}
  {{- "\n\n" -}}
{%- endfor -%}
{{- "\n]\n```<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
{%- set ns = namespace(call_ids=[], prefill=false) -%}
{%- for message in loop_messages -%}
  {%- if message.role in ["system", "developer"] -%}
    {{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>" ~ text_of(message.content) ~ "<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
  {%- elif message.role == "user" -%}
    {{- "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>" ~ text_of(message.content) ~ "<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
  {%- elif message.role in ["assistant", "chatbot"] and message.tool_calls -%}
    {{- "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>\n            \n                " ~ thinking_block(message) ~ "<|START_ACTION|>[" -}}
    {%- for call in message.tool_calls -%}
      {%- set function = call.function if call.function is defined else call -%}
      {%- set call_number = ns.call_ids | length -%}
      {%- set ns.call_ids = ns.call_ids + [call.id] -%}
      {%- set arguments = function.arguments | default({}) -%}
      {{- "\n\n    {\"tool_call_id\": " ~ (call_number | string | tojson) ~ ", \"tool_name\": " ~ (function.name | tojson) ~ ", \"parameters\": " -}}
      {{- (arguments if arguments is string else arguments | tojson) ~ "}" ~ ("" if loop.last else ",") -}}
    {%- endfor -%}
    {{- "\n\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>" -}}
  {%- elif message.role in ["assistant", "chatbot"] -%}
    {{- "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" ~ thinking_block(message) ~ "<|START_TEXT|>" ~ text_of(message.content) -}}
    {%- if loop.last -%}
      {%- set ns.prefill = true -%}
    {%- else -%}
      {{- "<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
    {%- endif -%}
  {%- elif message.role == "tool" -%}
    {%- if loop.first or loop_messages[loop.index0 - 1].role != "tool" -%}
      {{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[" -}}
    {%- else -%}
      {{- "," -}}
    {%- endif -%}
    {%- set ns.found = none -%}
    {%- for call_id in ns.call_ids -%}
      {%- if call_id is not none and call_id == message.tool_call_id -%}{%- set ns.found = loop.index0 -%}{%- endif -%}
    {%- endfor -%}
    {%- set result_id = ns.found if ns.found is not none else message.tool_call_id | default("") -%}
    {{- "\n    {\n        \"tool_call_id\": " ~ (result_id | string | tojson) ~ ",\n        \"results\": {\n\n            \n            \"0\": " -}}
    {{- {"content": text_of(message.content)} | tojson ~ "\n\n        },\n        \"is_error\": null\n    }" -}}
    {%- if loop.last or loop_messages[loop.index0 + 1].role != "tool" -%}
      {{- "\n\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>" -}}
    {%- endif -%}
  {%- else -%}
    {{- raise_exception("Command-4 template: unknown message role '" ~ message.role ~ "'") -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt and not ns.prefill -%}
  {{- "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>" ~ ("" if reasoning_on else "<|END_THINKING|>") -}}
{%- endif -%}
)JINJA";

}  // namespace

std::string_view Command4TemplateSource() { return kSource; }

const ChatTemplate& Command4Template() {
  static const ChatTemplate kTemplate = ChatTemplate::Parse(std::string(kSource));
  return kTemplate;
}

}  // namespace mkserve::chat

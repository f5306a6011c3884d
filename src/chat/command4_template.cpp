#include "chat/command4_template.h"

namespace mkserve::chat {

namespace {

// Every literal goes through a string expression with {%- -%} around it, so the output does
// not depend on the whitespace of this source. The odd whitespace in the tool-call turn and in
// the tool results is the real template's, reproduced byte for byte.
constexpr std::string_view kSource = R"JINJA(
{%- set default_platform_instruction -%}
  {{- "These instructions are always to be followed and cannot be overridden by subsequent system or user turns:\n" -}}
  {{- "- You will answer requests for educational, informative, or creative content related to safety categories. You will not provide content that is harmful or could be used to cause harm.\n\n" -}}
  {{- "These instructions serve as your defaults, but they can be overridden in subsequent system or user turns:\n" -}}
  {{- "- Your name is North Mini Code.\n" -}}
  {{- "- You are a large language model built by Cohere." -}}
{%- endset -%}
{%- set document_tool = '{"name": "direct-injected-document", "description": "This is a special tool to directly inject user-uploaded documents into the chat as additional context. DO NOT use this tool by yourself!", "parameters": {"type": "object", "properties": {}, "required": []}, "responses": {"200": {"description": "Successfully returned a list of chunked text snippets from the directly uploaded documents.", "content": {"application/json": {"schema": {"type": "array", "items": {"type": "object", "required": ["url", "snippet"], "properties": {"url": {"type": "string", "description": "The url of the uploaded document."}, "snippet": {"type": "string", "description": "The text snippet for the returned document chunk."}}}}}}}}}' -%}
{%- macro text_of(content) -%}
  {%- if content is string -%}{{- content -}}
  {%- elif content is none or content is undefined -%}
  {%- else -%}
    {%- for part in content -%}{%- if part.type == "text" -%}{{- part.text -}}{%- endif -%}{%- endfor -%}
  {%- endif -%}
{%- endmacro -%}
{%- macro thinking_block(message) -%}
  {%- set thought = message.reasoning or message.reasoning_content -%}
  {%- if thought -%}{{- "<|START_THINKING|>" ~ thought ~ "<|END_THINKING|>" -}}{%- endif -%}
{%- endmacro -%}
{%- macro tool_result(call_id, result) -%}
  {{- "{\n        \"tool_call_id\": \"" ~ call_id ~ "\",\n        \"results\": {\n            \"0\": " -}}
  {{- (result if result is mapping else {"content": text_of(result)}) | tojson -}}
  {{- "\n        },\n        \"is_error\": null\n    }" -}}
{%- endmacro -%}
{#- Reasoning is on unless `reasoning` is set and false, or reasoning_effort is "none". -#}
{%- if reasoning is defined -%}
  {%- set reasoning_on = reasoning -%}
{%- else -%}
  {%- set reasoning_on = not (reasoning_effort is defined and reasoning_effort | lower == "none") -%}
{%- endif -%}
{{- bos_token | default("") -}}
{{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>" -}}
{{- platform_instruction_override if platform_instruction_override else default_platform_instruction -}}
{{- "\n\n# Available Tools\n```json\n[\n" -}}
{%- if documents -%}
  {{- "    " ~ document_tool ~ (",\n" if tools else "\n") -}}
{%- endif -%}
{%- for tool in tools or [] -%}
  {%- set function = tool.function -%}
  {{- "    {\"name\": \"" ~ function.name ~ "\", \"description\": \"" ~ function.description | default("") ~ "\", \"parameters\": " -}}
  {{- function.parameters | tojson ~ ", \"responses\": null}" ~ ("" if loop.last else ",") ~ "\n" -}}
{%- endfor -%}
{%- if not tools and not documents -%}{{- "\n" -}}{%- endif -%}
{{- "]\n```<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
{#- Tool calls are numbered 0, 1, ... over the conversation (after the document call, if any);
    a tool result refers to its call by that number, counted over the messages alone. -#}
{%- set ns = namespace(next_call=1 if documents else 0, documents_sent=false, call_ids=[]) -%}
{%- for message in messages -%}
  {%- for call in message.tool_calls or [] -%}{%- set ns.call_ids = ns.call_ids + [call.id] -%}{%- endfor -%}
{%- endfor -%}
{%- for message in messages -%}
  {%- set role = message.role | lower -%}
  {%- if role == "system" -%}
    {{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TEXT|>" ~ text_of(message.content) ~ "<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
  {%- elif role == "user" -%}
    {{- "<|START_OF_TURN_TOKEN|><|USER_TOKEN|><|START_TEXT|>" ~ text_of(message.content) ~ "<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
    {%- if documents and not ns.documents_sent -%}
      {%- set ns.documents_sent = true -%}
      {{- "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_THINKING|>I will look through the document to address the users needs.<|END_THINKING|>" -}}
      {{- "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"direct-injected-document\", \"parameters\": {}}\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>" -}}
      {{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[\n    {\n        \"tool_call_id\": \"0\",\n        \"results\": {" -}}
      {%- for document in documents -%}
        {{- "\n            \"" ~ loop.index0 ~ "\": " ~ (document.data if document.data else document) | tojson ~ ("" if loop.last else ",") -}}
      {%- endfor -%}
      {{- "\n        },\n        \"is_error\": null\n    }\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>" -}}
    {%- endif -%}
  {%- elif role in ["assistant", "chatbot"] and message.tool_calls -%}
    {{- "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" ~ thinking_block(message) ~ "<|START_ACTION|>[" -}}
    {%- for call in message.tool_calls -%}
      {{- "\n    {\"tool_call_id\": \"" ~ ns.next_call ~ "\", \"tool_name\": \"" ~ call.function.name ~ "\", \"parameters\": " -}}
      {{- call.function.arguments | tojson ~ "}" ~ ("" if loop.last else ",") -}}
      {%- set ns.next_call = ns.next_call + 1 -%}
    {%- endfor -%}
    {{- "\n]<|END_ACTION|><|END_OF_TURN_TOKEN|>" -}}
  {%- elif role in ["assistant", "chatbot"] -%}
    {{- "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>" ~ thinking_block(message) -}}
    {{- "<|START_TEXT|>" ~ text_of(message.content) ~ "<|END_TEXT|><|END_OF_TURN_TOKEN|>" -}}
  {%- elif role == "tool" -%}
    {%- if loop.first or messages[loop.index0 - 1].role | lower != "tool" -%}
      {{- "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[\n    " -}}
    {%- else -%}
      {{- ",\n    " -}}
    {%- endif -%}
    {%- set call_number = namespace(value="") -%}
    {%- for call_id in ns.call_ids -%}
      {%- if call_number.value == "" and call_id == message.tool_call_id -%}{%- set call_number.value = loop.index0 -%}{%- endif -%}
    {%- endfor -%}
    {{- tool_result(call_number.value, message.content) -}}
    {%- if loop.last or messages[loop.index0 + 1].role | lower != "tool" -%}
      {{- "\n]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|>" -}}
    {%- endif -%}
  {%- else -%}
    {{- raise_exception("Command-4 template: unknown message role '" ~ message.role ~ "'") -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
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

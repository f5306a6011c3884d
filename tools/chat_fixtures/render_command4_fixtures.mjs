// Renders the Command-4 test conversations with a real chat template file in the settings of
// transformers' apply_chat_template (with @huggingface/jinja, not Python's jinja2), and writes them as the fixtures the built-in template is checked
// against (tests/chat/command4_template_test.cpp).
//
//   node tools/chat_fixtures/render_command4_fixtures.mjs PATH/TO/chat_template.jinja \
//       > tests/chat/fixtures/command4_renders.json
//
// Uses @huggingface/jinja from tests/chat/compare (scripts/setup.sh installs it), which, like
// transformers' jinja2 environment, trims blocks and strips their leading whitespace.
// transformers' context: messages, tools, documents, add_generation_prompt, the special tokens,
// the kwargs, and the globals raise_exception and strftime_now (none of the cases reads the
// date). An assistant prefill is
// rendered as apply_chat_template(continue_final_message=True): the render is cut right after
// the final message's text.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../../tests/chat/compare/package.json"));
const { Template } = require("@huggingface/jinja");

const templatePath = process.argv[2];
if (!templatePath) {
  console.error("usage: node render_command4_fixtures.mjs PATH/TO/chat_template.jinja");
  process.exit(2);
}
const source = fs.readFileSync(templatePath, "utf8");

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather", description: "Current weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["city"] },
  },
};
const timeTool = {
  type: "function",
  function: { name: "get_time", description: "Current time", parameters: { type: "object", properties: {} } },
};
const call = (id, name, args) => ({ id, type: "function", function: { name, arguments: args } });

// Each case: the conversation and the kwargs a chat request turns into template variables.
const cases = [
  { name: "user_only", messages: [{ role: "user", content: "Hello" }] },
  { name: "system_and_user", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }] },
  { name: "reasoning_off", kwargs: { reasoning: false },
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }] },
  { name: "reasoning_effort_none", kwargs: { reasoning_effort: "none" }, messages: [{ role: "user", content: "Hi" }] },
  { name: "reasoning_effort_high", kwargs: { reasoning_effort: "high" }, messages: [{ role: "user", content: "Hi" }] },
  { name: "no_generation_prompt", add_generation_prompt: false, messages: [{ role: "user", content: "Hi" }] },
  { name: "multi_turn", messages: [
    { role: "user", content: "What is 2+2?" }, { role: "assistant", content: "4" },
    { role: "user", content: "And 3+3?" }] },
  { name: "multi_turn_reasoning_history", messages: [
    { role: "system", content: "You are terse." }, { role: "user", content: "Q1" },
    { role: "assistant", content: "A1", reasoning_content: "Thinking about Q1." },
    { role: "user", content: "Q2" }] },
  { name: "second_system_message", messages: [
    { role: "system", content: "First." }, { role: "user", content: "Q1" }, { role: "assistant", content: "A1" },
    { role: "system", content: "Second." }, { role: "user", content: "Q2" }] },
  { name: "tools_declared", tools: [weatherTool, timeTool],
    messages: [{ role: "system", content: "Use tools." }, { role: "user", content: "Weather in Paris?" }] },
  { name: "tools_reasoning_off", tools: [weatherTool], kwargs: { reasoning: false },
    messages: [{ role: "user", content: "Weather in Paris?" }] },
  { name: "tool_call_and_result", tools: [weatherTool], messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null, tool_calls: [call("call_a", "get_weather", { city: "Paris" })] },
    { role: "tool", tool_call_id: "call_a", content: "18 C, sunny" }] },
  { name: "tool_call_with_reasoning", tools: [weatherTool], messages: [
    { role: "user", content: "Weather in Paris?" },
    { role: "assistant", content: null, reasoning_content: "I need the weather tool.",
      tool_calls: [call("call_a", "get_weather", { city: "Paris", unit: "celsius" })] },
    { role: "tool", tool_call_id: "call_a", content: "{\"temperature\": 18}" }] },
  { name: "parallel_calls_two_results_then_answer", tools: [weatherTool, timeTool], messages: [
    { role: "system", content: "Use tools." }, { role: "user", content: "Weather and time in Oslo?" },
    { role: "assistant", content: null, tool_calls: [
      call("call_w", "get_weather", { city: "Oslo" }), call("call_t", "get_time", {})] },
    { role: "tool", tool_call_id: "call_w", content: "-3 C" },
    { role: "tool", tool_call_id: "call_t", content: "12:00" },
    { role: "assistant", content: "It is -3 C at 12:00." },
    { role: "user", content: "Thanks. And Bergen?" }] },
  { name: "two_tool_rounds", tools: [weatherTool], messages: [
    { role: "user", content: "Paris then Rome" },
    { role: "assistant", content: null, tool_calls: [call("x1", "get_weather", { city: "Paris" })] },
    { role: "tool", tool_call_id: "x1", content: "18 C" },
    { role: "assistant", content: null, tool_calls: [call("x2", "get_weather", { city: "Rome" })] },
    { role: "tool", tool_call_id: "x2", content: "25 C" }] },
  { name: "prefill", continue_final_message: true, messages: [
    { role: "user", content: "Write a haiku." }, { role: "assistant", content: "Autumn moonlight" }] },
  { name: "prefill_system_reasoning_off", continue_final_message: true, kwargs: { reasoning: false }, messages: [
    { role: "system", content: "Poet." }, { role: "user", content: "Write a haiku." },
    { role: "assistant", content: "Autumn moonlight -" }] },
  // The template loops over `tools` whenever documents exist, so documents come with tools.
  { name: "documents", tools: [timeTool], kwargs: { documents: [{ title: "Doc A", text: "Alpha." }, { data: { title: "Doc B", text: "Beta." } }] },
    messages: [{ role: "user", content: "Summarise the documents." }] },
  { name: "documents_then_tool_call", tools: [weatherTool], kwargs: { documents: [{ text: "Alpha." }] }, messages: [
    { role: "user", content: "Weather where Alpha is?" },
    { role: "assistant", content: null, tool_calls: [call("w1", "get_weather", { city: "Alpha" })] },
    { role: "tool", tool_call_id: "w1", content: "9 C" }] },
  { name: "platform_instruction_override", kwargs: { platform_instruction_override: "You are a pirate." },
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }] },
  { name: "tool_result_for_an_unknown_call", tools: [timeTool], messages: [
    { role: "user", content: "Time?" },
    { role: "assistant", content: null, tool_calls: [call("t1", "get_time", {})] },
    { role: "tool", tool_call_id: "nope", content: "12:00" }] },
  { name: "unicode_and_quotes", messages: [
    { role: "system", content: "Répondez en français. \"Quoted\" text." }, { role: "user", content: "Ça va? 😀\nLine two" }] },
];

// apply_chat_template(continue_final_message=True): cut right after the final message's text
// (its stripped form when the template trimmed trailing whitespace).
function continueFinalMessage(rendered, finalText) {
  const stripped = finalText.trim();
  const at = rendered.lastIndexOf(stripped);
  if (stripped === "" || at < 0) throw new Error("the final message does not appear in the render");
  const kept = finalText.trimStart();
  return rendered.slice(at, at + kept.length) === kept ? rendered.slice(0, at + kept.length)
                                                       : rendered.slice(0, at + stripped.length);
}

function render(c) {
  const context = {
    messages: c.messages, tools: c.tools ?? null, documents: null,
    add_generation_prompt: c.continue_final_message ? false : c.add_generation_prompt ?? true,
    bos_token: "<BOS_TOKEN>", eos_token: "<|END_OF_TURN_TOKEN|>", pad_token: "<PAD>", unk_token: "<UNK>",
    ...c.kwargs,
  };
  // @huggingface/jinja defines the globals raise_exception and strftime_now itself.
  let prompt = new Template(source).render(structuredClone(context));
  if (c.continue_final_message) prompt = continueFinalMessage(prompt, c.messages.at(-1).content);
  return { name: c.name, context, continue_final_message: Boolean(c.continue_final_message), prompt };
}

const fixtures = cases.map(render);
process.stdout.write(JSON.stringify({ cases: fixtures }, null, 1) + "\n");

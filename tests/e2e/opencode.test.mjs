// OpenCode (the coding-agent CLI) drives `mkserve serve` through its OpenAI-compatible provider:
// its real system prompt, tool definitions and streaming requests go to the scripted backend,
// which calls OpenCode's file-read tool; OpenCode reads the file, sends the result back and shows
// the scripted final answer. A recording proxy between the two keeps every request for the checks.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeTinyModel, writeScript, startServer } from './harness.mjs';
import { opencodeConfig, startRecordingProxy, chatExchanges, runOpencode } from './opencode_client.mjs';

// OpenCode's prompt (system prompt and ten tool schemas) is about 30 KB of text, far past the
// tiny model's 4096 positions; the scripted backend computes nothing, so its context can grow.
const CONTEXT_TOKENS = 131072;
const OUTPUT_TOKENS = 4096;
const SECRET = 'pumpernickel';
const FILE_TEXT = `The secret word is ${SECRET}.\n`;
const PROMPT = 'Read notes.txt and tell me the secret word.';
const TITLE = 'Secret word lookup';
const FINAL = `FINAL ANSWER: notes.txt says the secret word is ${SECRET}.`;
const NO_CONTENT = 'The tool result did not carry the file content.';
const API_KEY = 'opencode-test-key';

// The first matching rule wins, and every rule is keyed on token runs of the rendered prompt:
// - the file's text inside a tool result (only in the request after the tool ran): the answer;
// - a tool result without it: a text that fails the final check with a clear message;
// - OpenCode's read tool among the tool definitions (the agent's turn): call it on the file;
// - anything else, such as OpenCode's title request, which has no tools: plain text.
function scriptRules(filePath) {
  const call = [{ tool_call_id: '0', tool_name: 'read', parameters: { filePath } }];
  return [
    { prompt_contains: ` ${SECRET}`, output: `The file says it.<|END_THINKING|><|START_TEXT|>${FINAL}<|END_TEXT|>` },
    { prompt_contains: '<|START_TOOL_RESULT|>', output: `<|END_THINKING|><|START_TEXT|>${NO_CONTENT}<|END_TEXT|>` },
    { prompt_contains: 'name": "read', output: `I will read the file.<|END_THINKING|><|START_ACTION|>${JSON.stringify(call)}<|END_ACTION|>` },
    { output: `<|END_THINKING|><|START_TEXT|>${TITLE}<|END_TEXT|>` },
  ];
}

let model, server, proxy, run, chats, projectDir;
before(async () => {
  model = makeTinyModel();
  const configPath = join(model.modelDir, 'config.json');
  const config = JSON.parse(readFileSync(configPath, 'utf8'));
  writeFileSync(configPath, JSON.stringify({ ...config, max_position_embeddings: CONTEXT_TOKENS }));

  projectDir = join(model.dir, 'project');
  mkdirSync(projectDir);
  const filePath = join(projectDir, 'notes.txt');
  writeFileSync(filePath, FILE_TEXT);

  const script = writeScript(model.dir, scriptRules(filePath));
  server = await startServer(model.modelDir, ['--backend', `scripted:${script}`, '--served-model-name', 'north', '--api-key', API_KEY]);
  proxy = await startRecordingProxy(server.url);
  run = await runOpencode({
    projectDir,
    homeDir: join(model.dir, 'home'),
    config: opencodeConfig({ baseURL: `${proxy.url}/v1`, modelId: 'north', apiKey: API_KEY, contextTokens: CONTEXT_TOKENS, outputTokens: OUTPUT_TOKENS }),
    prompt: PROMPT,
    timeoutMs: 240000,
  });
  chats = chatExchanges(proxy.exchanges);
});
after(async () => { await proxy?.close(); await server?.stop(); model?.cleanup(); });

// What went wrong, for a failed assertion: OpenCode's output and each request's answer.
function diagnostics() {
  const requests = chats.map((c, i) => `#${i} ${c.status} tools=${(c.body.tools ?? []).length} ` +
    `messages=${c.body.messages?.map((m) => m.role).join(',')} reply=${JSON.stringify(c.reply ?? c.response)}`);
  return `\n${requests.join('\n')}\nopencode stdout:\n${run.stdout}\nopencode stderr (tail):\n${run.stderr.slice(-3000)}`;
}

const agentRequests = () => chats.filter((c) => c.body.tools?.length);

test('opencode exits 0 and shows the final answer', () => {
  assert.equal(run.code, 0, diagnostics());
  assert.ok(run.stdout.includes(FINAL), `the final answer is missing from OpenCode's output${diagnostics()}`);
  assert.ok(!run.stdout.includes(NO_CONTENT), diagnostics());
});

test('every request was an authorized streamed chat completion that mkserve answered with 200', () => {
  assert.ok(chats.length >= 3, diagnostics());
  for (const chat of chats) {
    assert.equal(chat.status, 200, diagnostics());
    assert.equal(chat.headers.authorization, `Bearer ${API_KEY}`);
    assert.equal(chat.body.stream, true);
    assert.deepEqual(chat.reply.errors, []);
  }
});

test('the title request has no tools and gets plain text', () => {
  const titles = chats.filter((c) => !c.body.tools?.length);
  assert.ok(titles.length >= 1, diagnostics());
  for (const title of titles) {
    assert.deepEqual(title.reply.toolCalls, [], diagnostics());
    assert.equal(title.reply.content, TITLE);
    assert.equal(title.reply.finishReason, 'stop');
  }
});

test('the first agent request offers the read tool and gets a call to it on the file', () => {
  const [first] = agentRequests();
  assert.ok(first, diagnostics());
  const read = first.body.tools.find((t) => t.function?.name === 'read');
  assert.ok(read, `no read tool among ${first.body.tools.map((t) => t.function?.name)}`);
  assert.equal(read.function.parameters.properties.filePath.type, 'string');
  assert.ok(read.function.parameters.required.includes('filePath'));
  assert.ok(first.body.messages.some((m) => m.role === 'user' && String(m.content).includes(PROMPT)));
  assert.ok(!first.body.messages.some((m) => m.role === 'tool'));
  assert.equal(first.reply.finishReason, 'tool_calls', diagnostics());
  assert.equal(first.reply.toolCalls.length, 1);
  assert.equal(first.reply.toolCalls[0].name, 'read');
  assert.deepEqual(JSON.parse(first.reply.toolCalls[0].arguments), { filePath: join(projectDir, 'notes.txt') });
});

test('the second agent request carries the call and the tool result with the file content', () => {
  const agents = agentRequests();
  assert.equal(agents.length, 2, diagnostics());
  const callId = agents[0].reply.toolCalls[0].id;
  const messages = agents[1].body.messages;
  const assistant = messages.find((m) => m.role === 'assistant' && m.tool_calls?.length);
  assert.ok(assistant, diagnostics());
  assert.deepEqual(assistant.tool_calls.map((c) => [c.id, c.function.name]), [[callId, 'read']]);
  const result = messages.find((m) => m.role === 'tool');
  assert.ok(result, diagnostics());
  assert.equal(result.tool_call_id, callId);
  assert.ok(String(result.content).includes(FILE_TEXT.trim()), `tool result: ${JSON.stringify(result.content)}`);
  assert.equal(agents[1].reply.content, FINAL, diagnostics());
  assert.equal(agents[1].reply.finishReason, 'stop');
});

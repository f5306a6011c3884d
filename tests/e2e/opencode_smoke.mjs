// The OpenCode exchange of opencode.test.mjs against an already-running mkserve with a real model
// (scripts/opencode_smoke.sh wraps it). The model must read a file with a random secret word
// through OpenCode's read tool and answer with the word. Prints every request OpenCode sent and
// what came back, keeps the full log, and exits 1 when a check fails.
//
//   node opencode_smoke.mjs URL [API_KEY]
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { randomInt } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { opencodeConfig, startRecordingProxy, chatExchanges, runOpencode } from './opencode_client.mjs';

const [url, apiKey = ''] = process.argv.slice(2);
if (!url) {
  console.error('usage: node opencode_smoke.mjs URL [API_KEY]   (URL: the server root, e.g. http://127.0.0.1:8000)');
  process.exit(2);
}
const root = url.replace(/\/+$/, '').replace(/\/v1$/, '');
const timeoutMs = Number(process.env.OPENCODE_SMOKE_TIMEOUT_S ?? 600) * 1000;

const models = await fetch(`${root}/v1/models`, { headers: apiKey ? { Authorization: `Bearer ${apiKey}` } : {} })
  .then(async (r) => ({ status: r.status, text: await r.text() }))
  .catch((error) => ({ status: 0, text: error.message }));
let served;
try { served = JSON.parse(models.text).data[0]; } catch { /* reported below */ }
if (models.status !== 200 || !served?.id || !served?.max_model_len) {
  console.error(`no served model at ${root}/v1/models (HTTP ${models.status}): ${models.text.slice(0, 300)}`);
  process.exit(1);
}
const { id: modelId, max_model_len: contextTokens } = served;

const dir = mkdtempSync(join(tmpdir(), 'mkserve-opencode-smoke-'));
const projectDir = join(dir, 'project');
mkdirSync(projectDir);
const secret = `${['amber', 'basalt', 'cobalt', 'dune', 'ember'][randomInt(5)]}-${randomInt(1000, 10000)}`;
const filePath = join(projectDir, 'notes.txt');
writeFileSync(filePath, `The secret word is ${secret}.\n`);

const proxy = await startRecordingProxy(root);
const config = opencodeConfig({
  baseURL: `${proxy.url}/v1`, modelId, apiKey: apiKey || 'none', contextTokens,
  // OPENCODE_SMOKE_OUTPUT_TOKENS caps each answer (random weights never stop on their own).
  outputTokens: Number(process.env.OPENCODE_SMOKE_OUTPUT_TOKENS ?? Math.min(32000, Math.floor(contextTokens / 2))),
});
console.log(`model ${modelId} (context ${contextTokens}) at ${root}; project ${projectDir}`);
let run;
try {
  run = await runOpencode({
    projectDir, homeDir: join(dir, 'home'), config, timeoutMs,
    prompt: 'Use the read tool to open notes.txt in the current directory, then reply with the secret word written in it.',
  });
} catch (error) {
  run = { code: null, signal: 'timeout', stdout: '', stderr: error.message };
}
await proxy.close();
const chats = chatExchanges(proxy.exchanges);
const log = join(dir, 'exchanges.json');
writeFileSync(log, JSON.stringify({ exchanges: proxy.exchanges, run }, null, 2));

chats.forEach((chat, i) => {
  const roles = chat.body.messages?.map((m) => m.role).join(',');
  const reply = chat.reply
    ? JSON.stringify({ content: chat.reply.content.slice(0, 200), tool_calls: chat.reply.toolCalls, finish: chat.reply.finishReason })
    : chat.response.slice(0, 300);
  const usage = chat.reply?.usage;
  const tokens = usage ? `, prompt ${usage.prompt_tokens} tokens (${usage.prompt_tokens_details?.cached_tokens ?? 0} cached)` : '';
  console.log(`request ${i}: HTTP ${chat.status}, ${chat.body.tools?.length ?? 0} tools, messages ${roles}${tokens}\n  reply ${reply}`);
});
console.log(`opencode exit ${run.code ?? run.signal}; stdout:\n${run.stdout}`);

const failures = [];
const check = (ok, what) => { console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`); if (!ok) failures.push(what); };
check(run.code === 0, 'opencode exits 0');
check(chats.length > 0 && chats.every((c) => c.status === 200), 'every chat request answered 200');
check(chats.filter((c) => !c.body.tools?.length).every((c) => c.reply?.toolCalls.length === 0),
  'requests without tools (the title) get no tool calls');
const readCalls = chats.flatMap((c) => c.reply?.toolCalls ?? []).filter((call) => call.name === 'read');
check(readCalls.some((call) => { try { return JSON.parse(call.arguments).filePath?.endsWith('notes.txt'); } catch { return false; } }),
  'the model called read on notes.txt');
check(chats.some((c) => c.body.messages?.some((m) => m.role === 'tool' && String(m.content).includes(secret))),
  'a later request carried the tool result with the file content');
check(run.stdout.includes(secret), `the answer shown by OpenCode names the secret word (${secret})`);
console.log(`full log: ${log}`);
process.exit(failures.length ? 1 : 0);

// Runs the OpenCode coding-agent CLI against an mkserve URL, sealed off from the machine: a
// temporary HOME and XDG folders hold its config and state, every update check, model-list
// download, LSP download and plugin install is turned off, and a hard timeout kills it. A
// recording proxy sits between OpenCode and the server, so a test can read the exact requests
// OpenCode sent and the streams it got back.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';

// The platform build that the `opencode-ai` wrapper would pick on linux-x64, pinned directly: the
// wrapper's lockfile needs every platform's build, and the registry does not serve them all.
export const OPENCODE_BIN = new URL('./node_modules/opencode-linux-x64/bin/opencode', import.meta.url).pathname;

// The provider id OpenCode knows mkserve by; the CLI names a model "provider/model".
const PROVIDER_ID = 'mkserve';

// OpenCode's config for one mkserve model: the OpenAI-compatible provider pointed at `baseURL`
// (ending in /v1). `limit.output` is the max_tokens OpenCode sends (it caps it at 32000, and asks
// for 32000 without it); mkserve refuses a request whose prompt + max_tokens exceed the context.
export function opencodeConfig({ baseURL, modelId, apiKey = 'none', contextTokens, outputTokens }) {
  return {
    $schema: 'https://opencode.ai/config.json',
    autoupdate: false,
    share: 'disabled',
    model: `${PROVIDER_ID}/${modelId}`,
    small_model: `${PROVIDER_ID}/${modelId}`,
    provider: {
      [PROVIDER_ID]: {
        npm: '@ai-sdk/openai-compatible',
        name: 'mkserve',
        options: { baseURL, apiKey },
        models: {
          [modelId]: {
            name: modelId,
            tool_call: true,
            limit: { context: contextTokens, output: outputTokens },
          },
        },
      },
    },
  };
}

// Forwards every request to `targetUrl` (the server root) unchanged and records it with the
// response, streamed through as it arrives.
export async function startRecordingProxy(targetUrl) {
  const target = new URL(targetUrl);
  const exchanges = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (chunk) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const exchange = { method: req.method, path: req.url, headers: req.headers, body: parseJson(body.toString()), status: 0, response: '' };
      exchanges.push(exchange);
      const upstream = http.request({
        host: target.hostname, port: target.port, path: req.url, method: req.method,
        headers: { ...req.headers, host: target.host },
      }, (reply) => {
        exchange.status = reply.statusCode;
        res.writeHead(reply.statusCode, reply.headers);
        reply.on('data', (data) => { exchange.response += data.toString(); res.write(data); });
        reply.on('end', () => res.end());
      });
      upstream.on('error', (error) => {
        exchange.status = 502;
        exchange.response = `proxy: ${error.message}`;
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(exchange.response);
      });
      upstream.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  const close = () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); });
  return { url, exchanges, close };
}

function parseJson(text) {
  try { return JSON.parse(text); } catch { return text; }
}

// Folds an SSE chat stream into what a client sees: text, reasoning, tool calls, finish reason,
// usage.
function foldChatStream(text) {
  const folded = { content: '', reasoning: '', toolCalls: [], finishReason: null, usage: null, errors: [] };
  for (const event of text.split('\n\n')) {
    if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
    const chunk = JSON.parse(event.slice(6));
    if (chunk.error) folded.errors.push(chunk.error);
    folded.usage = chunk.usage ?? folded.usage;
    for (const choice of chunk.choices ?? []) {
      folded.content += choice.delta?.content ?? '';
      folded.reasoning += choice.delta?.reasoning_content ?? '';
      for (const delta of choice.delta?.tool_calls ?? []) {
        const call = (folded.toolCalls[delta.index] ??= { id: '', name: '', arguments: '' });
        call.id ||= delta.id ?? '';
        call.name ||= delta.function?.name ?? '';
        call.arguments += delta.function?.arguments ?? '';
      }
      folded.finishReason = choice.finish_reason ?? folded.finishReason;
    }
  }
  return folded;
}

// The chat requests among the recorded exchanges, with their streams folded.
export function chatExchanges(exchanges) {
  return exchanges
    .filter((e) => e.method === 'POST' && e.path.endsWith('/chat/completions'))
    .map((e) => ({ ...e, reply: e.status === 200 ? foldChatStream(e.response) : null }));
}

// `opencode run PROMPT` in `projectDir` with `config`, every file it writes under `homeDir`.
// Resolves { code, signal, stdout, stderr }; rejects when it outlives `timeoutMs`.
export function runOpencode({ projectDir, homeDir, config, prompt, timeoutMs }) {
  const xdg = {
    XDG_CONFIG_HOME: join(homeDir, '.config'),
    XDG_DATA_HOME: join(homeDir, '.local', 'share'),
    XDG_STATE_HOME: join(homeDir, '.local', 'state'),
    XDG_CACHE_HOME: join(homeDir, '.cache'),
  };
  mkdirSync(join(xdg.XDG_CONFIG_HOME, 'opencode'), { recursive: true });
  writeFileSync(join(xdg.XDG_CONFIG_HOME, 'opencode', 'opencode.json'), JSON.stringify(config, null, 2));
  const env = {
    PATH: process.env.PATH,
    HOME: homeDir,
    ...xdg,
    NO_COLOR: '1',
    OPENCODE_DISABLE_AUTOUPDATE: '1',
    OPENCODE_DISABLE_MODELS_FETCH: '1',  // models.dev
    OPENCODE_DISABLE_LSP_DOWNLOAD: '1',
    OPENCODE_DISABLE_DEFAULT_PLUGINS: '1',
    OPENCODE_DISABLE_SHARE: '1',
    OPENCODE_DISABLE_CLAUDE_CODE: '1',  // no ~/.claude prompts or skills
    OPENCODE_DISABLE_EXTERNAL_SKILLS: '1',
    OPENCODE_DISABLE_PROJECT_CONFIG: '1',  // only the config written above
  };
  const args = ['run', '--pure', '--print-logs', '--log-level', 'INFO', '--model', config.model, prompt];
  return new Promise((resolve, reject) => {
    // Its own process group, so the timeout kills whatever it started too.
    const proc = spawn(OPENCODE_BIN, args, { cwd: projectDir, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (data) => { stdout += data.toString(); });
    proc.stderr.on('data', (data) => { stderr += data.toString(); });
    const timer = setTimeout(() => {
      try { process.kill(-proc.pid, 'SIGKILL'); } catch { /* already gone */ }
      reject(new Error(`opencode did not finish within ${timeoutMs / 1000} s; killed.\n` +
        `stdout:\n${stdout}\nstderr (tail):\n${stderr.slice(-4000)}`));
    }, timeoutMs);
    proc.on('error', (error) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${OPENCODE_BIN} (run scripts/setup.sh): ${error.message}`));
    });
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

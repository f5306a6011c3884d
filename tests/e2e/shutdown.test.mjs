// SIGTERM on the real binary: the server stops accepting, lets running requests finish for
// --drain-timeout, ends the rest (streams with finish_reason "abort" and [DONE], non-streaming
// ones with a 503), and exits 0.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { BIN, makeTinyModel, startServer, metric, waitFor, MODEL_BACKEND_ARGS } from './harness.mjs';

let model;
before(() => { model = makeTinyModel(); });
after(() => model?.cleanup());

// Starts a streaming completion (a plain prompt: its length does not depend on a chat template);
// `text` resolves to the whole SSE body once the server ends it.
async function startStream(server, maxTokens) {
  const response = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'go on', max_tokens: maxTokens, ignore_eos: true, stream: true }),
  });
  assert.equal(response.status, 200);
  return { text: response.text() };
}

function finishReasons(sse) {
  return sse.split('\n\n').filter((e) => e.startsWith('data: {'))
    .map((e) => JSON.parse(e.slice(6)).choices?.[0]?.finish_reason).filter(Boolean);
}

test('SIGTERM drains, then ends streams with "abort" and [DONE] and others with 503; exit 0', async () => {
  const server = await startServer(model.modelDir, [...MODEL_BACKEND_ARGS, '--drain-timeout', '1.5']);
  const maxModelLen = (await (await fetch(`${server.url}/v1/models`)).json()).data[0].max_model_len;
  const long = await startStream(server, maxModelLen - 64);
  const blocking = fetch(`${server.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'and on', max_tokens: maxModelLen - 64, ignore_eos: true }),
  }).then(async (r) => ({ status: r.status, json: await r.json() }));
  assert.ok(await waitFor(async () => (await metric(server, 'mkserve_num_requests_running')) === 2));
  const short = await startStream(server, 8);

  const exited = new Promise((resolve) => server.proc.on('exit', (code, signal) => resolve({ code, signal })));
  const signalled = Date.now();
  server.proc.kill('SIGTERM');

  // No new connections once the signal is handled.
  assert.ok(await waitFor(() => new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port: server.port });
    socket.on('connect', () => { socket.destroy(); resolve(false); });
    socket.on('error', () => resolve(true));
  }), 3000), 'connections refused after SIGTERM');

  const shortText = await short.text;
  assert.deepEqual(finishReasons(shortText), ['length'], 'a request that fits in the drain finishes');
  assert.ok(shortText.endsWith('data: [DONE]\n\n'));

  const longText = await long.text;
  assert.deepEqual(finishReasons(longText), ['abort'], longText.slice(-300));
  assert.ok(longText.endsWith('data: [DONE]\n\n'), longText.slice(-300));

  const refused = await blocking;
  assert.equal(refused.status, 503);
  assert.equal(refused.json.error.type, 'unavailable_error');
  assert.match(refused.json.error.message, /--drain-timeout/);

  const { code, signal } = await exited;
  assert.equal(signal, null);
  assert.equal(code, 0, server.log());
  const took = Date.now() - signalled;
  assert.ok(took >= 1400 && took < 15000, `exit ${took} ms after SIGTERM`);
  assert.match(server.log(), /mkserve serve: stopped/);
});

// A stop signal while the weights load ends the process at once (it used to wait for the whole
// load, minutes for a real checkpoint). The 1000-layer tiny model loads in about half a second;
// the signal goes as soon as the server has bound, before the load.
test('SIGTERM during the load stops at once, exit 0', async () => {
  const deep = join(model.dir, 'deep');
  execFileSync(BIN, ['make-model', '--preset', 'tiny', '--layers', '1000', '--out', deep], { stdio: 'pipe' });
  const proc = spawn(BIN, ['serve', '--model', deep, '--backend', 'cpu', '--port', '0'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr.on('data', (data) => {
    log += data.toString();
    if (/bound http/.test(log) && proc.signalCode === null && !proc.killed) proc.kill('SIGTERM');
  });
  const { code, signal } = await new Promise((resolve) =>
    proc.on('exit', (code, signal) => resolve({ code, signal })));
  assert.equal(signal, null);
  assert.equal(code, 0, log);
  assert.match(log, /mkserve serve: signal 15 during the load, stopped/);
  assert.doesNotMatch(log, /listening/);
});

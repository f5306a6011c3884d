// Backend failures through the real server, injected by the scripted backend's fault rules: a
// transient error fails one request and the server keeps serving; a fatal error, or a step that
// hangs past --step-timeout, fails every request in flight, turns /health and new requests into
// 503, and the process exits non-zero even while the engine thread is still stuck.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { makeTinyModel, writeScript, startServer, client, user, expectApiError } from './harness.mjs';

const SCRIPT = [
  { prompt_contains: 'transient', fault: 'error' },
  { prompt_contains: 'fatal', fault: 'fatal' },
  { prompt_contains: 'wedge', fault: 'hang', hang_ms: 600000 },
  // 20 ms a step: this stream is still running when the fatal request comes.
  { prompt_contains: 'long', fault: 'hang', hang_ms: 20, output: 'word '.repeat(1000) },
  { output: 'Fine.' },
];

let model;
before(() => { model = makeTinyModel(); });
after(() => model?.cleanup());

const exitCode = (proc) => new Promise((resolve) => {
  if (proc.exitCode !== null) return resolve(proc.exitCode);
  proc.on('exit', (code) => resolve(code));
});

async function expectUnhealthyAndRefusing(server, openai) {
  const health = await fetch(`${server.url}/health`);
  assert.equal(health.status, 503);
  assert.match((await health.json()).error.message, /backend failed/);
  await expectApiError(openai.chat.completions.create({ messages: user('hello'), max_tokens: 5 }),
    { status: 503, message: /fatal backend error/ });
}

test('transient error fails one request; a fatal one fails all in flight, then 503 and exit', async () => {
  const script = writeScript(model.dir, SCRIPT);
  const server = await startServer(model.modelDir, ['--backend', `scripted:${script}`]);
  try {
    const openai = client(server);
    await expectApiError(openai.chat.completions.create({ messages: user('transient'), max_tokens: 5 }),
      { status: 500, message: /scripted transient backend error/ });
    const ok = await openai.chat.completions.create({ messages: user('hello'), max_tokens: 5 });
    assert.equal(ok.choices[0].finish_reason, 'stop');
    assert.equal((await fetch(`${server.url}/health`)).status, 200);

    const stream = await openai.chat.completions.create({ messages: user('long'), max_tokens: 1000, stream: true });
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();  // the stream is running
    await expectApiError(openai.chat.completions.create({ messages: user('fatal'), max_tokens: 5 }),
      { status: 500, message: /cannot continue: scripted fatal backend error/ });
    await assert.rejects((async () => { while (!(await iterator.next()).done); })(), /scripted fatal backend error/);
    await expectUnhealthyAndRefusing(server, openai);
    assert.notEqual(await exitCode(server.proc), 0, server.log());
    assert.match(server.log(), /fatal backend error/);
  } finally {
    await server.stop();
  }
});

test('a step that hangs past --step-timeout is fatal: requests fail, 503, and the process exits', async () => {
  const script = writeScript(model.dir, SCRIPT);
  const server = await startServer(model.modelDir,
    ['--backend', `scripted:${script}`, '--step-timeout', '1', '--first-step-timeout', '60']);
  try {
    const openai = client(server);
    await openai.chat.completions.create({ messages: user('hello'), max_tokens: 5 });
    const start = Date.now();
    await expectApiError(openai.chat.completions.create({ messages: user('wedge'), max_tokens: 5 }),
      { status: 500, message: /did not return within 1 s/ });
    assert.ok(Date.now() - start < 10000, `failed after ${Date.now() - start} ms`);
    await expectUnhealthyAndRefusing(server, openai);
    // The engine thread is still inside the 10-minute hang; the process exits anyway.
    assert.notEqual(await exitCode(server.proc), 0, server.log());
  } finally {
    await server.stop();
  }
});

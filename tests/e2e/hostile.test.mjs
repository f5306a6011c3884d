// Clients that try to take the server down, against the real binary on the tiny model: a JSON
// nesting bomb, a burst of connects while nobody accepts, slow and half-sent requests, and more
// connections than the server allows. Every attack loop is bounded and stops itself.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import http from 'node:http';
import { makeTinyModel, startServer, rawPost, MODEL_BACKEND_ARGS } from './harness.mjs';

const KEY = 'hostile-key';
const auth = { Authorization: `Bearer ${KEY}` };
let model, server, maxModelLen;
before(async () => {
  model = makeTinyModel();
  server = await startServer(model.modelDir, [...MODEL_BACKEND_ARGS, '--api-key', KEY]);
  maxModelLen = (await (await fetch(`${server.url}/v1/models`, { headers: auth })).json()).data[0].max_model_len;
});
after(async () => { await server?.stop(); model?.cleanup(); });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// GET /health on a fresh connection; its latency in ms, or `timeoutMs` when it did not answer 200.
function healthLatency(port, timeoutMs) {
  const start = Date.now();
  return new Promise((resolve) => {
    const request = http.get({ host: '127.0.0.1', port, path: '/health', agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode === 200 ? Date.now() - start : timeoutMs));
    });
    request.setTimeout(timeoutMs, () => { request.destroy(); resolve(timeoutMs); });
    request.on('error', () => resolve(timeoutMs));
  });
}

// GET on a connection of its own (never a pooled one): { status, body }.
function freshGet(port, path) {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path, agent: false }, (response) => {
      let body = '';
      response.on('data', (chunk) => { body += chunk; });
      response.on('end', () => resolve({ status: response.statusCode, body }));
    });
    request.setTimeout(5000, () => request.destroy(new Error(`GET ${path} timed out`)));
    request.on('error', reject);
  });
}

// Opens `count` raw connections one after another, 5 ms apart (as clients arriving over time do:
// a burst would overflow a small accept queue, and the kernel would reset the attack for us);
// resolves once every one is connected (or failed).
async function openSockets(port, count) {
  const sockets = [];
  for (let i = 0; i < count; i++) {
    sockets.push(await new Promise((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port });
      socket.closedByServer = false;
      socket.resume();  // read and drop answers, so that a server's close is seen
      socket.on('error', () => {});
      socket.on('close', () => { socket.closedByServer = true; });
      socket.on('connect', () => resolve(socket));
      socket.on('error', () => resolve(socket));
    }));
    await sleep(5);
  }
  return sockets;
}

// Polls /health every 200 ms for `durationMs` while `attack` runs; returns the worst latency.
async function worstHealthLatency(port, durationMs) {
  let worst = 0;
  const end = Date.now() + durationMs;
  while (Date.now() < end) {
    worst = Math.max(worst, await healthLatency(port, 3000));
    await sleep(200);
  }
  return worst;
}

// A running stream on the tiny model: resolves with the longest gap between chunks (ms) once
// `stopAfterMs` has passed, then abandons the stream.
async function streamGaps(stopAfterMs) {
  const controller = new AbortController();
  const response = await fetch(`${server.url}/v1/completions`, {
    method: 'POST', signal: controller.signal, headers: { 'Content-Type': 'application/json', ...auth },
    body: JSON.stringify({ prompt: 'stream on', max_tokens: maxModelLen - 16, ignore_eos: true, stream: true }),
  });
  assert.equal(response.status, 200);
  let worst = 0, last = Date.now();
  const end = last + stopAfterMs;
  try {
    for await (const _ of response.body) {
      const now = Date.now();
      worst = Math.max(worst, now - last);
      last = now;
      if (now > end) break;
    }
  } catch { /* aborted below */ }
  controller.abort();
  return worst;
}

test('a JSON nesting bomb is a 400 on every endpoint, 401 without the key; the server lives', async () => {
  const depth = 100000;
  const objects = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
  const arrays = '['.repeat(depth) + ']'.repeat(depth);
  const messages = '[{"role": "user", "content": "x"}]';
  const bodies = [objects, arrays,
    // Deep values where a handler copies them: these killed the server (SIGSEGV).
    `{"messages": ${messages}, "chat_template_kwargs": ${objects}}`,
    `{"messages": ${messages}, "tools": [{"type": "function", "function": {"name": "f", "parameters": ${objects}}}]}`];
  for (const path of ['/v1/chat/completions', '/v1/completions', '/tokenize', '/detokenize']) {
    for (const body of bodies) {
      const refused = await rawPost(server, path, body, auth);
      assert.equal(refused.status, 400, `${path}: ${refused.text.slice(0, 200)}`);
      assert.equal(refused.json.error.type, 'invalid_request_error');
      assert.match(refused.json.error.message, /more than 128 levels deep/);
      const anonymous = await rawPost(server, path, body);
      assert.equal(anonymous.status, 401, path);
    }
  }
  // Nesting at the bound is fine.
  const nested = '{"a":'.repeat(127) + '1' + '}'.repeat(127);
  const fine = await rawPost(server, '/tokenize', JSON.stringify({ prompt: 'x', extra: JSON.parse(nested) }), auth);
  assert.equal(fine.status, 200, fine.text);
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
});

test('a burst of 256 connects is queued while the server accepts none', async () => {
  // SIGSTOP: nobody accepts, so only the kernel's accept queue (the listen backlog) holds them;
  // a connect beyond it would wait for a SYN retry (1 s, then 3 s, ...).
  server.proc.kill('SIGSTOP');
  let sockets;
  try {
    const connected = [];
    sockets = Array.from({ length: 256 }, () => {
      const socket = net.connect({ host: '127.0.0.1', port: server.port });
      socket.on('error', () => {});
      socket.on('connect', () => connected.push(socket));
      return socket;
    });
    await sleep(700);
    assert.equal(connected.length, 256, 'connects completed within 700 ms');
  } finally {
    server.proc.kill('SIGCONT');
  }
  // Every queued connection is then served.
  const answers = await Promise.all(sockets.map((socket) => new Promise((resolve) => {
    let data = '';
    socket.on('data', (chunk) => { data += chunk; });
    socket.on('close', () => resolve(data));
    socket.setTimeout(10000, () => socket.destroy());
    socket.write('GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
  })));
  assert.equal(answers.filter((a) => a.startsWith('HTTP/1.1 200')).length, 256);
});

test('200 clients sending one header line a second: /health and a running stream stay responsive', async () => {
  const sockets = await openSockets(server.port, 200);
  for (const socket of sockets) socket.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n');
  let line = 0;
  const drip = setInterval(() => { for (const s of sockets) if (!s.destroyed) s.write(`X-Slow-${line}: 1\r\n`); line++; }, 1000);
  try {
    const [health, gap] = await Promise.all([worstHealthLatency(server.port, 6000), streamGaps(6000)]);
    assert.ok(health < 1000, `worst /health latency ${health} ms`);
    assert.ok(gap < 1000, `worst gap between stream chunks ${gap} ms`);
  } finally {
    clearInterval(drip);
    for (const socket of sockets) socket.destroy();
  }
});

test('300 half-sent requests: /health and a running stream stay responsive', async () => {
  const sockets = await openSockets(server.port, 300);
  sockets.forEach((socket, i) => {
    socket.write(i % 2 === 0
      ? 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'  // a head that never ends
      : `POST /tokenize HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: 1000\r\n\r\n{"prompt":`);
  });
  try {
    const [health, gap] = await Promise.all([worstHealthLatency(server.port, 6000), streamGaps(6000)]);
    assert.ok(health < 1000, `worst /health latency ${health} ms`);
    assert.ok(gap < 1000, `worst gap between stream chunks ${gap} ms`);
  } finally {
    for (const socket of sockets) socket.destroy();
  }
});

test('--header-timeout and --body-timeout close slow connections; --max-connections answers 503', async () => {
  const limited = await startServer(model.modelDir, [...MODEL_BACKEND_ARGS, '--header-timeout', '1.5',
    '--body-timeout', '1.5', '--max-connections', '40']);
  let slow = [], idle = [], drip;
  try {
    // Slow heads (a line every 500 ms, never the end) and half-sent bodies.
    slow = await openSockets(limited.port, 20);
    slow.forEach((socket, i) => socket.write(i % 2 === 0 ? 'GET /health HTTP/1.1\r\n'
      : 'POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{'));
    drip = setInterval(() => { for (const s of slow) if (!s.destroyed) s.write('X: 1\r\n'); }, 500);
    // Idle connections fill the limit of 40 (with the harness's own pooled one).
    idle = await openSockets(limited.port, 20);
    await sleep(300);
    const refused = await freshGet(limited.port, '/health');
    assert.equal(refused.status, 503);
    assert.match(JSON.parse(refused.body).error.message, /--max-connections/);
    await sleep(2500);
    assert.equal(slow.filter((s) => s.closedByServer).length, 20, 'slow connections closed by the server');
    assert.equal(idle.filter((s) => s.closedByServer).length, 20, 'idle connections closed by the server');
    assert.equal((await freshGet(limited.port, '/health')).status, 200);
  } finally {
    clearInterval(drip);
    for (const socket of [...slow, ...idle]) socket.destroy();
    await limited.stop();
  }
});

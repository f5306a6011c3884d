// Starts the real `mkserve serve` binary for a test file and stops it afterwards.
// MKSERVE_BIN names the binary (ctest sets it). The port is picked by the server (--port 0) and
// read back from its start-up line, so parallel runs never collide.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

export const BIN = process.env.MKSERVE_BIN ?? new URL('../../build/mkserve', import.meta.url).pathname;

// The backend the real-model tests run on: cpu by default; MKSERVE_E2E_BACKEND=cuda runs the same
// suite through the CUDA backend on a GPU machine (scripts/gpu_e2e.sh), MKSERVE_E2E_SERVE_ARGS
// adds serve flags (space-separated, e.g. "--decode megakernel").
export const MODEL_BACKEND_ARGS = ['--backend', process.env.MKSERVE_E2E_BACKEND ?? 'cpu',
  ...(process.env.MKSERVE_E2E_SERVE_ARGS ?? '').split(' ').filter((arg) => arg !== '')];

// A fresh tiny model (random weights, tiny tokenizer) in a temporary folder, or the one named by
// MKSERVE_TINY_MODEL (a folder called "tiny" made by `mkserve make-model --preset tiny`).
export function makeTinyModel() {
  const dir = mkdtempSync(join(tmpdir(), 'mkserve-e2e-'));
  let modelDir = process.env.MKSERVE_TINY_MODEL;
  if (!modelDir) {
    modelDir = join(dir, 'tiny');
    execFileSync(BIN, ['make-model', '--preset', 'tiny', '--out', modelDir], { stdio: 'pipe' });
  }
  return { dir, modelDir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

export function writeScript(dir, rules) {
  const path = join(dir, 'script.json');
  writeFileSync(path, JSON.stringify({ rules }));
  return path;
}

export async function startServer(modelDir, extraArgs = []) {
  const args = ['serve', '--model', modelDir, '--host', '127.0.0.1', '--port', '0', ...extraArgs];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not bind:\n${log}`)), 60000);
    proc.stderr.on('data', (data) => {
      log += data.toString();
      const match = log.match(/bound http:\/\/127\.0\.0\.1:(\d+)/);
      if (match) { clearTimeout(timer); resolve(Number(match[1])); }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${log}`)); });
  });
  const url = `http://127.0.0.1:${port}`;
  const healthStatuses = [];
  for (let i = 0; i < 1800; i++) {  // up to 3 minutes on a loaded machine
    const response = await fetch(`${url}/health`).catch(() => null);
    if (response) healthStatuses.push(response.status);
    if (response?.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  if (healthStatuses.at(-1) !== 200) throw new Error(`server never became healthy:\n${log}`);
  const stop = () => new Promise((resolve) => {
    if (proc.exitCode !== null) return resolve(proc.exitCode);
    proc.on('exit', (code) => resolve(code));
    proc.kill('SIGTERM');
  });
  return { url, port, proc, stop, healthStatuses, log: () => log };
}

export function client(server, options = {}) {
  return new OpenAI({ baseURL: `${server.url}/v1`, apiKey: options.apiKey ?? 'none', maxRetries: 0, timeout: 120000 });
}

export async function metric(server, series) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  if (!line) throw new Error(`no series ${series} in /metrics`);
  return Number(line.slice(series.length + 1));
}

// One user message, as every chat test sends it.
export const user = (content) => [{ role: 'user', content }];

// Asserts the SDK call fails with an OpenAI-shaped API error: its status, and its param and a
// message pattern when given (param null: the error names none).
export async function expectApiError(promise, { status, param, message }) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof OpenAI.APIError, String(error));
    assert.equal(error.status, status, error.message);
    if (param !== undefined) assert.equal(error.param, param);
    if (message !== undefined) assert.match(error.message, message);
    return true;
  });
}

// Every request outcome counter, as one line for an assertion message.
export async function outcomes(server) {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith('mkserve_requests_total{')).join(', ');
}

// POSTs a raw body (for malformed JSON and the like) and returns { status, body }.
export async function rawPost(server, path, body, headers = {}) {
  const response = await fetch(`${server.url}${path}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body,
  });
  const text = await response.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: response.status, json, text, headers: response.headers };
}

export async function waitFor(condition, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

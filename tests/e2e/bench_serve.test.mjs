// `mkserve bench-serve` against the tiny model on the CPU backend: 64 concurrent streams for five
// rounds, every one of which must complete, then the JSON report and the shipped prompt set.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { BIN, makeTinyModel, startServer } from './harness.mjs';

const run = promisify(execFile);
const PROMPTS = new URL('../../data/bench/coding_prompts.jsonl', import.meta.url).pathname;

let model, server;
before(async () => {
  model = makeTinyModel();
  server = await startServer(model.modelDir, ['--max-batch', '64']);
});
after(async () => { await server?.stop(); model?.cleanup(); });

async function benchServe(args) {
  try {
    const { stdout } = await run(BIN, ['bench-serve', ...args], { timeout: 600000 });
    return { code: 0, stdout };
  } catch (error) {
    return { code: error.code, stdout: error.stdout, stderr: error.stderr };
  }
}

test('64 concurrent streams x 5 rounds: every request completes', async () => {
  const result = await benchServe(['--url', `${server.url}/v1/`, '--concurrency', '64', '--requests', '320',
    '--max-tokens', '16', '--ignore-eos', '--json', '-']);
  const report = JSON.parse(result.stdout);
  assert.deepEqual(report.errors, []);
  assert.equal(report.requests_failed, 0);
  assert.equal(report.requests_ok, 320);
  assert.equal(result.code, 0);
  assert.equal(report.output_tokens, 320 * 16);  // --ignore-eos: every request runs to max_tokens
  for (const key of ['output_tok_s', 'duration_s']) assert.ok(report[key] > 0, key);
  assert.ok(report.ttft_ms.p50 > 0 && report.ttft_ms.p99 >= report.ttft_ms.p50);
  assert.ok(report.itl_ms.p50 > 0 && report.itl_ms.p99 >= report.itl_ms.p50);
  assert.ok(report.decode_tok_s_per_request.p50 > 0);
});

test('the shipped coding prompts, a URL without /v1, and failures reported with their message', async () => {
  // The tiny model's 4096-token context holds the shorter prompts; the longer ones fail with 400.
  const result = await benchServe(['--url', server.url, '--concurrency', '4', '--requests', '8',
    '--max-tokens', '4', '--ignore-eos', '--prompts', PROMPTS]);
  assert.equal(result.code, 1);
  assert.match(result.stdout, /requests\s+5 ok, 3 failed/);
  assert.match(result.stdout, /error\s+HTTP 400: .*leaves no room in the context/);
  assert.match(result.stdout, /TTFT\s+p50/);
  assert.match(result.stdout, /decode tok\/s\s+per request: p50/);
});

test('--temperature is sent with every request, and checked', async () => {
  const greedy = await benchServe(['--url', server.url, '--requests', '2', '--max-tokens', '2',
    '--temperature', '0', '--json', '-']);
  assert.equal(JSON.parse(greedy.stdout).requests_ok, 2);
  // The server refuses a temperature over 2: the failure proves the value reached it.
  const refused = await benchServe(['--url', server.url, '--requests', '1', '--max-tokens', '2',
    '--temperature', '3']);
  assert.equal(refused.code, 1);
  assert.match(refused.stdout, /error\s+HTTP 400: .*temperature/);
  for (const value of ['-1', 'nan', 'inf']) {
    const bad = await benchServe(['--url', server.url, '--temperature', value]);
    assert.equal(bad.code, 1, value);
    assert.match(bad.stderr, /--temperature must be a finite number of at least 0/);
  }
});

// Flags are checked before any thread starts: they used to abort the process (SIGABRT) or run
// with a number cut to 32 bits.
test('bad flags are refused by name, never a crash', async () => {
  const cases = [
    [['--concurrency', '50000'], /--concurrency must be 1\.\.4096/],
    [['--concurrency', '4294967297'], /--concurrency must be 1\.\.4096/],
    [['--requests', '4294967298'], /--requests must be 1\.\.2147483647/],
    [['--max-tokens', '4294967297'], /--max-tokens must be 1\.\.2147483647/],
    // Refused before the load runs, not after it (the report is written last).
    [['--json', '/nonexistent-dir/report.json'], /--json: cannot write \/nonexistent-dir\/report\.json/],
  ];
  for (const [flags, message] of cases) {
    const run = await benchServe(['--url', server.url, ...flags]);
    assert.equal(run.code, 1, flags.join(' ') + run.stderr);
    assert.match(run.stderr, message);
  }
});

// Streams a draining server ended with finish_reason "abort" (and [DONE]) are failures, not
// successes with fewer tokens.
test('requests the server aborted count as failed', async () => {
  const draining = await startServer(model.modelDir, ['--drain-timeout', '0.2']);
  const bench = benchServe(['--url', draining.url, '--concurrency', '2', '--requests', '2',
    '--max-tokens', '3800', '--ignore-eos']);
  await new Promise((resolve) => setTimeout(resolve, 1000));  // about 4 s before they would end
  await draining.stop();
  const result = await bench;
  assert.equal(result.code, 1, result.stdout);
  assert.match(result.stdout, /requests\s+0 ok, 2 failed/);
  assert.match(result.stdout, /aborted the request/);
});

// `mkserve serve` refuses bad flags before it binds, and `mkserve bench` before it touches the
// GPU: a clear one-line error and exit status 1, never a crash (a signal), a server that starts
// with a setting it cannot honour, or a benchmark that fails after minutes of measuring.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, makeTinyModel } from './harness.mjs';

let model;
before(() => { model = makeTinyModel(); });
after(() => model?.cleanup());

function serve(args) {
  const port = args.includes('--port') ? [] : ['--port', '0'];
  const run = spawnSync(BIN, ['serve', '--model', model.modelDir, ...port, ...args],
    { encoding: 'utf8', timeout: 60000 });
  return { status: run.status, signal: run.signal, stderr: run.stderr };
}

const CASES = [
  [['--random-weights'], /--random-weights needs --backend cuda/],
  [['--cuda-graphs', 'maybe'], /--cuda-graphs must be on or off/],
  [['--decode', ''], /--decode needs a path name/],
  [['--gpu-memory-fraction', '1.5'], /--gpu-memory-fraction must be in \(0, 1\)/],
  [['--gpu-memory-fraction', '0'], /--gpu-memory-fraction must be in \(0, 1\)/],
  [['--max-step-tokens', '10'], /--max-step-tokens \(10\) must be at least --max-batch \(64\)/],
  [['--max-batch', '100000000'], /--max-step-tokens \(2048, the default\) must be at least --max-batch \(100000000\)/],
  [['--kv-bytes', '-1'], /--kv-bytes must be at least 1/],
  [['--kv-bytes', '0'], /--kv-bytes must be at least 1/],
  [['--backend', 'tpu'], /--backend must be cpu, cuda or scripted:FILE, got 'tpu'/],
  [['--reasoning', 'sometimes'], /--reasoning must be on or off/],
  [['--max-prefill-tokens-while-decoding', '0'], /--max-prefill-tokens-while-decoding must be at least 1/],
  [['--prompt-chunk-tokens', '4096'], /--prompt-chunk-tokens must be 0 \(prompts inside steps only\) or, with --backend cuda/],
  [['--prompt-chunk-tokens', '-2'], /--prompt-chunk-tokens must be 0/],
  [['--step-timeout', '0'], /--step-timeout and --first-step-timeout must be positive/],
  [['--decode-lookahead', 'sometimes'], /--decode-lookahead must be auto, on or off/],
  [['--step-timeout', 'nan'], /--step-timeout and --first-step-timeout must be positive/],
  [['--port', '4294975296'], /--port must be 0\.\.65535/],
  [['--port', '-1'], /--port must be 0\.\.65535/],
  [['--api-key', ''], /--api-key must not be empty/],
  [['--max-waiting', '-1'], /--max-waiting must be at least 0/],
  [['--header-timeout', '0'], /--header-timeout and --body-timeout must be positive/],
  [['--body-timeout', '-1'], /--header-timeout and --body-timeout must be positive/],
  [['--drain-timeout', '-1'], /--drain-timeout must be at least 0/],
  [['--max-connections', '0'], /--max-connections must be 1\.\.\d+/],
  [['--megakernel-policy', 'policy.json'], /--megakernel-policy needs --backend cuda and the megakernel decode path/],
  [['--backend', 'cuda', '--decode', 'layered', '--megakernel-policy', 'policy.json'],
    /--megakernel-policy needs --backend cuda and the megakernel decode path/],
  [['--backend', 'cuda', '--decode', 'graph', '--cuda-graphs', 'off'], /--cuda-graphs off contradicts --decode graph/],
  [['--backend', 'cuda', '--decode', 'megakernel', '--megakernel-policy', 'policy.json', '--warmup-context', '0'],
    /--megakernel-policy needs the decode warm-up/],
];

for (const [args, message] of CASES) {
  test(`serve ${args.join(' ')} is refused`, () => {
    const run = serve(args);
    assert.equal(run.signal, null, run.stderr);
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, message);
  });
}

// A checkpoint whose tokenizer has more ids than the model's vocabulary is refused at start-up
// (it served, then refused prompts and every response_format request).
test('serve refuses a tokenizer larger than the model', () => {
  const damaged = join(model.dir, 'small-vocab');
  cpSync(model.modelDir, damaged, { recursive: true });
  const config = JSON.parse(readFileSync(join(damaged, 'config.json'), 'utf8'));
  config.vocab_size = 100;
  config.eos_token_id = 1;
  config.bos_token_id = 2;
  config.pad_token_id = 0;
  writeFileSync(join(damaged, 'config.json'), JSON.stringify(config));
  writeFileSync(join(damaged, 'generation_config.json'), JSON.stringify({ eos_token_id: 1 }));
  const run = spawnSync(BIN, ['serve', '--model', damaged, '--port', '0'],
    { encoding: 'utf8', timeout: 60000 });
  assert.equal(run.signal, null, run.stderr);
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stderr, /past config\.json's vocab_size 100: the tokenizer is not this model's/);
});

// generation_config.json's eos ids are the model's too: one past the vocabulary is refused by name.
test('serve refuses a generation_config.json eos past the vocabulary', () => {
  const damaged = join(model.dir, 'bad-generation-eos');
  cpSync(model.modelDir, damaged, { recursive: true });
  writeFileSync(join(damaged, 'generation_config.json'), JSON.stringify({ eos_token_id: [1006, 1e9] }));
  const run = spawnSync(BIN, ['serve', '--model', damaged, '--port', '0'],
    { encoding: 'utf8', timeout: 60000 });
  assert.equal(run.signal, null, run.stderr);
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stderr, /generation_config\.json: config key "eos_token_id" = 1000000000: must be a token id below vocab_size/);
});

// bench exists in builds with the CUDA backend. It parsed --context, --prefill and --layers
// without bounds and opened --json only at the end, after every measurement.
const BENCH_CASES = [
  [['--context', '-5'], /--context values must be at least 1, got -5/],
  [['--context', '1024,0'], /--context values must be at least 1, got 0/],
  [['--prefill', '0'], /--prefill values must be at least 1, got 0/],
  [['--layers', '-2'], /--layers must not be negative/],
  [['--gpu-memory-fraction', '1'], /--gpu-memory-fraction must be in \(0, 1\)/],
  [['--steps', '0'], /--steps must be 1\.\.100000/],
  [['--batch', '65'], /--batch values must be in 1\.\.64, got 65/],
  [['--json', '/nonexistent-dir/bench.json'], /--json: cannot write \/nonexistent-dir\/bench\.json/],
];
const benchBuilt = /\n {2}bench /.test(spawnSync(BIN, ['help'], { encoding: 'utf8' }).stderr);

for (const [args, message] of BENCH_CASES) {
  test(`bench ${args.join(' ')} is refused`, () => {
    const run = spawnSync(BIN, ['bench', '--random-weights', ...args],
      { encoding: 'utf8', timeout: 60000 });
    assert.equal(run.signal, null, run.stderr);
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stderr, benchBuilt ? message : /unknown command 'bench'/);
  });
}

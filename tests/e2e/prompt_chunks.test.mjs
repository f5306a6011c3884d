// Long prompts computed in chunks beside the steps, through the real server: the scripted backend
// runs a chunk for 20 ms beside the steps (`--prompt-chunk-tokens`), so a long prompt that arrives
// while a stream decodes never runs inside a step; its answer, the stream, a cancel during a chunk
// and a chunk that fails to start all behave as without chunks, and the KV cache empties after.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { makeTinyModel, writeScript, startServer, client, metric, user, waitFor, expectApiError } from './harness.mjs';

const SCRIPT = [
  { prompt_contains: 'broken', fault: 'error' },
  // 5 ms a step: the stream is still running while the long prompts come and go.
  { prompt_contains: 'stream', fault: 'hang', hang_ms: 5, output: 'word '.repeat(400) },
  { output: '<|END_THINKING|><|START_TEXT|>Read it all.<|END_TEXT|>' },
];
const LONG = 'lorem ipsum dolor sit amet '.repeat(60);  // far over the 16-token cap

let model, server, openai;
before(async () => {
  model = makeTinyModel();
  const script = writeScript(model.dir, SCRIPT);
  server = await startServer(model.modelDir, ['--backend', `scripted:${script}`,
    '--prompt-chunk-tokens', '256', '--max-prefill-tokens-while-decoding', '16']);
  openai = client(server);
});
after(async () => { await server?.stop(); model?.cleanup(); });

async function startStream() {
  const stream = await openai.chat.completions.create({ messages: user('stream'), max_tokens: 400, stream: true });
  const iterator = stream[Symbol.asyncIterator]();
  await iterator.next();  // the stream is decoding
  return { stream, iterator };
}

test('a long prompt beside a decoding stream: chunks beside the steps, the right answer, KV freed', async () => {
  const before = await metric(server, 'mkserve_prompt_chunk_tokens_total');
  const { iterator } = await startStream();
  const answer = await openai.chat.completions.create({ messages: user(LONG), max_tokens: 20 });
  assert.equal(answer.choices[0].message.content, 'Read it all.');
  const computed = answer.usage.prompt_tokens - answer.usage.prompt_tokens_details.cached_tokens;
  // Every prompt token not taken from the prefix cache, but the last (it samples in a step) and a
  // rest under the 16-token cap that a step takes once the chunks are done.
  const chunked = await metric(server, 'mkserve_prompt_chunk_tokens_total') - before;
  assert.ok(chunked >= computed - 16 && chunked <= computed - 1, `${chunked} of ${computed}`);
  let chunks = 0;
  for (let next = await iterator.next(); !next.done; next = await iterator.next()) ++chunks;
  assert.ok(chunks > 100, `the stream went on: ${chunks} chunks`);
  assert.ok(await waitFor(async () => await metric(server, 'mkserve_kv_blocks_used') === 0));
});

test('a client that hangs up during a chunk, and a chunk that fails to start, leave the rest serving', async () => {
  const { stream, iterator } = await startStream();
  const controller = new AbortController();
  const abandoned = fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST', signal: controller.signal, headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: user(LONG.repeat(4) + ' again'), max_tokens: 20 }),  // ~16 chunks
  }).catch(() => null);
  const started = await metric(server, 'mkserve_prompt_chunk_tokens_total');
  assert.ok(await waitFor(async () => await metric(server, 'mkserve_prompt_chunk_tokens_total') > started));
  controller.abort();  // its chunk is running (20 ms each)
  await abandoned;
  await expectApiError(openai.chat.completions.create({ messages: user('broken ' + LONG), max_tokens: 5 }),
    { status: 500, message: /starting a prompt chunk failed: scripted transient backend error/ });
  const answer = await openai.chat.completions.create({ messages: user(LONG + ' once more'), max_tokens: 20 });
  assert.equal(answer.choices[0].message.content, 'Read it all.');
  stream.controller.abort();
  await iterator.next().catch(() => null);
  assert.ok(await waitFor(async () => await metric(server, 'mkserve_kv_blocks_used') === 0
    && await metric(server, 'mkserve_num_requests_running') === 0));
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
});

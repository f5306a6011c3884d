// The real backend (CPU; CUDA with MKSERVE_E2E_BACKEND=cuda) on the tiny random model, driven by
// the official SDK: every endpoint and parameter, concurrency, disconnects and bad input.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { makeTinyModel, startServer, client, rawPost, metric, outcomes, waitFor, user, expectApiError, MODEL_BACKEND_ARGS } from './harness.mjs';

const KEY = 'test-key-123';
const MAX_BODY = 65536;
let model, server, openai, maxModelLen;
before(async () => {
  model = makeTinyModel();
  server = await startServer(model.modelDir,
    [...MODEL_BACKEND_ARGS, '--api-key', KEY, '--max-body-bytes', String(MAX_BODY), '--max-batch', '64']);
  openai = client(server, { apiKey: KEY });
  maxModelLen = (await openai.models.list()).data[0].max_model_len;
});
after(async () => { await server?.stop(); model?.cleanup(); });

const auth = { Authorization: `Bearer ${KEY}` };

test('models needs the key; health and metrics are public; metrics is Prometheus text', async () => {
  const models = await openai.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['tiny']);
  const retrieved = await openai.models.retrieve('tiny');
  assert.equal(retrieved.id, 'tiny');
  assert.equal(retrieved.max_model_len, models.data[0].max_model_len);
  await expectApiError(openai.models.retrieve('other/model'), { status: 404, param: 'model', message: /'other\/model' does not exist/ });
  await expectApiError(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong', maxRetries: 0 }).models.list(), { status: 401 });
  const anonymous = await fetch(`${server.url}/v1/models`);
  assert.equal(anonymous.status, 401);
  assert.equal((await anonymous.json()).error.code, 'invalid_api_key');
  assert.equal((await fetch(`${server.url}/v1/no-such-route`)).status, 401);
  assert.equal((await fetch(`${server.url}/health`)).status, 200);
  const text = await (await fetch(`${server.url}/metrics`)).text();
  for (const name of ['mkserve_requests_total', 'mkserve_time_to_first_token_seconds_bucket',
    'mkserve_inter_token_latency_seconds_count', 'mkserve_num_requests_running',
    'mkserve_num_requests_waiting', 'mkserve_kv_blocks_used', 'mkserve_kv_blocks_total',
    'mkserve_prefix_cache_hit_rate', 'mkserve_batch_size_bucket', 'mkserve_prompt_tokens_total',
    'mkserve_generation_tokens_total']) {
    assert.ok(text.includes(name), name);
  }
  assert.ok(await metric(server, 'mkserve_kv_blocks_total') > 0);
});

test('chat completion with every sampling parameter', async () => {
  const response = await openai.chat.completions.create({
    model: 'tiny', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
    max_completion_tokens: 6, temperature: 0.8, top_p: 0.9, top_k: 20, min_p: 0.01, seed: 7,
    presence_penalty: 0.5, frequency_penalty: 0.5, repetition_penalty: 1.1, logit_bias: { '100': -5 },
    stop: ['\n\n'], stop_token_ids: [3], min_tokens: 1, user: 'tester',
    logprobs: true, top_logprobs: 3, chat_template_kwargs: { enable_thinking: false },
  });
  const choice = response.choices[0];
  assert.ok(['stop', 'length', 'tool_calls'].includes(choice.finish_reason));
  assert.ok(response.usage.completion_tokens >= 1 && response.usage.completion_tokens <= 6);
  assert.ok(choice.logprobs.content.length >= 1);
  for (const entry of choice.logprobs.content) {
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs.length, 3);
    // The token's own bytes: its text's UTF-8 unless the token holds part of a character,
    // whose text is then U+FFFD and whose bytes are the part.
    if (!entry.token.includes('\uFFFD')) assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
    else assert.notDeepEqual(entry.bytes, [...Buffer.from(entry.token, 'utf8')]);
  }
});

test('same seed twice gives the same text', async () => {
  const request = { messages: user('Tell me a story'), max_tokens: 12, temperature: 1.0, seed: 1234, ignore_eos: true };
  const first = await openai.chat.completions.create(request);
  const second = await openai.chat.completions.create(request);
  const text = (r) => (r.choices[0].message.reasoning_content ?? '') + (r.choices[0].message.content ?? '');
  assert.equal(text(first), text(second));
  assert.equal(first.usage.completion_tokens, 12);
});

test('completions: prompt as string, strings, token ids and token-id lists', async () => {
  const ids = (await rawPost(server, '/tokenize', JSON.stringify({ prompt: 'hello world' }), auth)).json.tokens;
  const cases = [['hello world', 1], [['hello', 'world', 'again'], 3], [ids, 1], [[ids, ids.slice(0, 2)], 2]];
  for (const [prompt, choices] of cases) {
    const response = await openai.completions.create({ model: 'tiny', prompt, max_tokens: 4, temperature: 0 });
    assert.equal(response.object, 'text_completion');
    assert.deepEqual(response.choices.map((c) => c.index), [...Array(choices).keys()]);
    assert.ok(response.usage.completion_tokens <= 4 * choices);
  }
  // Greedy from the same tokens: the string and the id forms agree.
  const byText = await openai.completions.create({ prompt: 'hello world', max_tokens: 4, temperature: 0 });
  const byIds = await openai.completions.create({ prompt: ids, max_tokens: 4, temperature: 0 });
  assert.equal(byText.choices[0].text, byIds.choices[0].text);
  assert.equal(byText.usage.prompt_tokens, ids.length);
});

test('completions: n, streaming with usage, logprobs and echo', async () => {
  const n = await openai.completions.create({ prompt: 'abc', max_tokens: 3, n: 3, seed: 5 });
  assert.equal(n.choices.length, 3);
  const chunks = [];
  for await (const chunk of await openai.completions.create({
    prompt: 'abc', max_tokens: 5, stream: true, stream_options: { include_usage: true }, ignore_eos: true })) {
    chunks.push(chunk);
  }
  assert.equal(chunks.at(-1).usage.completion_tokens, 5);
  assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason === 'length').length, 1);
  const ids = (await rawPost(server, '/tokenize', JSON.stringify({ prompt: 'one two three' }), auth)).json.tokens;
  const echo = await openai.completions.create({ prompt: 'one two three', max_tokens: 0, echo: true, logprobs: 2 });
  const logprobs = echo.choices[0].logprobs;
  assert.equal(logprobs.tokens.length, ids.length);
  assert.equal(logprobs.token_logprobs[0], null);
  assert.ok(logprobs.token_logprobs.slice(1).every((l) => l <= 0));
  assert.ok(echo.choices[0].text.startsWith('one two three'));
  // text_offset indexes the echoed text; the BOS the tokenizer added is no part of it.
  assert.equal(logprobs.tokens[0], '<BOS_TOKEN>');
  assert.deepEqual(logprobs.text_offset.slice(0, 2), [0, 0]);
  logprobs.tokens.slice(1).forEach((token, i) => {
    assert.ok(echo.choices[0].text.startsWith(token, logprobs.text_offset[i + 1]), `token ${i + 1}`);
  });
  // Offsets count characters (code points): the two byte tokens of 'é' both point at it.
  const accented = await openai.completions.create({ prompt: 'héllo', max_tokens: 0, echo: true, logprobs: 0 });
  assert.equal(accented.choices[0].text, 'héllo');
  assert.deepEqual(accented.choices[0].logprobs.tokens, ['<BOS_TOKEN>', 'h', '\ufffd', '\ufffd', 'l', 'lo']);
  assert.deepEqual(accented.choices[0].logprobs.text_offset, [0, 0, 1, 1, 2, 3]);
  // A prompt only scored may fill the whole context; one token more, or one to generate, may not.
  const full = Array.from({ length: maxModelLen }, (_, i) => 5 + (i % 50));
  const whole = await openai.completions.create({ prompt: full, max_tokens: 0, echo: true, logprobs: 0 });
  assert.equal(whole.usage.prompt_tokens, maxModelLen);
  await assert.rejects(openai.completions.create({ prompt: [...full, 5], max_tokens: 0, echo: true }), /400/);
  await assert.rejects(openai.completions.create({ prompt: full, max_tokens: 1 }), /400/);
  const scored = await openai.completions.create({ prompt: 'one', max_tokens: 3, logprobs: 2, ignore_eos: true });
  assert.equal(scored.choices[0].logprobs.tokens.length, 3);
  assert.equal(Object.keys(scored.choices[0].logprobs.top_logprobs[0]).length <= 2, true);
});

// The tiny model writes byte tokens that do not form UTF-8; the detokenizer holds them back and
// releases them as U+FFFD when generation ends. That last release is checked for stop strings too.
test('a stop string in text released at the length limit is not emitted', async () => {
  const body = { prompt: 'a b c', max_tokens: 30, temperature: 0, stop: ['\ufffd\ufffd'] };
  const plain = await openai.completions.create({ ...body, stop: undefined });
  const response = await openai.completions.create(body);
  assert.ok(!response.choices[0].text.includes('\ufffd\ufffd'), JSON.stringify(response.choices[0].text));
  let streamed = '';
  for await (const chunk of await openai.completions.create({ ...body, stream: true })) streamed += chunk.choices[0]?.text ?? '';
  assert.equal(streamed, response.choices[0].text);
  if (plain.choices[0].text.includes('\ufffd\ufffd')) {
    assert.equal(response.choices[0].finish_reason, 'stop');
    assert.equal(response.choices[0].text, plain.choices[0].text.slice(0, plain.choices[0].text.indexOf('\ufffd\ufffd')));
  }
});

// vLLM's skip_special_tokens and return_tokens_as_token_ids. <|NEW_FILE|> is special in the tiny
// tokenizer (as in North's) and not one of the chat format's markers; logit_bias makes the random
// model write it.
test('skip_special_tokens leaves special tokens out of the text; logprobs can name token ids', async () => {
  const NEW_FILE = 1020;
  const forced = { prompt: 'one', max_tokens: 3, ignore_eos: true, logprobs: 1, logit_bias: { [NEW_FILE]: 100 } };
  const shown = await openai.completions.create({ ...forced, return_tokens_as_token_ids: true });
  assert.equal(shown.choices[0].text, '<|NEW_FILE|>'.repeat(3));
  assert.deepEqual(shown.choices[0].logprobs.tokens, Array(3).fill(`token_id:${NEW_FILE}`));
  assert.deepEqual(shown.choices[0].logprobs.text_offset, [0, 12, 24]);
  const skipped = await openai.completions.create({ ...forced, skip_special_tokens: true });
  assert.equal(skipped.choices[0].text, '');
  assert.equal(skipped.usage.completion_tokens, 3);
  assert.deepEqual(skipped.choices[0].logprobs.tokens, Array(3).fill('<|NEW_FILE|>'));
  assert.deepEqual(skipped.choices[0].logprobs.text_offset, [0, 0, 0]);

  // Sampled between <|NEW_FILE|> and a word: the same seed gives the same tokens, so the skipped
  // text is the shown text without the special token, streamed or not.
  const [a] = (await rawPost(server, '/tokenize', JSON.stringify({ prompt: ' a', add_special_tokens: false }), auth)).json.tokens;
  const mixed = { prompt: 'one', max_tokens: 16, ignore_eos: true, seed: 7, temperature: 1,
    logit_bias: { [NEW_FILE]: 100, [a]: 100 } };
  const plain = (await openai.completions.create(mixed)).choices[0].text;
  const bare = (await openai.completions.create({ ...mixed, skip_special_tokens: true })).choices[0].text;
  assert.equal(bare, plain.replaceAll('<|NEW_FILE|>', ''));
  let streamed = '';
  for await (const chunk of await openai.completions.create({ ...mixed, skip_special_tokens: true, stream: true })) {
    streamed += chunk.choices[0]?.text ?? '';
  }
  assert.equal(streamed, bare);

  // Chat: the special token goes, the answer's markers still reach the parser.
  const chat = { messages: user('x'), max_tokens: 3, ignore_eos: true, logit_bias: { [NEW_FILE]: 100 },
    chat_template_kwargs: { enable_thinking: false } };
  const chatShown = await openai.chat.completions.create(chat);
  assert.equal(chatShown.choices[0].message.content, '<|NEW_FILE|>'.repeat(3));
  const chatSkipped = await openai.chat.completions.create({ ...chat, skip_special_tokens: true, logprobs: true, return_tokens_as_token_ids: true });
  assert.equal(chatSkipped.choices[0].message.content ?? '', '');
  assert.deepEqual(chatSkipped.choices[0].logprobs.content.map((e) => e.token), Array(3).fill(`token_id:${NEW_FILE}`));
  // <|END_THINKING|> is special too, and a marker: kept, it still ends the reasoning.
  const thinking = { messages: user('x'), max_tokens: 12, ignore_eos: true, seed: 7, temperature: 1,
    logit_bias: { 1011: 100, [a]: 100 } };
  const marked = await openai.chat.completions.create(thinking);
  const markedSkipped = await openai.chat.completions.create({ ...thinking, skip_special_tokens: true });
  assert.ok(marked.choices[0].message.reasoning_content && marked.choices[0].message.content);
  assert.deepEqual(markedSkipped.choices[0].message, marked.choices[0].message);
  await expectApiError(openai.completions.create({ prompt: 'x', skip_special_tokens: 'yes' }), { status: 400, param: 'skip_special_tokens' });
});

test('tokenize and detokenize round trip', async () => {
  const tokens = await rawPost(server, '/tokenize', JSON.stringify({ prompt: 'round trip', add_special_tokens: false }), auth);
  assert.equal(tokens.status, 200);
  assert.equal(tokens.json.count, tokens.json.tokens.length);
  const text = await rawPost(server, '/detokenize', JSON.stringify({ tokens: tokens.json.tokens }), auth);
  assert.equal(text.json.prompt, 'round trip');
  const chat = await rawPost(server, '/tokenize', JSON.stringify({ messages: user('x') }), auth);
  assert.ok(chat.json.count > tokens.json.count);
});

// The tiny model has North's layer pattern with a 16-token window: decoding the answer slides the
// window far past the end of the prompt, so reuse needs the blocks the sliding layers released.
test('prefix cache: the next chat turn and an exact replay reuse the previous prompt', async () => {
  const code = Array.from({ length: 120 }, (_, i) => `  total_${i} = total_${i} + values[${i}] * ${i}`).join('\n');
  const turn1 = user(`Review this function:\ndef tally(values):\n${code}\n  return total`);
  const ask = (messages) => openai.chat.completions.create({ messages, max_tokens: 40, ignore_eos: true,
    chat_template_kwargs: { enable_thinking: false } });
  const first = await ask(turn1);
  const promptTokens = first.usage.prompt_tokens;
  assert.ok(promptTokens > 1300, `prompt of ${promptTokens} tokens`);
  const turn2 = [...turn1, { role: 'assistant', content: first.choices[0].message.content ?? '' },
    { role: 'user', content: 'Now rename total to sum everywhere.' }];
  const second = await ask(turn2);
  assert.ok(second.usage.prompt_tokens_details.cached_tokens >= 0.95 * promptTokens,
    `turn 2 reused ${second.usage.prompt_tokens_details.cached_tokens} of ${promptTokens}`);
  const replay = await ask(turn1);
  assert.ok(replay.usage.prompt_tokens_details.cached_tokens >= 0.95 * promptTokens,
    `the replay reused ${replay.usage.prompt_tokens_details.cached_tokens} of ${promptTokens}`);
});

test('bad input: each with its clear error', async () => {
  const malformed = await rawPost(server, '/v1/chat/completions', '{"messages": [', auth);
  assert.equal(malformed.status, 400);
  assert.match(malformed.json.error.message, /malformed JSON/);
  assert.equal(malformed.json.error.type, 'invalid_request_error');
  await expectApiError(openai.chat.completions.create({ messages: user('x'), temperature: 'hot' }), { status: 400, param: 'temperature' });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), top_p: 2 }), { status: 400, param: 'top_p' });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), n: 0 }), { status: 400, param: 'n' });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), logit_bias: { '999999': 1 } }), { status: 400, param: 'logit_bias.999999' });
  await expectApiError(openai.chat.completions.create({ messages: [{ role: 'robot', content: 'x' }] }), { status: 400, param: 'messages[0].role' });
  await expectApiError(openai.completions.create({ prompt: [1, 99999], max_tokens: 1 }), { status: 400, param: 'prompt[1]' });
  await expectApiError(openai.chat.completions.create({ model: 'gpt-9', messages: user('x') }), { status: 404, param: 'model' });
  // The HTTP layer's own refusals are counted in /metrics too.
  const responses = (code) => metric(server, `mkserve_http_responses_total{code="${code}"}`).catch(() => 0);
  const refusedBefore = await responses(413);
  const big = await rawPost(server, '/v1/chat/completions',
    JSON.stringify({ messages: user('x'.repeat(MAX_BODY * 2)) }), auth);
  assert.equal(big.status, 413);
  assert.match(big.json.error.message, /max-body-bytes/);
  assert.equal(await responses(413), refusedBefore + 1);
  const route = await fetch(`${server.url}/v1/nothing`, { headers: auth });
  assert.equal(route.status, 404);
  assert.ok((await route.json()).error.message.includes('/v1/nothing'));
});

test('API key: 401 without or with a wrong key; CORS preflight needs none', async () => {
  const anonymous = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await expectApiError(anonymous.chat.completions.create({ messages: user('x'), max_tokens: 1 }), { status: 401 });
  const missing = await rawPost(server, '/v1/completions', JSON.stringify({ prompt: 'x' }));
  assert.equal(missing.status, 401);
  assert.equal(missing.json.error.code, 'invalid_api_key');
  const preflight = await fetch(`${server.url}/v1/chat/completions`, { method: 'OPTIONS', headers: {
    Origin: 'http://app.example', 'Access-Control-Request-Method': 'POST', 'Access-Control-Request-Headers': 'authorization,content-type' } });
  assert.equal(preflight.status, 204);
  assert.equal(preflight.headers.get('access-control-allow-origin'), 'http://app.example');
  assert.match(preflight.headers.get('access-control-allow-methods'), /POST/);
});

test('64 concurrent streams all complete', async () => {
  const runs = Array.from({ length: 64 }, async (_, i) => {
    const stream = await openai.chat.completions.create({
      messages: user(`stream ${i}`), max_tokens: 8, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    let finish = null, usage = null;
    for await (const chunk of stream) {
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    return { finish, usage };
  });
  const results = await Promise.all(runs);
  for (const { finish, usage } of results) {
    assert.equal(finish, 'length');
    assert.equal(usage.completion_tokens, 8);
  }
  assert.ok(await waitFor(async () => (await metric(server, 'mkserve_kv_blocks_used')) === 0));
});

test('a client aborting mid-stream frees its KV and the server stays healthy', async () => {
  const baseline = await metric(server, 'mkserve_kv_blocks_used');
  const cancelledBefore = await metric(server, 'mkserve_requests_total{outcome="cancelled"}');
  // A completion stream: every token reaches the client as it is made. (A chat answer with
  // reasoning off is held back until its first Command-4 marker, and the random tiny model may
  // emit none for thousands of tokens: the stream would then end before the client saw 3 chunks.)
  const started = Date.now();
  const stream = await openai.completions.create({ prompt: 'a long one', ignore_eos: true, stream: true,
    max_tokens: maxModelLen - 16 });
  let seen = 0;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.text) seen++;
    if (seen >= 3) break;  // leaving the loop aborts the HTTP request
  }
  assert.ok(Date.now() - started < 5000, `3 chunks took ${Date.now() - started} ms`);
  assert.ok(await metric(server, 'mkserve_num_requests_running') <= 1);
  assert.ok(await waitFor(async () => (await metric(server, 'mkserve_kv_blocks_used')) === baseline),
    'KV blocks back to baseline');
  const cancelled = () => metric(server, 'mkserve_requests_total{outcome="cancelled"}');
  assert.ok(await waitFor(async () => (await cancelled()) === cancelledBefore + 1),
    `cancelled ${await cancelled()}, expected ${cancelledBefore + 1}; ${await outcomes(server)}`);
  assert.equal((await fetch(`${server.url}/health`)).status, 200);

  // Non-streaming: the client gives up; the request is cancelled too.
  const controller = new AbortController();
  const pending = fetch(`${server.url}/v1/completions`, { method: 'POST', signal: controller.signal,
    headers: { 'Content-Type': 'application/json', ...auth },
    body: JSON.stringify({ prompt: 'x', max_tokens: maxModelLen - 8, ignore_eos: true }) }).catch(() => null);
  assert.ok(await waitFor(async () => (await metric(server, 'mkserve_kv_blocks_used')) > baseline));
  controller.abort();
  await pending;
  assert.ok(await waitFor(async () => (await metric(server, 'mkserve_kv_blocks_used')) === baseline),
    'KV blocks back to baseline after a non-streaming abort');
  const after = await openai.chat.completions.create({ messages: user('still there?'), max_tokens: 2 });
  assert.ok(after.choices.length === 1);
});

// Deterministic flows through the scripted backend: reasoning, tool calls (single and parallel),
// stop strings and the Command-4 parser, streaming and not, through the official SDK.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { makeTinyModel, writeScript, startServer, client, rawPost, user } from './harness.mjs';

const TOOL_ARGS = { city: 'Paris', unit: 'celsius' };
// The first matching rule wins, and the tool schemas in the prompt mention "weather": the
// 'parallel' rule must come before the 'weather' one.
const SCRIPT = [
  { prompt_contains: 'greet', output: 'The user greets me.<|END_THINKING|><|START_TEXT|>Hello there, friend!<|END_TEXT|>' },
  { prompt_contains: 'parallel', output: '<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Oslo"}}, {"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}]<|END_ACTION|>' },
  { prompt_contains: 'weather', output: `I should call the tool.<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": ${JSON.stringify(TOOL_ARGS)}}]<|END_ACTION|>` },
  { prompt_contains: 'stopword', output: 'Thinking.<|END_THINKING|><|START_TEXT|>one two STOP three<|END_TEXT|>' },
  { prompt_contains: 'direct', output: '<|START_TEXT|>Direct answer.<|END_TEXT|>' },
  { prompt_contains: 'echo', output: ' and then some more words' },
];
const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } } } } },
  { type: 'function', function: { name: 'get_time', description: 'Current time', parameters: { type: 'object', properties: {} } } },
];

let model, server, openai;
before(async () => {
  model = makeTinyModel();
  const script = writeScript(model.dir, SCRIPT);
  server = await startServer(model.modelDir, ['--backend', `scripted:${script}`]);
  openai = client(server);
});
after(async () => { await server?.stop(); model?.cleanup(); });


async function tokenCount(text) {
  const response = await rawPost(server, '/tokenize', JSON.stringify({ prompt: text, add_special_tokens: false }));
  return response.json.count;
}

async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

test('reasoning and content, non-streaming, with exact usage', async () => {
  const response = await openai.chat.completions.create({ model: 'tiny', messages: user('greet'), max_tokens: 100 });
  const message = response.choices[0].message;
  assert.equal(message.reasoning_content, 'The user greets me.');
  assert.equal(message.content, 'Hello there, friend!');
  assert.equal(response.choices[0].finish_reason, 'stop');
  assert.equal(response.object, 'chat.completion');
  // Every scripted token plus the final end-of-turn token is a completion token.
  assert.equal(response.usage.completion_tokens, (await tokenCount(SCRIPT.find((r) => r.prompt_contains === 'greet').output)) + 1);
  const prompt = await rawPost(server, '/tokenize', JSON.stringify({ messages: user('greet') }));
  assert.equal(response.usage.prompt_tokens, prompt.json.count);
  assert.equal(response.usage.total_tokens, response.usage.prompt_tokens + response.usage.completion_tokens);
});

test('reasoning and content, streaming: role first, deltas, finish, usage chunk', async () => {
  const stream = await openai.chat.completions.create({
    messages: user('greet'), max_tokens: 100, stream: true, stream_options: { include_usage: true } });
  const chunks = await collect(stream);
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const reasoning = chunks.map((c) => c.choices[0]?.delta.reasoning_content ?? '').join('');
  const content = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
  assert.equal(reasoning, 'The user greets me.');
  assert.equal(content, 'Hello there, friend!');
  const finishes = chunks.filter((c) => c.choices[0]?.finish_reason);
  assert.equal(finishes.length, 1);
  assert.equal(finishes[0].choices[0].finish_reason, 'stop');
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, (await tokenCount(SCRIPT.find((r) => r.prompt_contains === 'greet').output)) + 1);
  for (const chunk of chunks.slice(0, -1)) assert.equal(chunk.usage, null);
  assert.ok(chunks.every((c) => c.id === chunks[0].id));
});

test('exact SSE framing on the wire', async () => {
  const response = await rawPost(server, '/v1/chat/completions',
    JSON.stringify({ messages: user('greet'), max_tokens: 100, stream: true }));
  assert.equal(response.status, 200);
  assert.match(response.headers.get('content-type'), /^text\/event-stream/);
  const events = response.text.split('\n\n');
  assert.equal(events.pop(), '');  // the body ends with a blank line
  assert.equal(events.at(-1), 'data: [DONE]');
  for (const event of events.slice(0, -1)) {
    assert.ok(event.startsWith('data: {'), event);
    assert.ok(!event.slice(6).includes('\n'), 'one line per event');
    JSON.parse(event.slice(6));
  }
});

test('single tool call, non-streaming', async () => {
  const response = await openai.chat.completions.create({ messages: user('weather'), tools: TOOLS, max_tokens: 200 });
  const choice = response.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls');
  assert.equal(choice.message.content, null);
  assert.equal(choice.message.reasoning_content, 'I should call the tool.');
  assert.equal(choice.message.tool_calls.length, 1);
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  assert.ok(call.id.length > 0);
  assert.deepEqual(JSON.parse(call.function.arguments), TOOL_ARGS);
});

test('single tool call, streaming: fragments concatenate to valid JSON', async () => {
  const stream = await openai.chat.completions.create({ messages: user('weather'), tools: TOOLS, max_tokens: 200, stream: true });
  const chunks = await collect(stream);
  const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
  assert.ok(deltas.length >= 1);
  assert.equal(deltas[0].index, 0);
  assert.equal(deltas[0].type, 'function');
  assert.equal(deltas[0].function.name, 'get_weather');
  assert.ok(deltas[0].id);
  const args = deltas.map((d) => d.function?.arguments ?? '').join('');
  assert.deepEqual(JSON.parse(args), TOOL_ARGS);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  // The SDK's own accumulator agrees.
  const runner = openai.beta.chat.completions.stream({ messages: user('weather'), tools: TOOLS, max_tokens: 200 });
  const final = await runner.finalChatCompletion();
  assert.deepEqual(JSON.parse(final.choices[0].message.tool_calls[0].function.arguments), TOOL_ARGS);
});

test('parallel tool calls, streaming and not', async () => {
  const response = await openai.chat.completions.create({ messages: user('parallel'), tools: TOOLS, max_tokens: 200 });
  const calls = response.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => c.function.name), ['get_weather', 'get_time']);
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { city: 'Oslo' });
  assert.deepEqual(JSON.parse(calls[1].function.arguments), {});
  assert.notEqual(calls[0].id, calls[1].id);

  const chunks = await collect(await openai.chat.completions.create({
    messages: user('parallel'), tools: TOOLS, max_tokens: 200, stream: true }));
  const args = ['', ''];
  const names = [];
  for (const delta of chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])) {
    if (delta.function?.name) names[delta.index] = delta.function.name;
    args[delta.index] += delta.function?.arguments ?? '';
  }
  assert.deepEqual(names, ['get_weather', 'get_time']);
  assert.deepEqual(JSON.parse(args[0]), { city: 'Oslo' });
  assert.deepEqual(JSON.parse(args[1]), {});
});

test('parallel_tool_calls false keeps only the first call, streaming and not', async () => {
  const request = { messages: user('parallel'), tools: TOOLS, max_tokens: 200, parallel_tool_calls: false };
  const response = await openai.chat.completions.create(request);
  const calls = response.choices[0].message.tool_calls;
  assert.deepEqual(calls.map((c) => c.function.name), ['get_weather']);
  assert.deepEqual(JSON.parse(calls[0].function.arguments), { city: 'Oslo' });
  assert.equal(response.choices[0].finish_reason, 'tool_calls');

  const chunks = await collect(await openai.chat.completions.create({ ...request, stream: true }));
  const deltas = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? []);
  // Not even a partial piece of the second call may be sent.
  assert.ok(deltas.length >= 1);
  assert.ok(deltas.every((d) => d.index === 0), JSON.stringify(deltas));
  assert.deepEqual(deltas.filter((d) => d.function?.name).map((d) => d.function.name), ['get_weather']);
  assert.deepEqual(JSON.parse(deltas.map((d) => d.function?.arguments ?? '').join('')), { city: 'Oslo' });
  assert.equal(chunks.filter((c) => c.choices[0]?.finish_reason).at(-1).choices[0].finish_reason, 'tool_calls');
});

test('completions echo with logprobs: every one of n choices carries the prompt scores', async () => {
  const prompt = 'echo this prompt';
  const ids = (await rawPost(server, '/tokenize', JSON.stringify({ prompt }))).json.tokens;
  const check = (choices) => {
    assert.equal(choices.length, 3);
    const first = choices[0].logprobs;
    for (const choice of choices) {
      assert.ok(choice.text.startsWith(prompt), choice.text);
      const { tokens, token_logprobs: scores } = choice.logprobs;
      assert.ok(tokens.length > ids.length, `${tokens.length} positions for ${ids.length} prompt tokens`);
      assert.equal(scores[0], null);
      assert.ok(scores.slice(1, ids.length).every((l) => typeof l === 'number' && l <= 0));
      // The prompt part is the same for every sibling.
      assert.deepEqual(tokens.slice(0, ids.length), first.tokens.slice(0, ids.length));
      assert.deepEqual(scores.slice(0, ids.length), first.token_logprobs.slice(0, ids.length));
    }
  };
  const request = { prompt, max_tokens: 4, n: 3, echo: true, logprobs: 1 };
  const response = await openai.completions.create(request);
  check(response.choices);

  const streamed = [{ index: 0 }, { index: 1 }, { index: 2 }].map((c) => ({ ...c, text: '', logprobs: { tokens: [], token_logprobs: [] } }));
  for await (const chunk of await openai.completions.create({ ...request, stream: true })) {
    for (const choice of chunk.choices) {
      const into = streamed[choice.index];
      into.text += choice.text;
      into.logprobs.tokens.push(...(choice.logprobs?.tokens ?? []));
      into.logprobs.token_logprobs.push(...(choice.logprobs?.token_logprobs ?? []));
    }
  }
  check(streamed);
  assert.deepEqual(streamed.map((c) => c.text), response.choices.map((c) => c.text));
});

test('stop string is never emitted, streaming and not', async () => {
  const response = await openai.chat.completions.create({ messages: user('stopword'), stop: ['STOP'], max_tokens: 100 });
  assert.equal(response.choices[0].message.content, 'one two ');
  assert.equal(response.choices[0].finish_reason, 'stop');
  const chunks = await collect(await openai.chat.completions.create({
    messages: user('stopword'), stop: 'STOP', max_tokens: 100, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'one two ');
});

test('include_stop_str_in_output ends the text with the match, streaming and not', async () => {
  const body = { messages: user('stopword'), stop: ['STOP', 'three'], max_tokens: 100, include_stop_str_in_output: true };
  const response = await openai.chat.completions.create(body);
  assert.equal(response.choices[0].message.content, 'one two STOP');
  assert.equal(response.choices[0].finish_reason, 'stop');
  const chunks = await collect(await openai.chat.completions.create({ ...body, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'one two STOP');
});

// "TEXT" and "THINKING|>" occur only inside the script's markers, which a stop string matches
// whole or not at all: the answer is parsed as without them, up to the real "STOP".
test('stop strings never cut a marker in two, streaming and not', async () => {
  const body = { messages: user('stopword'), stop: ['TEXT', 'THINKING|>', '|><|', 'STOP'], max_tokens: 100 };
  const response = await openai.chat.completions.create(body);
  assert.equal(response.choices[0].message.reasoning_content, 'Thinking.');
  assert.equal(response.choices[0].message.content, 'one two ');
  assert.equal(response.choices[0].finish_reason, 'stop');
  const chunks = await collect(await openai.chat.completions.create({ ...body, stream: true }));
  assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'one two ');
  const marker = await openai.chat.completions.create({ ...body, stop: ['<|END_TEXT|>'], include_stop_str_in_output: true });
  assert.equal(marker.choices[0].message.content, 'one two STOP three');
  assert.equal(marker.choices[0].finish_reason, 'stop');
});

test('reasoning off through chat_template_kwargs', async () => {
  const response = await openai.chat.completions.create({
    messages: user('direct'), max_tokens: 50, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(response.choices[0].message.content, 'Direct answer.');
  assert.equal(response.choices[0].message.reasoning_content, undefined);
});

test('max_tokens cuts the output with finish_reason length', async () => {
  const response = await openai.chat.completions.create({ messages: user('greet'), max_tokens: 3 });
  assert.equal(response.choices[0].finish_reason, 'length');
  assert.equal(response.usage.completion_tokens, 3);
});

test('n = 2 gives two choices', async () => {
  const response = await openai.chat.completions.create({ messages: user('greet'), max_tokens: 100, n: 2 });
  assert.deepEqual(response.choices.map((c) => c.index), [0, 1]);
  for (const choice of response.choices) assert.equal(choice.message.content, 'Hello there, friend!');
});

// Chat API discipline against hostile or careless clients, through the scripted backend and the
// official SDK: tool calls only when the request allows them, Command-4 output the real model
// writes (thinking with reasoning off, prefills, malformed action blocks), /tokenize counting
// the chat prompt exactly, and request fields mkserve cannot honour refused by name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { makeTinyModel, writeScript, startServer, client, rawPost, user } from './harness.mjs';

const READ_CALL = '{"tool_call_id": "0", "tool_name": "read", "parameters": {"path": "a.txt"}}';
const BAD_ALARM = '{"tool_call_id": "0", "tool_name": "set_alarm", "parameters": {"time": 15:30}}';
// The first matching rule wins; every prompt holds the tool schemas, so the words are distinct.
const SCRIPT = [
  { prompt_contains: 'titlerequest', output: `<|END_THINKING|><|START_ACTION|>[${READ_CALL}]<|END_ACTION|>` },
  { prompt_contains: 'thinkaloud', output: "I'm\nthinking<|END_THINKING|><|START_TEXT|>Hello<|END_TEXT|>" },
  { prompt_contains: 'haiku', output: ' moonlight falls<|END_TEXT|>' },
  { prompt_contains: 'alarmclock', output: `<|END_THINKING|><|START_ACTION|>[${BAD_ALARM}, {"tool_call_id": "1", "tool_name": "get_time", "parameters": {}}]<|END_ACTION|>` },
];
const tool = (name) => ({ type: 'function', function: { name, description: `The ${name} tool`, parameters: { type: 'object', properties: { path: { type: 'string' } } } } });

let model, server, openai;
before(async () => {
  model = makeTinyModel();
  server = await startServer(model.modelDir, ['--backend', `scripted:${writeScript(model.dir, SCRIPT)}`]);
  openai = client(server);
});
after(async () => { await server?.stop(); model?.cleanup(); });


async function both(request) {
  const response = await openai.chat.completions.create({ max_tokens: 200, ...request });
  const chunks = [];
  for await (const chunk of await openai.chat.completions.create({ max_tokens: 200, ...request, stream: true })) chunks.push(chunk);
  const deltas = chunks.flatMap((c) => c.choices.map((choice) => choice.delta));
  const streamed = {
    content: deltas.map((d) => d.content ?? '').join(''),
    reasoning: deltas.map((d) => d.reasoning_content ?? '').join(''),
    toolCalls: deltas.flatMap((d) => d.tool_calls ?? []),
    finish: chunks.map((c) => c.choices[0]?.finish_reason).find((f) => f),
  };
  return { message: response.choices[0].message, finish: response.choices[0].finish_reason, streamed };
}

function assertNoToolCall({ message, finish, streamed }, content) {
  assert.equal(message.tool_calls, undefined);
  assert.equal(message.content, content);
  assert.equal(finish, 'stop');
  assert.deepEqual(streamed.toolCalls, []);
  assert.equal(streamed.content, content);
  assert.equal(streamed.finish, 'stop');
}

test('a request without tools never gets a tool call', async () => {
  assertNoToolCall(await both({ messages: user('titlerequest') }), `[${READ_CALL}]`);
});

test('tool_choice none never gets a tool call', async () => {
  assertNoToolCall(await both({ messages: user('titlerequest'), tools: [tool('read'), tool('write')], tool_choice: 'none' }),
                   `[${READ_CALL}]`);
});

test('a call to a tool the request did not declare comes back as text', async () => {
  assertNoToolCall(await both({ messages: user('titlerequest'), tools: [tool('write')] }), READ_CALL);
  // A named tool_choice is enforced by constrained decoding (structured.test.mjs): a model cannot
  // call another tool then, and this backend, which replays fixed text, would break the grammar.
  const allowed = await both({ messages: user('titlerequest'), tools: [tool('read'), tool('write')] });
  assert.equal(allowed.message.tool_calls[0].function.name, 'read');
  assert.equal(allowed.finish, 'tool_calls');
});

test('with reasoning off, thinking the model closes with END_THINKING is reasoning', async () => {
  const { message, streamed } = await both({ messages: user('thinkaloud'), chat_template_kwargs: { enable_thinking: false } });
  assert.equal(message.reasoning_content, "I'm\nthinking");
  assert.equal(message.content, 'Hello');
  assert.equal(streamed.reasoning, "I'm\nthinking");
  assert.equal(streamed.content, 'Hello');
});

test('an assistant prefill is continued as answer text', async () => {
  const messages = [...user('haiku'), { role: 'assistant', content: 'Autumn' }];
  const { message, finish, streamed } = await both({ messages });
  assert.equal(message.content, ' moonlight falls');
  assert.equal(message.reasoning_content, undefined);
  assert.equal(finish, 'stop');
  assert.equal(streamed.content, ' moonlight falls');
  assert.equal(streamed.reasoning, '');
  // The prompt ends inside the prefill's text, as transformers' continue_final_message makes it.
  const tokens = await rawPost(server, '/tokenize', JSON.stringify({ messages }));
  const prompt = await rawPost(server, '/detokenize', JSON.stringify({ tokens: tokens.json.tokens }));
  assert.ok(prompt.json.prompt.endsWith('<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_TEXT|>Autumn'), prompt.json.prompt);
});

test('a malformed call is text, its valid sibling a call, never both', async () => {
  const { message, finish, streamed } = await both({ messages: user('alarmclock'), tools: [tool('set_alarm'), tool('get_time')] });
  assert.equal(message.content, BAD_ALARM);
  assert.equal(message.tool_calls.length, 1);
  assert.equal(message.tool_calls[0].function.name, 'get_time');
  assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), {});
  assert.equal(finish, 'tool_calls');
  assert.equal(streamed.content, BAD_ALARM);
  assert.deepEqual(streamed.toolCalls.filter((c) => c.function?.name).map((c) => c.function.name), ['get_time']);
  assert.deepEqual(JSON.parse(streamed.toolCalls.map((c) => c.function?.arguments ?? '').join('')), {});
  assert.equal(streamed.finish, 'tool_calls');
});

test('/tokenize counts exactly the prompt the chat endpoint builds', async () => {
  const base = { messages: [{ role: 'system', content: 'Be brief.' }, ...user('thinkaloud')] };
  const variants = [
    base,
    { ...base, tools: [tool('read'), tool('write')] },
    { ...base, tools: [tool('read'), tool('write')], tool_choice: { type: 'function', function: { name: 'write' } } },
    { ...base, chat_template_kwargs: { enable_thinking: false, platform_instruction_override: 'Answer in French.' } },
    { ...base, reasoning_effort: 'none' },
    { ...base, messages: [...base.messages, { role: 'assistant', content: 'Autumn' }] },
    { ...base, documents: [{ title: 'notes', text: 'the secret word is basalt' }] },
  ];
  const counts = new Set();
  for (const request of variants) {
    const response = await openai.chat.completions.create({ ...request, max_tokens: 5 });
    const tokens = await rawPost(server, '/tokenize', JSON.stringify(request));
    assert.equal(tokens.status, 200, tokens.text);
    assert.equal(tokens.json.count, response.usage.prompt_tokens, JSON.stringify(request));
    counts.add(tokens.json.count);
  }
  assert.equal(counts.size, variants.length, 'every variant changes the prompt');
});

test('documents are rendered as a document tool result before the first answer', async () => {
  const request = { messages: user('thinkaloud'), documents: [{ title: 'notes', text: 'the secret word is basalt' }, 'plain text'] };
  const tokens = await rawPost(server, '/tokenize', JSON.stringify(request));
  assert.equal(tokens.status, 200, tokens.text);
  const prompt = (await rawPost(server, '/detokenize', JSON.stringify({ tokens: tokens.json.tokens }))).json.prompt;
  assert.ok(prompt.includes('"name": "direct-injected-document"'), prompt);
  assert.ok(prompt.includes('"0": {"title": "notes", "text": "the secret word is basalt"}'), prompt);
  assert.ok(prompt.includes('"1": "plain text"'), prompt);
  const bad = await rawPost(server, '/v1/chat/completions', JSON.stringify({ ...request, documents: [1] }));
  assert.equal(bad.status, 400, bad.text);
  assert.equal(bad.json.error.param, 'documents[0]');
});

test('unknown request fields are ignored', async () => {
  const response = await rawPost(server, '/v1/chat/completions', JSON.stringify({
    messages: user('thinkaloud'), max_tokens: 20, some_future_field: { a: 1 }, metadata: { run: '7' },
    prediction: { type: 'content', content: 'Hello' }, service_tier: 'auto', store: false }));
  assert.equal(response.status, 200, response.text);
  const completion = await rawPost(server, '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 2, some_future_field: 1 }));
  assert.equal(completion.status, 200, completion.text);
});

test('values mkserve cannot honour are a 400 naming the field', async () => {
  const chat = [
    ['audio', { voice: 'alloy', format: 'wav' }], ['modalities', ['text', 'audio']], ['n', 1000],
    ['logit_bias', { 5: 500 }], ['stream_options', 'yes'], ['functions', [{ name: 'f' }]],
    ['web_search_options', {}], ['service_tier', 'flex'], ['store', true], ['verbosity', 'high'],
  ];
  for (const [field, value] of chat) {
    const body = { messages: user('thinkaloud'), max_tokens: 5, stream: field === 'stream_options', [field]: value };
    const response = await rawPost(server, '/v1/chat/completions', JSON.stringify(body));
    assert.equal(response.status, 400, `${field}: ${response.text}`);
    assert.ok(response.json.error.param.startsWith(field), `${field}: ${response.text}`);
  }
  const bestOf = await rawPost(server, '/v1/completions', JSON.stringify({ prompt: 'x', max_tokens: 2, best_of: 3 }));
  assert.equal(bestOf.status, 400);
  assert.equal(bestOf.json.error.param, 'best_of');
  await assert.rejects(openai.chat.completions.create({ messages: user('x'), modalities: ['audio'] }),
                       (error) => error instanceof OpenAI.APIError && error.status === 400 && error.param === 'modalities');
});

// /v1/responses through the official SDK against the scripted backend: output items (reasoning,
// message, function_call), the named stream events, a tool round trip (whole input, and through
// previous_response_id), stored responses (retrieve, input items, delete), background responses
// (polled, cancelled, deleted; streamed and resumed), conversations (/v1/conversations and `conversation`),
// text.format and the fields mkserve does not honour, refused by name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { makeTinyModel, writeScript, startServer, client, rawPost, metric } from './harness.mjs';

// The first matching rule wins: a prompt holding the tool's result also holds the question.
const SCRIPT = [
  { prompt_contains: 'broken', fault: 'error' },
  // 20 ms a step: a background response still running while the test looks at it.
  { prompt_contains: 'slowly', fault: 'hang', hang_ms: 20, output: `<|START_TEXT|>${'word '.repeat(500)}<|END_TEXT|>` },
  { prompt_contains: 'sunny', output: 'The tool answered.<|END_THINKING|><|START_TEXT|>It is sunny in Paris.<|END_TEXT|>' },
  { prompt_contains: 'weather', output: 'I should call the tool.<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}]<|END_ACTION|>' },
  { prompt_contains: 'greet', output: 'The user greets me.<|END_THINKING|><|START_TEXT|>Hello there, friend!<|END_TEXT|>' },
  { prompt_contains: 'direct', output: '<|START_TEXT|>Direct answer.<|END_TEXT|>' },
];
const TOOLS = [{
  type: 'function', name: 'get_weather', description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}];

let model, server, openai;
before(async () => {
  model = makeTinyModel();
  const script = writeScript(model.dir, SCRIPT);
  server = await startServer(model.modelDir, ['--backend', `scripted:${script}`]);
  openai = client(server);
});
after(async () => { await server?.stop(); model?.cleanup(); });

test('a reasoning item, then a message item, with usage', async () => {
  const response = await openai.responses.create({ model: 'tiny', input: 'greet me', instructions: 'Be kind.' });
  assert.equal(response.object, 'response');
  assert.match(response.id, /^resp_/);
  assert.equal(response.status, 'completed');
  assert.equal(response.instructions, 'Be kind.');
  assert.deepEqual(response.output.map((item) => item.type), ['reasoning', 'message']);
  assert.equal(response.output[0].content[0].text, 'The user greets me.');
  assert.equal(response.output[1].content[0].type, 'output_text');
  assert.equal(response.output_text, 'Hello there, friend!');
  assert.equal(response.store, true);
  const { usage } = response;
  assert.ok(usage.input_tokens > 0 && usage.output_tokens > 0);
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens);
  assert.ok(usage.output_tokens_details.reasoning_tokens > 0);
  assert.ok(usage.output_tokens_details.reasoning_tokens < usage.output_tokens);
  // The count endpoint gives the same input tokens for the same body.
  const count = await rawPost(server, '/v1/responses/input_tokens',
    JSON.stringify({ model: 'tiny', input: 'greet me', instructions: 'Be kind.' }));
  assert.equal(count.status, 200);
  assert.deepEqual(count.json, { object: 'response.input_tokens', input_tokens: usage.input_tokens });
});

test('the stream: named events in order, deltas that add up to the final items', async () => {
  const stream = await openai.responses.create({ model: 'tiny', input: 'greet me', stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types.at(-1), 'response.completed');
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  const reasoning = events.filter((e) => e.type === 'response.reasoning_text.delta').map((e) => e.delta).join('');
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(reasoning, 'The user greets me.');
  assert.equal(text, 'Hello there, friend!');
  // Every item is added before its deltas and done after them, one at a time.
  const added = events.filter((e) => e.type === 'response.output_item.added').map((e) => e.output_index);
  const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.output_index);
  assert.deepEqual(added, [0, 1]);
  assert.deepEqual(done, [0, 1]);
  assert.ok(types.indexOf('response.output_item.done') < types.lastIndexOf('response.output_item.added'));
  const final = events.at(-1).response;
  assert.equal(final.output[1].content[0].text, 'Hello there, friend!');
  assert.equal(final.usage.output_tokens, events.at(-1).response.usage.output_tokens);
});

test("the SDK's stream helper accumulates the same response", async () => {
  const stream = openai.responses.stream({ model: 'tiny', input: 'greet me' });
  let text = '';
  stream.on('response.output_text.delta', (event) => { text += event.delta; });
  const final = await stream.finalResponse();
  assert.equal(text, 'Hello there, friend!');
  assert.equal(final.status, 'completed');
  assert.deepEqual(final.output.map((item) => item.type), ['reasoning', 'message']);
  assert.equal(final.output[1].content[0].text, 'Hello there, friend!');
});

test('a function call, then its output sent back, then the answer', async () => {
  const first = await openai.responses.create({ model: 'tiny', input: 'What is the weather?', tools: TOOLS });
  const call = first.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  assert.equal(call.name, 'get_weather');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Paris' });
  assert.match(call.call_id, /\S/);
  assert.equal(first.status, 'completed');

  const second = await openai.responses.create({
    model: 'tiny', tools: TOOLS,
    input: [
      { role: 'user', content: 'What is the weather?' },
      ...first.output,
      { type: 'function_call_output', call_id: call.call_id, output: '{"sky": "sunny"}' },
    ],
  });
  assert.equal(second.output_text, 'It is sunny in Paris.');

  // The call streamed: its arguments' deltas add up to the item's arguments.
  const stream = await openai.responses.create({ model: 'tiny', input: 'What is the weather?', tools: TOOLS, stream: true });
  const events = [];
  for await (const event of stream) events.push(event);
  const args = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
  const doneArgs = events.find((e) => e.type === 'response.function_call_arguments.done');
  assert.equal(args, doneArgs.arguments);
  assert.deepEqual(JSON.parse(args), { city: 'Paris' });
});

test('a function_call_output naming no earlier call is refused, naming the item', async () => {
  const response = await rawPost(server, '/v1/responses', JSON.stringify({
    input: [{ role: 'user', content: 'hi' }, { type: 'function_call_output', call_id: 'nope', output: 'x' }],
  }));
  assert.equal(response.status, 400);
  assert.equal(response.json.error.param, 'input[1].call_id');
});

test("the answer's logprobs: one entry a token of its text, streaming and not", async () => {
  const body = { model: 'tiny', input: 'greet me', include: ['message.output_text.logprobs'], top_logprobs: 2 };
  const response = await openai.responses.create(body);
  const part = response.output.find((item) => item.type === 'message').content[0];
  assert.ok(part.logprobs.length > 1);
  assert.equal(part.logprobs.map((entry) => entry.token).join(''), part.text);
  for (const entry of part.logprobs) {
    assert.ok(entry.logprob <= 0);
    assert.equal(entry.top_logprobs.length, 2);
    assert.deepEqual(entry.bytes, [...Buffer.from(entry.token)]);
  }
  assert.equal(response.top_logprobs, 2);
  const events = [];
  for await (const event of await openai.responses.create({ ...body, stream: true })) events.push(event);
  const streamed = events.filter((e) => e.type === 'response.output_text.delta').flatMap((e) => e.logprobs);
  assert.deepEqual(streamed, part.logprobs);
  const done = events.find((e) => e.type === 'response.output_text.done');
  assert.deepEqual(done.logprobs, part.logprobs);
  // Without the include, none.
  const plain = await openai.responses.create({ model: 'tiny', input: 'greet me' });
  assert.deepEqual(plain.output.find((item) => item.type === 'message').content[0].logprobs, []);
  // vLLM's switches, as in chat: tokens named by id; special tokens hidden but the markers kept,
  // so the reasoning and the answer come out the same.
  const ids = await openai.responses.create({ ...body, return_tokens_as_token_ids: true, skip_special_tokens: true });
  const idPart = ids.output.find((item) => item.type === 'message').content[0];
  assert.equal(idPart.text, part.text);
  assert.deepEqual(ids.output.map((item) => item.type), response.output.map((item) => item.type));
  assert.ok(idPart.logprobs.every((entry) => /^token_id:\d+$/.test(entry.token)), JSON.stringify(idPart.logprobs[0]));
  assert.deepEqual(idPart.logprobs.map((entry) => entry.bytes), part.logprobs.map((entry) => entry.bytes));
});

test('max_output_tokens cuts the response: status incomplete, the reason named', async () => {
  const response = await openai.responses.create({ model: 'tiny', input: 'greet me', max_output_tokens: 3 });
  assert.equal(response.status, 'incomplete');
  assert.deepEqual(response.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(response.usage.output_tokens, 3);
});

test('reasoning.effort none: the answer alone', async () => {
  const response = await openai.responses.create({ model: 'tiny', input: 'direct', reasoning: { effort: 'none' } });
  assert.deepEqual(response.output.map((item) => item.type), ['message']);
  assert.equal(response.output_text, 'Direct answer.');
  assert.equal(response.reasoning.effort, 'none');
});

test('fields that need a stored response or a hosted tool are refused by name', async () => {
  const cases = [
    [{ input: 'hi', previous_response_id: 7 }, 'previous_response_id'],
    [{ input: 'hi', conversation: 7 }, 'conversation'],
    [{ input: 'hi', conversation: { id: '' } }, 'conversation.id'],
    [{ input: 'hi', conversation: 'conv_1', previous_response_id: 'resp_1' }, 'conversation'],
    [{ input: 'hi', background: true, store: false }, 'background'],
    [{ input: 'hi', truncation: 'auto' }, 'truncation'],
    [{ input: 'hi', include: ['file_search_call.results'] }, 'include[0]'],
    [{ input: 'hi', top_logprobs: 2 }, 'top_logprobs'],
    [{ input: 'hi', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
    [{ input: 'hi', tools: TOOLS, tool_choice: { type: 'function', name: 'other' } }, 'tool_choice.name'],
    [{ input: [{ type: 'item_reference', id: 'x' }] }, 'input[0].type'],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0].type'],
    [{ input: 'hi', text: { format: { type: 'json_schema', name: 'x', schema: 3 } } }, 'text.format.schema'],
    [{ input: 'hi', max_output_tokens: 0 }, 'max_output_tokens'],
    [{}, 'input'],
    [{ input: 'word '.repeat(5000) }, 'input'],
    [{ input: 'hi', max_output_tokens: 100000 }, 'max_output_tokens'],
    [{ input: [{ role: 'assistant', content: 'prefill' }], text: { format: { type: 'json_object' } } }, 'input'],
  ];
  for (const [body, param] of cases) {
    const response = await rawPost(server, '/v1/responses', JSON.stringify(body));
    assert.equal(response.status, 400, JSON.stringify(body));
    assert.equal(response.json.error.param, param, JSON.stringify(response.json));
  }
  // A response never stored: reading, listing, deleting, cancelling or continuing it finds none.
  for (const [method, path] of [['GET', '/v1/responses/resp_1'], ['DELETE', '/v1/responses/resp_1'],
    ['GET', '/v1/responses/resp_1/input_items'], ['POST', '/v1/responses/resp_1/cancel']]) {
    const response = await fetch(`${server.url}${path}`, { method });
    assert.equal(response.status, 404, `${method} ${path}`);
    assert.match((await response.json()).error.message, /no stored response 'resp_1'/);
  }
  const unknown = await rawPost(server, '/v1/responses', JSON.stringify({ input: 'hi', previous_response_id: 'resp_1' }));
  assert.equal(unknown.status, 404);
  assert.equal(unknown.json.error.param, 'previous_response_id');
  // A schema the grammar cannot enforce is named under text.format, not chat's response_format.
  const unsupported = await rawPost(server, '/v1/responses', JSON.stringify({
    input: 'hi', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'number', multipleOf: 3, minimum: 0 } } },
  }));
  assert.equal(unsupported.status, 400);
  assert.match(unsupported.json.error.param, /^text\.format\.schema/);
});

test('previous_response_id continues a stored response: the tool result, then the answer', async () => {
  const first = await openai.responses.create({ model: 'tiny', input: 'What is the weather?', tools: TOOLS });
  const call = first.output.find((item) => item.type === 'function_call');
  assert.ok(call, JSON.stringify(first.output));
  const result = { type: 'function_call_output', call_id: call.call_id, output: '{"sky": "sunny"}' };
  const second = await openai.responses.create({ model: 'tiny', tools: TOOLS, previous_response_id: first.id, input: [result] });
  assert.equal(second.output_text, 'It is sunny in Paris.');
  assert.equal(second.previous_response_id, first.id);
  // The prompt is the whole conversation: as many input tokens as sending it all in `input`.
  const whole = { model: 'tiny', tools: TOOLS, input: [{ role: 'user', content: 'What is the weather?' }, ...first.output, result] };
  const count = await rawPost(server, '/v1/responses/input_tokens', JSON.stringify(whole));
  assert.equal(second.usage.input_tokens, count.json.input_tokens);
  const counted = await rawPost(server, '/v1/responses/input_tokens',
    JSON.stringify({ model: 'tiny', tools: TOOLS, previous_response_id: first.id, input: [result] }));
  assert.equal(counted.json.input_tokens, count.json.input_tokens);
  // A chain: the third turn sees both earlier ones (the script answers any prompt that holds
  // "sunny" as the second turn).
  const third = await openai.responses.create({ model: 'tiny', previous_response_id: second.id, input: 'greet me' });
  assert.equal(third.previous_response_id, second.id);
  const all = await rawPost(server, '/v1/responses/input_tokens', JSON.stringify({
    ...whole, input: [...whole.input, ...second.output, { role: 'user', content: 'greet me' }], tools: undefined }));
  assert.equal(third.usage.input_tokens, all.json.input_tokens);
  // Without the stored context the same tool result answers no call.
  await assert.rejects(openai.responses.create({ model: 'tiny', tools: TOOLS, input: [result] }),
    (error) => error.status === 400 && error.param === 'input[0].call_id');
});

test('a stored response: retrieved, its input items paged, deleted; store false keeps nothing', async () => {
  const response = await openai.responses.create({
    model: 'tiny', instructions: 'Be kind.',
    input: [{ role: 'user', content: 'first' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'greet me' }],
  });
  const stored = await openai.responses.retrieve(response.id);
  for (const key of ['id', 'status', 'output', 'usage', 'instructions', 'store', 'created_at']) {
    assert.deepEqual(stored[key], response[key], key);
  }
  const all = await openai.responses.inputItems.list(response.id, { order: 'asc' });
  assert.deepEqual(all.data.map((item) => item.content[0].text), ['first', 'ok', 'greet me']);
  assert.deepEqual(all.data.map((item) => item.content[0].type), ['input_text', 'output_text', 'input_text']);
  assert.equal(new Set(all.data.map((item) => item.id)).size, 3);
  const page = await openai.responses.inputItems.list(response.id, { limit: 2 });  // newest first
  assert.deepEqual(page.data.map((item) => item.content[0].text), ['greet me', 'ok']);
  assert.equal(page.has_more, true);
  const raw = await (await fetch(`${server.url}/v1/responses/${response.id}/input_items?limit=2`)).json();
  assert.equal(raw.first_id, page.data[0].id);
  assert.equal(raw.last_id, page.data[1].id);
  const rest = await openai.responses.inputItems.list(response.id, { limit: 2, after: page.data.at(-1).id });
  assert.deepEqual(rest.data.map((item) => item.content[0].text), ['first']);
  assert.equal(rest.has_more, false);
  const badLimit = await fetch(`${server.url}/v1/responses/${response.id}/input_items?limit=0`);
  assert.equal(badLimit.status, 400);
  assert.equal((await badLimit.json()).error.param, 'limit');
  // include: what stored items already carry is accepted; a hosted tool's output, even after a
  // good value, is refused by name.
  const included = await openai.responses.inputItems.list(response.id, { include: ['message.output_text.logprobs'] });
  assert.equal(included.data.length, 3);
  for (const query of ['include=file_search_call.results',
                       'include[]=reasoning.encrypted_content&include[]=web_search_call.action.sources']) {
    const badInclude = await fetch(`${server.url}/v1/responses/${response.id}/input_items?${query}`);
    assert.equal(badInclude.status, 400, query);
    assert.equal((await badInclude.json()).error.param, 'include');
  }
  const cancel = await fetch(`${server.url}/v1/responses/${response.id}/cancel`, { method: 'POST' });
  assert.equal(cancel.status, 400);

  // A streamed response is stored as its response.completed event has it.
  const stream = await openai.responses.create({ model: 'tiny', input: 'greet me', stream: true });
  let completed;
  for await (const event of stream) if (event.type === 'response.completed') completed = event.response;
  assert.deepEqual((await openai.responses.retrieve(completed.id)).output, completed.output);

  const deleted = await fetch(`${server.url}/v1/responses/${response.id}`, { method: 'DELETE' });
  assert.deepEqual(await deleted.json(), { id: response.id, object: 'response', deleted: true });
  await assert.rejects(openai.responses.retrieve(response.id), (error) => error.status === 404);
  await assert.rejects(openai.responses.create({ model: 'tiny', previous_response_id: response.id, input: 'hi' }),
    (error) => error.status === 404 && error.param === 'previous_response_id');

  const unstored = await openai.responses.create({ model: 'tiny', input: 'greet me', store: false });
  assert.equal(unstored.store, false);
  await assert.rejects(openai.responses.retrieve(unstored.id), (error) => error.status === 404);
});

// Polls a background response until it leaves in_progress.
async function settled(id) {
  for (let i = 0; i < 200; ++i) {
    const response = await openai.responses.retrieve(id);
    if (response.status !== 'in_progress') return response;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`${id} still in progress`);
}

test('a background response: in progress at once, then polled to its end, like a stored one', async () => {
  const started = await openai.responses.create({ model: 'tiny', input: 'greet me', background: true });
  assert.equal(started.status, 'in_progress');
  assert.equal(started.background, true);
  assert.deepEqual(started.output, []);
  const done = await settled(started.id);
  assert.equal(done.status, 'completed');
  assert.equal(done.output.at(-1).content[0].text, 'Hello there, friend!');
  assert.equal(done.background, true);
  assert.ok(done.usage.input_tokens > 0 && done.usage.output_tokens > 0, JSON.stringify(done.usage));
  const items = await openai.responses.inputItems.list(done.id);
  assert.deepEqual(items.data.map((item) => item.content[0].text), ['greet me']);
  // It continues like any stored response; a finished one has nothing to cancel.
  const next = await openai.responses.create({ model: 'tiny', previous_response_id: done.id, input: 'and again' });
  assert.equal(next.previous_response_id, done.id);
  assert.ok(next.usage.input_tokens > done.usage.input_tokens + done.usage.output_tokens - 1, JSON.stringify(next.usage));
  const cancel = await fetch(`${server.url}/v1/responses/${done.id}/cancel`, { method: 'POST' });
  assert.equal(cancel.status, 400);
  assert.match((await cancel.json()).error.message, /has finished \(completed\)/);
  // A step that fails ends it as failed, the engine's error in `error`.
  const broken = await openai.responses.create({ model: 'tiny', input: 'broken', background: true });
  const failed = await settled(broken.id);
  assert.equal(failed.status, 'failed');
  assert.equal(failed.error.code, 'server_error');
  assert.ok(failed.error.message.length > 0);
});

test('a running background response: continuing it is refused, cancelling stops it, deleting it too', async () => {
  const started = await openai.responses.create({ model: 'tiny', input: 'slowly answer', background: true, max_output_tokens: 2000 });
  await new Promise((resolve) => setTimeout(resolve, 150));  // a few tokens in
  assert.equal((await openai.responses.retrieve(started.id)).status, 'in_progress');
  await assert.rejects(openai.responses.create({ model: 'tiny', previous_response_id: started.id, input: 'hi' }),
    (error) => error.status === 400 && error.param === 'previous_response_id' && /still in progress/.test(error.message));
  const t0 = Date.now();
  const cancel = await fetch(`${server.url}/v1/responses/${started.id}/cancel`, { method: 'POST' });
  assert.equal(cancel.status, 200);
  const cancelled = await cancel.json();
  assert.ok(Date.now() - t0 < 2000, `cancel took ${Date.now() - t0} ms`);
  assert.equal(cancelled.status, 'cancelled');
  assert.equal(cancelled.output.length, 1);  // the message it had begun
  assert.ok(cancelled.usage.input_tokens > 0, JSON.stringify(cancelled.usage));
  assert.ok(cancelled.usage.output_tokens > 0 && cancelled.usage.output_tokens < 500, JSON.stringify(cancelled.usage));
  assert.equal((await openai.responses.retrieve(started.id)).status, 'cancelled');
  // Cancelling again answers the same (through the SDK's own call too); the tokens stop coming
  // (the engine has it no more).
  const again = await fetch(`${server.url}/v1/responses/${started.id}/cancel`, { method: 'POST' });
  assert.equal((await again.json()).status, 'cancelled');
  assert.equal((await openai.responses.cancel(started.id)).status, 'cancelled');
  for (let i = 0; i < 100 && await metric(server, 'mkserve_num_requests_running') !== 0; ++i) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  assert.equal(await metric(server, 'mkserve_num_requests_running'), 0);

  const doomed = await openai.responses.create({ model: 'tiny', input: 'slowly answer', background: true });
  const deleted = await fetch(`${server.url}/v1/responses/${doomed.id}`, { method: 'DELETE' });
  assert.deepEqual(await deleted.json(), { id: doomed.id, object: 'response', deleted: true });
  await new Promise((resolve) => setTimeout(resolve, 100));
  await assert.rejects(openai.responses.retrieve(doomed.id), (error) => error.status === 404);
});

// The SSE events of a raw stream's text, as parsed objects with their event names.
function sseEvents(text) {
  return text.split('\n\n').filter((block) => block.trim()).map((block) => {
    const name = block.match(/^event: (.*)$/m)?.[1];
    return { name, data: JSON.parse(block.match(/^data: (.*)$/m)[1]) };
  });
}

test('a streamed background response: read live, left, resumed after any event, replayed whole', async () => {
  // The SDK's stream: every event numbered from 0, ending with response.completed.
  const stream = await openai.responses.create({ model: 'tiny', input: 'greet me', background: true, stream: true });
  const live = [];
  for await (const event of stream) live.push(event);
  assert.deepEqual(live.map((event) => event.sequence_number), live.map((_, i) => i));
  assert.equal(live[0].type, 'response.created');
  assert.equal(live[0].response.background, true);
  assert.equal(live.at(-1).type, 'response.completed');
  const id = live[0].response.id;
  assert.deepEqual((await openai.responses.retrieve(id)).output, live.at(-1).response.output);
  // Replayed whole after its end, and after any event; the SDK's own resume gives the same text.
  const replay = await fetch(`${server.url}/v1/responses/${id}?stream=true`);
  assert.equal(replay.headers.get('content-type'), 'text/event-stream');
  assert.deepEqual(sseEvents(await replay.text()).map((event) => event.data), live);
  const tail = await fetch(`${server.url}/v1/responses/${id}?stream=true&starting_after=3`);
  assert.deepEqual(sseEvents(await tail.text()).map((event) => event.data), live.slice(4));
  const resumed = openai.responses.stream({ response_id: id, starting_after: 3 });
  assert.equal((await resumed.finalResponse()).output.at(-1).content[0].text, 'Hello there, friend!');

  // A client that leaves mid-stream does not stop the run; it resumes where it left off.
  const controller = new AbortController();
  const started = await fetch(`${server.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: controller.signal,
    body: JSON.stringify({ input: 'slowly answer', background: true, stream: true, max_output_tokens: 60 }),
  });
  const reader = started.body.getReader();
  let text = '';
  while ((text.match(/output_text\.delta/g) ?? []).length < 5) text += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
  const before = sseEvents(text.slice(0, text.lastIndexOf('\n\n') + 2));
  const slowId = before[0].data.response.id;
  const last = before.at(-1).data.sequence_number;
  assert.equal((await openai.responses.retrieve(slowId)).status, 'in_progress');
  const rest = sseEvents(await (await fetch(`${server.url}/v1/responses/${slowId}?stream=true&starting_after=${last}`)).text());
  assert.equal(rest[0].data.sequence_number, last + 1);
  assert.equal(rest.at(-1).name, 'response.incomplete');
  const whole = sseEvents(await (await fetch(`${server.url}/v1/responses/${slowId}?stream=true`)).text());
  assert.deepEqual([...before, ...rest].map((event) => event.data), whole.map((event) => event.data));
  assert.equal(rest.at(-1).data.response.usage.output_tokens, 60);

  // Cancelled while streaming: the open item closes, then an error event names the cancel.
  const doomed = await fetch(`${server.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'slowly answer', background: true, stream: true }),
  });
  const doomedReader = doomed.body.getReader();
  const doomedFirst = sseEvents(new TextDecoder().decode((await doomedReader.read()).value).split('\n\n')[0] + '\n\n');
  const doomedId = doomedFirst[0].data.response.id;
  await new Promise((resolve) => setTimeout(resolve, 150));
  assert.equal((await openai.responses.cancel(doomedId)).status, 'cancelled');
  let doomedText = '';
  for (let chunk = await doomedReader.read(); !chunk.done; chunk = await doomedReader.read()) {
    doomedText += new TextDecoder().decode(chunk.value);
  }
  const ending = sseEvents(doomedText).slice(-2);
  assert.equal(ending[0].name, 'response.output_item.done');
  assert.equal(ending[0].data.item.status, 'incomplete');
  assert.equal(ending[1].name, 'error');
  assert.equal(ending[1].data.code, 'cancelled');

  // A failing step ends the stream with response.failed.
  const broken = sseEvents(await (await fetch(`${server.url}/v1/responses`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ input: 'broken', background: true, stream: true }),
  })).text());
  assert.equal(broken.at(-1).name, 'response.failed');
  assert.equal(broken.at(-1).data.response.status, 'failed');
  assert.equal(broken.at(-1).data.response.error.code, 'server_error');

  // Refused by name: a response that was not streamed in the background, a stream value other
  // than true or false, a resume point without stream, one that is not a sequence number; a deleted one is gone with its events.
  const polled = await openai.responses.create({ model: 'tiny', input: 'greet me', background: true });
  await settled(polled.id);
  for (const [query, param] of [[`${polled.id}?stream=true`, 'stream'],
                                [`${id}?stream=yes`, 'stream'],
                                [`${id}?starting_after=2`, 'starting_after'],
                                [`${id}?stream=true&starting_after=-1`, 'starting_after'],
                                [`${id}?stream=true&starting_after=x`, 'starting_after']]) {
    const refused = await fetch(`${server.url}/v1/responses/${query}`);
    assert.equal(refused.status, 400, query);
    assert.equal((await refused.json()).error.param, param, query);
  }
  await openai.responses.del(id);
  assert.equal((await fetch(`${server.url}/v1/responses/${id}?stream=true`)).status, 404);
});

test('at most 256 background responses run at once: the next is a 503 and starts nothing', async () => {
  const ids = [];
  for (let i = 0; i < 256; ++i) {
    ids.push((await openai.responses.create({ model: 'tiny', input: `slowly ${i}`, background: true })).id);
  }
  const refused = await rawPost(server, '/v1/responses', JSON.stringify({ input: 'slowly more', background: true }));
  assert.equal(refused.status, 503);
  assert.equal(refused.json.error.param, 'background');
  assert.match(refused.json.error.message, /256 background responses are running/);
  assert.equal(await metric(server, 'mkserve_background_responses_running'), 256);
  const cancelled = await Promise.all(ids.map(async (id) =>
    (await (await fetch(`${server.url}/v1/responses/${id}/cancel`, { method: 'POST' })).json()).status));
  assert.deepEqual(new Set(cancelled), new Set(['cancelled']));
  assert.equal(await metric(server, 'mkserve_background_responses_running'), 0);
  const after = await openai.responses.create({ model: 'tiny', input: 'greet me', background: true });
  assert.equal((await settled(after.id)).status, 'completed');
});

// The Conversations API has no resource in this SDK version: plain fetch.
async function call(method, path, body) {
  const response = await fetch(`${server.url}${path}`, {
    method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, json: await response.json() };
}

test('a conversation: made with items, continued by responses that add their turns, edited, deleted', async () => {
  const made = await call('POST', '/v1/conversations', {
    metadata: { topic: 'greetings' }, items: [{ type: 'message', role: 'user', content: 'first' }, { role: 'assistant', content: 'ok' }],
  });
  assert.equal(made.status, 200);
  const id = made.json.id;
  assert.match(id, /^conv_/);
  assert.deepEqual(made.json.metadata, { topic: 'greetings' });
  assert.equal(made.json.object, 'conversation');
  const listed = await call('GET', `/v1/conversations/${id}/items?order=asc`);
  assert.deepEqual(listed.json.data.map((item) => [item.type, item.role, item.content[0].text]),
    [['message', 'user', 'first'], ['message', 'assistant', 'ok']]);

  // A response in the conversation reads its items first, then adds its input and output.
  const first = await openai.responses.create({ model: 'tiny', conversation: id, input: 'greet me' });
  assert.equal(first.output_text, 'Hello there, friend!');
  assert.deepEqual(first.conversation, { id });
  const whole = await rawPost(server, '/v1/responses/input_tokens', JSON.stringify({
    model: 'tiny', input: [{ role: 'user', content: 'first' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'greet me' }] }));
  assert.equal(first.usage.input_tokens, whole.json.input_tokens);
  const after = (await call('GET', `/v1/conversations/${id}/items?order=asc`)).json.data;
  assert.deepEqual(after.map((item) => item.type), ['message', 'message', 'message', 'reasoning', 'message']);
  assert.equal(after.at(-1).id, first.output.at(-1).id);
  assert.equal(after.at(-1).content[0].text, 'Hello there, friend!');
  const second = await openai.responses.create({ model: 'tiny', conversation: { id }, input: 'direct' });
  assert.ok(second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens - 1);
  const turns = 5 + 1 + second.output.length;
  assert.equal((await call('GET', `/v1/conversations/${id}/items?limit=100`)).json.data.length, turns);
  // A background response adds its turn once it has finished.
  const background = await openai.responses.create({ model: 'tiny', conversation: id, input: 'greet me', background: true });
  const finished = await settled(background.id);
  assert.equal((await call('GET', `/v1/conversations/${id}/items?limit=100`)).json.data.length,
    turns + 1 + finished.output.length);

  // Items: one read, one deleted (the answer is the conversation), more added (checked as input).
  const one = await call('GET', `/v1/conversations/${id}/items/${after[0].id}`);
  assert.deepEqual(one.json, after[0]);
  const removed = await call('DELETE', `/v1/conversations/${id}/items/${after[0].id}`);
  assert.equal(removed.json.id, id);
  assert.equal((await call('GET', `/v1/conversations/${id}/items/${after[0].id}`)).status, 404);
  const added = await call('POST', `/v1/conversations/${id}/items`, { items: [{ role: 'user', content: [{ type: 'input_text', text: 'more' }] }] });
  assert.equal(added.json.data.length, 1);
  assert.equal((await call('GET', `/v1/conversations/${id}/items?limit=1`)).json.data[0].id, added.json.data[0].id);
  const twice = await call('POST', `/v1/conversations/${id}/items`, { items: [{ id: added.json.data[0].id, role: 'user', content: 'again' }] });
  assert.equal(twice.status, 400);
  assert.equal(twice.json.error.param, 'items[0].id');
  const bad = await call('POST', `/v1/conversations/${id}/items`, { items: [{ role: 'user', content: 'ok' }, { type: 'web_search_call' }] });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, 'items[1].type');
  const badMeta = await call('POST', `/v1/conversations/${id}`, { metadata: { n: 3 } });
  assert.equal(badMeta.status, 400);
  assert.equal(badMeta.json.error.param, 'metadata.n');
  const renamed = await call('POST', `/v1/conversations/${id}`, { metadata: { topic: 'other' } });
  assert.deepEqual(renamed.json.metadata, { topic: 'other' });
  assert.deepEqual((await call('GET', `/v1/conversations/${id}`)).json.metadata, { topic: 'other' });

  const deleted = await call('DELETE', `/v1/conversations/${id}`);
  assert.deepEqual(deleted.json, { id, object: 'conversation.deleted', deleted: true });
  assert.equal((await call('GET', `/v1/conversations/${id}`)).status, 404);
  await assert.rejects(openai.responses.create({ model: 'tiny', conversation: id, input: 'hi' }),
    (error) => error.status === 404 && error.param === 'conversation');
  assert.equal((await call('POST', '/v1/conversations', { items: 'x' })).json.error.param, 'items');
});

test('the store keeps to --response-store-mb: the oldest go first, and continuing one is a 404', async () => {
  const small = await startServer(model.modelDir, ['--backend', `scripted:${writeScript(model.dir, SCRIPT)}`, '--response-store-mb', '1']);
  try {
    const sdk = client(small);
    const ids = [];
    for (let i = 0; i < 130; ++i) {  // each keeps about 10 KB: its input twice (items and context)
      ids.push((await sdk.responses.create({ model: 'tiny', input: `greet me ${i} ${'lorem ipsum '.repeat(400)}` })).id);
    }
    const kept = [];
    for (const id of ids) {
      try { await sdk.responses.retrieve(id); kept.push(id); } catch (error) { assert.equal(error.status, 404); }
    }
    assert.ok(kept.length > 50 && kept.length < 130, `${kept.length} kept`);
    assert.deepEqual(kept, ids.slice(ids.length - kept.length));  // the most recent ones
    assert.equal(await metric(small, 'mkserve_response_store_responses'), kept.length);
    assert.equal(await metric(small, 'mkserve_response_store_capacity_bytes'), 1 << 20);
    const bytes = await metric(small, 'mkserve_response_store_bytes');
    assert.ok(bytes > (1 << 20) * 0.9 && bytes <= 1 << 20, `${bytes} bytes`);
    await assert.rejects(sdk.responses.create({ model: 'tiny', previous_response_id: ids[0], input: 'hi' }),
      (error) => error.status === 404 && /evicted/.test(error.message));
    const next = await sdk.responses.create({ model: 'tiny', previous_response_id: ids.at(-1), input: 'greet me' });
    assert.equal(next.status, 'completed');
  } finally {
    await small.stop();
  }
});

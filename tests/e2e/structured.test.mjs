// Structured outputs on the tiny random model (CPU backend; CUDA with MKSERVE_E2E_BACKEND=cuda):
// response_format json_object / json_schema and tool_choice "required" / named are enforced by
// constrained decoding, so even random weights produce JSON that parses and matches the schema,
// streamed or not; unsupported schemas and formats are 400s that name the feature.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { isIPv4, isIPv6 } from 'node:net';
import Ajv2020 from 'ajv/dist/2020.js';
import { makeTinyModel, startServer, client, user, expectApiError, MODEL_BACKEND_ARGS } from './harness.mjs';

let model, server, openai;
before(async () => {
  model = makeTinyModel();
  server = await startServer(model.modelDir, [...MODEL_BACKEND_ARGS]);
  openai = client(server);
});
after(async () => { await server?.stop(); model?.cleanup(); });

const SEEDS = [1, 2, 3, 4, 5, 6];
const NO_THINKING = { chat_template_kwargs: { enable_thinking: false } };

// The checks for the schema subset these tests use; returns the first violation or null.
function violation(schema, value, path = '$') {
  if (schema.anyOf) {
    return schema.anyOf.some((s) => violation(s, value, path) === null) ? null : `${path}: no anyOf branch`;
  }
  if (schema.enum) return schema.enum.some((e) => JSON.stringify(e) === JSON.stringify(value)) ? null : `${path}: not in enum`;
  const types = [schema.type].flat();
  const typeOf = (v) => v === null ? 'null' : Array.isArray(v) ? 'array'
    : Number.isInteger(v) && types.includes('integer') ? 'integer' : typeof v;
  if (schema.type && !types.includes(typeOf(value))) return `${path}: ${typeOf(value)} is not ${types}`;
  if (typeOf(value) === 'object') {
    for (const key of schema.required ?? []) if (!(key in value)) return `${path}: missing ${key}`;
    for (const [key, v] of Object.entries(value)) {
      const sub = schema.properties?.[key];
      if (!sub) { if (schema.additionalProperties === false) return `${path}: extra ${key}`; continue; }
      const inner = violation(sub, v, `${path}.${key}`);
      if (inner) return inner;
    }
  }
  if (typeOf(value) === 'array') {
    if (schema.minItems !== undefined && value.length < schema.minItems) return `${path}: too few items`;
    if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${path}: too many items`;
    for (let i = 0; i < value.length; i++) {
      const inner = schema.items ? violation(schema.items, value[i], `${path}[${i}]`) : null;
      if (inner) return inner;
    }
  }
  if (typeof value === 'number') {
    // A multiple of 0.01 is written with at most two fraction digits; of 10, 100 as an integer.
    if (schema.multipleOf !== undefined && Math.abs(value / schema.multipleOf - Math.round(value / schema.multipleOf)) > 1e-9) return `${path}: not a multiple of ${schema.multipleOf}`;
    if (schema.minimum !== undefined && !(value >= schema.minimum)) return `${path}: below minimum`;
    if (schema.maximum !== undefined && !(value <= schema.maximum)) return `${path}: above maximum`;
    if (schema.exclusiveMinimum !== undefined && !(value > schema.exclusiveMinimum)) return `${path}: not above exclusiveMinimum`;
    if (schema.exclusiveMaximum !== undefined && !(value < schema.exclusiveMaximum)) return `${path}: not below exclusiveMaximum`;
  }
  // Lengths count code points ([...value]), as JSON Schema does.
  if (schema.minLength !== undefined && [...value].length < schema.minLength) return `${path}: shorter than minLength`;
  if (schema.maxLength !== undefined && [...value].length > schema.maxLength) return `${path}: longer than maxLength`;
  if (schema.format === 'date' && !/^\d{4}-\d{2}-\d{2}$/.test(value)) return `${path}: not a date`;
  // Node's own address parsers; ajv-formats' duration expression.
  if (schema.format === 'ipv4' && !isIPv4(value)) return `${path}: not an IPv4 address`;
  if (schema.format === 'ipv6' && !isIPv6(value)) return `${path}: not an IPv6 address`;
  if (schema.format === 'duration' && !/^P(?!$)((\d+Y)?(\d+M)?(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+S)?)?|(\d+W)?)$/.test(value)) return `${path}: not a duration`;
  if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) return `${path}: does not match ${schema.pattern}`;
  return null;
}

const PERSON = {
  type: 'object',
  properties: {
    name: { type: 'string', minLength: 1 },
    nickname: { type: 'string', minLength: 3, maxLength: 12 },
    lucky: { type: 'integer', multipleOf: 7, minimum: -30, maximum: 100 },
    age: { type: 'integer', minimum: 0, maximum: 150 },
    height: { type: 'number', exclusiveMinimum: 0, maximum: 3 },
    badge: { type: 'string', pattern: '^[A-Z]{2}-\\d{3}(-[a-z]+)?$' },
    motto: { type: 'string', pattern: '^(?:yes|no)!$' },
    role: { enum: ['admin', 'user', 'guest'] },
    active: { type: 'boolean' },
    born: { type: 'string', format: 'date' },
    scores: { type: 'array', items: { type: 'number' }, maxItems: 3 },
    manager: { anyOf: [{ $ref: '#/$defs/ref' }, { type: 'null' }] },
  },
  required: ['name', 'nickname', 'lucky', 'age', 'height', 'badge', 'motto', 'role', 'active', 'born', 'scores', 'manager'],
  additionalProperties: false,
  $defs: { ref: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'], additionalProperties: false } },
};
const PERSON_FORMAT = { type: 'json_schema', json_schema: { name: 'person', schema: PERSON, strict: true } };

// Every seed's answer that ends on its own must parse and match; a cut by max_tokens is honest
// ("length"), but random weights write long strings, so only half the seeds must finish (none
// would if the grammar never let the model end).
function checkAnswers(results, schema) {
  let complete = 0;
  for (const { finish, content } of results) {
    if (finish === 'length') continue;
    assert.equal(finish, 'stop');
    const value = JSON.parse(content);
    assert.equal(violation(schema, value), null, content);
    complete++;
  }
  assert.ok(complete >= results.length / 2, `only ${complete} of ${results.length} finished`);
}

test('response_format json_object: every answer is a JSON object', async () => {
  const results = [];
  for (const seed of SEEDS) {
    const response = await openai.chat.completions.create({
      messages: user('Describe a cat as JSON.'), response_format: { type: 'json_object' },
      max_tokens: 600, seed, ...NO_THINKING,
    });
    results.push({ finish: response.choices[0].finish_reason, content: response.choices[0].message.content });
  }
  checkAnswers(results, { type: 'object' });
});

test('response_format json_schema: answers match the schema, streamed or not', async () => {
  const results = [];
  for (const seed of SEEDS) {
    const request = { messages: user('Make up a person.'), response_format: PERSON_FORMAT, max_tokens: 800, seed, temperature: 0.7, ...NO_THINKING };
    const whole = await openai.chat.completions.create(request);
    let streamed = '';
    let finish = null;
    for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
      streamed += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(streamed, whole.choices[0].message.content);
    assert.equal(finish, whole.choices[0].finish_reason);
    results.push({ finish, content: streamed });
  }
  checkAnswers(results, PERSON);
});

const ADDRESSES = {
  type: 'object',
  properties: {
    v4: { type: 'string', format: 'ipv4' },
    v6: { type: 'string', format: 'ipv6' },
    every: { type: 'string', format: 'duration' },
  },
  required: ['v4', 'v6', 'every'],
  additionalProperties: false,
};

test('formats ipv4, ipv6 and duration: every answer passes independent checks', async () => {
  const results = [];
  for (const seed of [...SEEDS, 7, 8, 9, 10]) {
    const response = await openai.chat.completions.create({
      messages: user('Describe a server.'), max_tokens: 600, seed, temperature: 1, ...NO_THINKING,
      response_format: { type: 'json_schema', json_schema: { name: 'addresses', schema: ADDRESSES, strict: true } },
    });
    results.push({ finish: response.choices[0].finish_reason, content: response.choices[0].message.content });
  }
  checkAnswers(results, ADDRESSES);
});

const PRICES = {
  type: 'object',
  properties: {
    price: { type: 'number', multipleOf: 0.01, minimum: 0, maximum: 100 },
    step: { type: 'number', multipleOf: 0.1 },
    lot: { type: 'integer', multipleOf: 10, minimum: -50, maximum: 1000 },
    round: { type: 'number', multipleOf: 100 },
  },
  required: ['price', 'step', 'lot', 'round'],
  additionalProperties: false,
};

// Six seeded answers under `schema`; each finished one must match every pattern and the schema.
async function expectMultiples(name, schema, prompt, patterns) {
  const results = [];
  for (const seed of SEEDS) {
    const response = await openai.chat.completions.create({
      messages: user(prompt), max_tokens: 300, seed, temperature: 1, ...NO_THINKING,
      response_format: { type: 'json_schema', json_schema: { name, schema, strict: true } },
    });
    const { content } = response.choices[0].message;
    results.push({ finish: response.choices[0].finish_reason, content });
    if (response.choices[0].finish_reason === 'stop') {
      for (const pattern of patterns) assert.match(content, pattern, content);
    }
  }
  checkAnswers(results, schema);
}

// The spelling itself: the fraction digits the step allows, integers where it is 10 or more.
test('multipleOf powers of ten: every answer is a multiple, with no more digits than the step', async () => {
  await expectMultiples('prices', PRICES, 'Price a product.', [
    /"price"\s*:\s*-?\d+(\.\d{1,2})?\s*[,}]/, /"lot"\s*:\s*-?\d+\s*[,}]/, /"round"\s*:\s*-?\d+\s*[,}]/]);
});

const STEPS = {
  type: 'object',
  properties: {
    quarter: { type: 'number', multipleOf: 0.25 },
    half: { type: 'number', multipleOf: 0.5 },
    five: { type: 'integer', multipleOf: 5 },
    hour: { type: 'number', multipleOf: 60 },
  },
  required: ['quarter', 'half', 'five', 'hour'],
  additionalProperties: false,
};

// Steps exact in binary, so that the check's division is exact too (0.3 is checked in C++).
test('multipleOf without bounds: every answer is a multiple of its step', async () => {
  await expectMultiples('steps', STEPS, 'Pick some amounts.', [
    /"quarter"\s*:\s*-?\d+(\.\d{1,2})?\s*[,}]/, /"half"\s*:\s*-?\d+(\.\d)?\s*[,}]/, /"hour"\s*:\s*-?\d+\s*[,}]/]);
});

test('reasoning comes first, then the constrained answer', async () => {
  // A bias makes the model close its reasoning at once; the grammar then forces the JSON block.
  const response = await openai.chat.completions.create({
    messages: user('Think, then answer.'), response_format: { type: 'json_object' }, max_tokens: 400,
    seed: 3, chat_template_kwargs: { enable_thinking: true }, logit_bias: { 1011: 30 },
  });
  const choice = response.choices[0];
  assert.equal(choice.finish_reason, 'stop');
  assert.equal(typeof JSON.parse(choice.message.content), 'object');
});

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: {
    type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['c', 'f'] } },
    required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'add', description: 'Adds two integers', parameters: {
    type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
    required: ['a', 'b'], additionalProperties: false } } },
];
const schemaOf = (name) => TOOLS.find((t) => t.function.name === name).function.parameters;

async function streamedCall(request) {
  const calls = [];
  let finish = null;
  for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
    for (const delta of chunk.choices[0]?.delta?.tool_calls ?? []) {
      calls[delta.index] ??= { name: '', arguments: '' };
      calls[delta.index].name += delta.function?.name ?? '';
      calls[delta.index].arguments += delta.function?.arguments ?? '';
    }
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { calls, finish };
}

test('tool_choice named and required: a valid call whose arguments match the schema', async () => {
  let complete = 0;
  for (const seed of SEEDS) {
    for (const tool_choice of [{ type: 'function', function: { name: 'add' } }, 'required']) {
      const request = { messages: user('Add 2 and 3.'), tools: TOOLS, tool_choice, max_tokens: 500, seed, ...NO_THINKING };
      const response = await openai.chat.completions.create(request);
      const { calls, finish } = await streamedCall(request);
      const choice = response.choices[0];
      assert.equal(finish, choice.finish_reason);
      if (finish === 'length') continue;
      assert.equal(finish, 'tool_calls', JSON.stringify(choice.message));
      assert.ok(choice.message.tool_calls.length >= 1);
      if (typeof tool_choice === 'object') assert.equal(choice.message.tool_calls.length, 1);
      assert.equal(calls.length, choice.message.tool_calls.length);
      choice.message.tool_calls.forEach((call, i) => {
        if (typeof tool_choice === 'object') assert.equal(call.function.name, 'add');
        assert.equal(calls[i].name, call.function.name);
        assert.equal(calls[i].arguments, call.function.arguments);
        assert.equal(violation(schemaOf(call.function.name), JSON.parse(calls[i].arguments)), null, calls[i].arguments);
      });
      complete++;
    }
  }
  assert.ok(complete >= SEEDS.length, `only ${complete} of ${2 * SEEDS.length} calls finished`);
});

// Schemas as pydantic and zod write them: tuples (prefixItems), models extending others (allOf,
// a $ref beside keywords), discriminated unions (oneOf). Judged by ajv (JSON Schema 2020-12), a
// validator that shares nothing with the grammar compiler.
const PYDANTIC_SHAPES = {
  $defs: {
    Cat: { type: 'object', title: 'Cat', properties: { pet_type: { const: 'cat', type: 'string' }, lives: { type: 'integer', minimum: 1, maximum: 9 } },
      required: ['pet_type', 'lives'], additionalProperties: false },
    Dog: { type: 'object', title: 'Dog', properties: { pet_type: { const: 'dog', type: 'string' }, good: { type: 'boolean' } },
      required: ['pet_type', 'good'], additionalProperties: false },
    Named: { type: 'object', properties: { name: { type: 'string', maxLength: 8 } }, required: ['name'] },
  },
  type: 'object',
  properties: {
    point: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }, { enum: ['m', 'ft'] }], items: false, minItems: 3 },
    tags: { type: 'array', prefixItems: [{ const: 'first' }], items: { type: 'string', maxLength: 4 }, maxItems: 3 },
    pet: { oneOf: [{ $ref: '#/$defs/Cat' }, { $ref: '#/$defs/Dog' }], discriminator: { propertyName: 'pet_type' } },
    owner: { allOf: [{ $ref: '#/$defs/Named' }, { properties: { age: { type: 'integer', minimum: 18, maximum: 99 } }, required: ['age'] }] },
    id: { $ref: '#/$defs/Named', description: 'who', properties: { name: { pattern: '^[a-z]+$' } } },
    either: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'string', maxLength: 3 } }, anyOf: [{ required: ['a'] }, { required: ['b'] }],
      additionalProperties: false },
    scalar: { oneOf: [{ type: 'string', maxLength: 3 }, { type: 'null' }, { type: 'integer', minimum: 0, maximum: 9 }] },
  },
  required: ['point', 'tags', 'pet', 'owner', 'id', 'either', 'scalar'],
  additionalProperties: false,
};

test('tuples, allOf, $ref beside keywords and oneOf: every answer is valid under ajv', async () => {
  const validate = new Ajv2020({ strict: false, allErrors: true }).compile(PYDANTIC_SHAPES);
  const results = [];
  for (const seed of [...SEEDS, 7, 8, 9, 10]) {
    const response = await openai.chat.completions.create({
      messages: user('Fill the form.'), max_tokens: 800, seed, temperature: 0.9, ...NO_THINKING,
      response_format: { type: 'json_schema', json_schema: { name: 'shapes', schema: PYDANTIC_SHAPES } },
    });
    results.push({ finish: response.choices[0].finish_reason, content: response.choices[0].message.content });
  }
  let complete = 0;
  for (const { finish, content } of results) {
    if (finish === 'length') continue;
    assert.equal(finish, 'stop');
    assert.ok(validate(JSON.parse(content)), `${content}\n${JSON.stringify(validate.errors)}`);
    complete++;
  }
  assert.ok(complete >= results.length / 2, `only ${complete} of ${results.length} finished`);
  // What cannot be shown exclusive, or merged exactly, is a 400 that names it.
  const withSchema = (schema) => ({ messages: user('x'), max_tokens: 4,
    response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
  await expectApiError(openai.chat.completions.create(withSchema({ oneOf: [{ type: 'integer' }, { type: 'number' }] })),
    { status: 400, param: 'response_format.json_schema.schema.oneOf', message: /alternatives 0 and 1 may both accept one value/ });
  await expectApiError(openai.chat.completions.create(withSchema({ allOf: [{ type: 'string', format: 'date' }, { format: 'email' }] })),
    { status: 400, param: 'response_format.json_schema.schema.allOf[1].format', message: /differs from another part's 'format'/ });
});

test('unsupported schemas and formats are 400s that name them; text is plain', async () => {
  const withSchema = (schema) => ({ messages: user('x'), max_tokens: 4,
    response_format: { type: 'json_schema', json_schema: { name: 's', schema } } });
  await expectApiError(openai.chat.completions.create(withSchema({ type: 'object', patternProperties: { x: {} } })),
    { status: 400, param: 'response_format.json_schema.schema', message: /'patternProperties' is not supported/ });
  await expectApiError(openai.chat.completions.create(withSchema({ type: 'object', properties: { s: { type: 'string', maxLength: 8, pattern: 'a+' } } })),
    { status: 400, param: 'response_format.json_schema.schema.properties.s.pattern', message: /needs it anchored at both ends/ });
  await expectApiError(openai.chat.completions.create(withSchema({ type: 'string', minLength: 5, maxLength: 4 })),
    { status: 400, param: 'response_format.json_schema.schema.maxLength', message: /is less than minLength/ });
  await expectApiError(openai.chat.completions.create(withSchema({ type: 'object', properties: { s: { type: 'string', pattern: '(a)\\1' } } })),
    { status: 400, param: 'response_format.json_schema.schema.properties.s.pattern', message: /backreferences are not supported/ });
  await expectApiError(openai.chat.completions.create(withSchema({ type: 'string', format: 'uri' })),
    { status: 400, param: 'response_format.json_schema.schema.format', message: /format 'uri' is not supported/ });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), response_format: { type: 'xml' } }),
    { status: 400, param: 'response_format.type', message: /unknown response_format type 'xml'/ });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), response_format: { type: 'json_schema' } }),
    { status: 400, param: 'response_format.json_schema', message: /is required/ });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), tool_choice: 'required',
    tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { n: { type: 'integer', multipleOf: 2, minimum: 0 } } } } }] }),
    { status: 400, param: 'tools[0].function.parameters.properties.n.multipleOf', message: /needs a lower and an upper bound/ });
  await expectApiError(openai.chat.completions.create({ messages: user('x'), response_format: { type: 'json_object' }, ignore_eos: true }),
    { status: 400, param: null, message: /ignore_eos cannot be combined with a constrained output/ });
  await expectApiError(openai.chat.completions.create({ messages: [...user('x'), { role: 'assistant', content: '{' }],
    response_format: { type: 'json_object' } }),
    { status: 400, param: 'messages', message: /cannot continue an assistant prefill/ });
  const text = await openai.chat.completions.create({ messages: user('x'), response_format: { type: 'text' }, max_tokens: 4, ...NO_THINKING });
  assert.ok(['stop', 'length'].includes(text.choices[0].finish_reason));
});

// Random JSON Schemas of the shapes clients send (objects, tuples in either spelling, enums of
// mixed types, allOf, $ref beside keywords, anyOf with keywords beside it, oneOf with
// discriminators), each sent as a response_format to the tiny model. The server may refuse a
// schema (a 400 that names where), but every answer it completes must be valid under ajv (JSON
// Schema 2020-12, or draft 7 for the drafts' tuples): an independent judge of the grammar
// compiler's merges and exclusivity proofs. Seeded: the same schemas every run;
// SCHEMA_SEED and SCHEMA_COUNT pick others (as a fuzzing run would).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020.js';
import AjvDraft7 from 'ajv';
import { makeTinyModel, startServer, user, MODEL_BACKEND_ARGS } from './harness.mjs';

let model, server;
before(async () => {
  model = makeTinyModel();
  server = await startServer(model.modelDir, [...MODEL_BACKEND_ARGS]);
});
after(async () => { await server?.stop(); model?.cleanup(); });

const SEED = Number(process.env.SCHEMA_SEED ?? 20261207);
const COUNT = Number(process.env.SCHEMA_COUNT ?? 80);

// mulberry32: a small seeded generator, so a failing schema can be made again from its seed.
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function generator(rand) {
  const pick = (list) => list[Math.floor(rand() * list.length)];
  const chance = (p) => rand() < p;
  const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));
  const unique = (values) => [...new Set(values)];  // draft 7's meta-schema wants distinct enums
  const names = ['a', 'b', 'c', 'kind', 'n', 'tag'];
  const scalars = [1, 2.5, 'x', 'y', true, null, 0, 'cat', 'dog'];
  const defs = {};
  let drafts = false;  // this schema's tuples in the earlier drafts' spelling (judged as draft 7)

  function scalar(depth) {
    switch (int(0, 7)) {
      case 0: return { type: 'string', ...(chance(0.5) ? { maxLength: int(1, 6) } : {}), ...(chance(0.3) ? { minLength: 1 } : {}) };
      case 1: return { type: 'integer', ...(chance(0.5) ? { minimum: int(-5, 5) } : {}), ...(chance(0.5) ? { maximum: int(6, 50) } : {}) };
      case 2: return { type: 'number', ...(chance(0.4) ? { maximum: int(1, 9) } : {}) };
      case 3: return { type: pick(['boolean', 'null']) };
      case 4: return chance(0.5) ? { enum: unique(Array.from({ length: int(1, 4) }, () => pick(scalars))) }
        : { type: ['string', 'null'], enum: unique(['x', pick(scalars), pick(scalars)]) };
      case 5: return { const: pick(scalars) };
      case 6: return { type: 'string', format: pick(['date', 'uuid', 'email']) };
      default: return { type: ['string', 'null'] };
    }
  }

  function object(depth) {
    const properties = {};
    for (const name of names) if (chance(0.4)) properties[name] = schema(depth + 1);
    const keys = Object.keys(properties);
    const out = { type: 'object', properties };
    const required = keys.filter(() => chance(0.5));
    if (required.length) out.required = required;
    if (chance(0.4)) out.additionalProperties = chance(0.7) ? false : scalar(depth + 1);
    return out;
  }

  function tuple(depth) {
    const prefixItems = Array.from({ length: int(1, 3) }, () => schema(depth + 1));
    const out = drafts ? { type: 'array', items: prefixItems } : { type: 'array', prefixItems };
    if (chance(0.5)) out[drafts ? 'additionalItems' : 'items'] = chance(0.5) ? false : schema(depth + 1);
    if (chance(0.5)) out.minItems = int(0, prefixItems.length);
    if (chance(0.3)) out.maxItems = int(out.minItems ?? 0, 4);
    return out;
  }

  function reference(depth, objects = false) {
    const name = `d${Object.keys(defs).length}`;
    defs[name] = objects || chance(0.6) ? object(depth + 1) : scalar(depth + 1);
    return { $ref: `#/$defs/${name}` };
  }

  // Scalars of different types: a oneOf the compiler can show exclusive.
  function distinctScalars() {
    const kinds = [{ type: 'string', maxLength: 4 }, { type: 'null' }, { type: 'boolean' },
      { type: 'integer', minimum: 0, maximum: 9 }, { type: 'array', items: { type: 'string' }, maxItems: 2 }];
    const count = int(2, 3);
    const start = int(0, kinds.length - 1);
    return Array.from({ length: count }, (_, k) => kinds[(start + k) % kinds.length]);
  }

  function discriminated(depth) {
    const tags = ['cat', 'dog', 'cow'].slice(0, int(2, 3));
    return {
      oneOf: tags.map((tag) => {
        const o = object(depth + 1);
        o.properties.kind = chance(0.5) ? { const: tag } : { enum: [tag], type: 'string' };
        o.required = [...new Set([...(o.required ?? []), 'kind'])];
        return chance(0.5) ? o : (defs[`u${tag}${depth}`] = o, { $ref: `#/$defs/u${tag}${depth}` });
      }),
      ...(chance(0.5) ? { discriminator: { propertyName: 'kind' } } : {}),
    };
  }

  function schema(depth = 0) {
    if (depth >= 3) return scalar(depth);
    switch (int(0, 9)) {
      case 0: case 1: return object(depth);
      case 2: return tuple(depth);
      case 3: return chance(0.7)
        ? { type: 'array', items: schema(depth + 1), ...(chance(0.5) ? { maxItems: int(0, 3) } : {}) }
        : { type: 'array', items: { enum: unique(Array.from({ length: int(1, 5) }, () => pick(scalars))) }, uniqueItems: true,
          ...(chance(0.5) ? { minItems: int(0, 2) } : {}) };
      case 4: return { allOf: Array.from({ length: int(1, 3) }, () => chance(0.5) ? reference(depth, true) : object(depth + 1)) };
      case 5: return chance(0.7)
        ? { ...reference(depth, true), ...(chance(0.5) ? { properties: { z: scalar(depth + 1), a: scalar(depth + 1) } } : { description: 'beside' }) }
        : { allOf: [{ type: 'string', maxLength: int(2, 6) }, { minLength: 1 }, chance(0.5) ? { enum: ['ab', 'abc', 'toolong!', 3] } : { format: 'date' }] };
      case 6: return { anyOf: Array.from({ length: int(1, 3) }, () => schema(depth + 1)), ...(chance(0.5) ? { type: pick(['string', 'object', 'array', 'integer']) } : {}) };
      case 7: return discriminated(depth);
      case 8: return { oneOf: chance(0.8) ? distinctScalars() : Array.from({ length: int(2, 3) }, () => scalar(depth + 1)) };
      default: return scalar(depth);
    }
  }

  return () => {
    for (const key of Object.keys(defs)) delete defs[key];
    drafts = chance(0.3);
    const root = schema();
    return { schema: Object.keys(defs).length ? { ...root, $defs: { ...defs } } : root, drafts };
  };
}

test('random schemas: every completed answer is valid under ajv; refusals name where', async () => {
  const rand = random(SEED);
  const makeSchema = generator(rand);
  const options = { strict: false, allErrors: true, validateFormats: false };
  const ajv2020 = new Ajv2020(options), ajvDraft7 = new AjvDraft7(options);
  let compiled = 0, refused = 0, complete = 0;
  for (let i = 0; i < COUNT; i++) {
    const { schema, drafts } = makeSchema();
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        messages: user('Answer.'), max_tokens: 300, seed: i, temperature: 1,
        chat_template_kwargs: { enable_thinking: false },
        response_format: { type: 'json_schema', json_schema: { name: 's', schema } },
      }),
    });
    const body = await response.json();
    const label = `schema ${i} (seed ${SEED}): ${JSON.stringify(schema)}`;
    if (response.status === 400) {
      assert.match(body.error.param ?? '', /^response_format\.json_schema\.schema/, `${label}\n${JSON.stringify(body)}`);
      refused++;
      if (process.env.SCHEMA_VERBOSE) console.log(`# refused ${i}: ${body.error.param}: ${body.error.message}`);
      continue;
    }
    assert.equal(response.status, 200, `${label}\n${JSON.stringify(body)}`);
    compiled++;
    const { finish_reason: finish, message } = body.choices[0];
    if (finish === 'length') continue;
    assert.equal(finish, 'stop', label);
    const validate = (drafts ? ajvDraft7 : ajv2020).compile(schema);
    const value = JSON.parse(message.content);
    assert.ok(validate(value), `${label}\nanswer ${message.content}\n${JSON.stringify(validate.errors)}`);
    complete++;
  }
  // Not vacuous: many of the generator's shapes compile, and most answers finish.
  assert.ok(compiled >= COUNT / 3, `${compiled} of ${COUNT} compiled (${refused} refused)`);
  assert.ok(complete >= compiled / 2, `${complete} of ${compiled} completed`);
  console.log(`# ${compiled} compiled, ${refused} refused, ${complete} answers validated`);
});

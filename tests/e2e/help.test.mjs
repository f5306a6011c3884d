// `mkserve COMMAND --help` prints the command's flags on stdout and exits 0 for every command
// (it used to work for three of them; `serve --help` said "missing required flag --model"), and
// serve's list names the same flags as docs/api.md's table, so neither drifts from the other.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { BIN } from './harness.mjs';

function run(args) {
  return spawnSync(BIN, args, { encoding: 'utf8', timeout: 30000 });
}

// The command table as `mkserve help` prints it: "  NAME  summary" lines after "commands:".
function commands() {
  const listing = run(['help']).stderr;
  const names = listing.split('commands:')[1].split('\n')
    .map((line) => line.match(/^ {2}(\S+)/)?.[1]).filter(Boolean);
  assert.ok(names.includes('serve') && names.includes('generate'), listing);
  return names;
}

test('every command prints its usage with --help', () => {
  for (const name of commands()) {
    for (const args of [[name, '--help'], [name, '--bogus-flag', 'x', '--help']]) {
      const result = run(args);
      assert.equal(result.signal, null, `${args.join(' ')}: ${result.stderr}`);
      assert.equal(result.status, 0, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stdout, new RegExp(`^usage: mkserve ${name} `), args.join(' '));
      assert.match(result.stdout, /\n {2}--|--[a-z]/, `${name}: no flags listed`);
    }
  }
});

test("serve --help and docs/api.md's flag table name the same flags", () => {
  const usage = run(['serve', '--help']).stdout;
  const inUsage = new Set([...usage.matchAll(/^ {2}(--[a-z0-9-]+)/gm)].map((m) => m[1]));
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const table = doc.split('## Starting the server')[1].split('\n## ')[0];
  const inDoc = new Set([...table.matchAll(/^\| `(--[a-z0-9-]+)/gm)].map((m) => m[1]));
  assert.ok(inDoc.size >= 30, `docs/api.md's table: ${[...inDoc]}`);
  assert.deepEqual([...inUsage].sort(), [...inDoc].sort());
});

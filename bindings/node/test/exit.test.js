'use strict';
// A process that ends holding a lock, or waiting for one, leaves no node behind: its node
// is gone as the process ends, not a session timeout (30 s here) later. Each case is a child
// node process; another client looks at the lock.

const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const path = require('node:path');
const { startServer, uniquePath, waitFor } = require('../test-support/server');
const zklock = require('..');

const HOLDER = path.join(__dirname, '..', 'test-support', 'holder.js');
// "Promptly": the node must be gone this soon after the child's end.
const PROMPT_MS = 1000;

let server;
let client;
const children = new Set();

before(async () => {
  server = await startServer();
  client = await zklock.connect(server.hosts);
});

after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await client?.close();
  await server?.close();
});

/** Runs holder.js; resolves to { child, ended } once it said "ready". */
function holder(lockPath, role, mode) {
  const child = spawn(process.execPath, [HOLDER, server.hosts, lockPath, role, mode],
    { stdio: ['pipe', 'pipe', 'pipe'] });
  children.add(child);
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  const ended = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      children.delete(child);
      resolve({ code, signal, at: Date.now(), err });
    });
  });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('ready\n')) resolve({ child, ended });
    });
    ended.then(({ code, signal }) => reject(new Error(`holder ended (${code ?? signal}) before it `
      + `was ready: ${err}`)));
  });
}

async function nodesOf(lockPath) {
  const lock = client.mutex(lockPath);
  try {
    return await lock.participants();
  } finally {
    await lock.close();
  }
}

async function goneAtOnce(ended, lockPath) {
  const end = await ended;
  assert.ok(await waitFor(async () => (await nodesOf(lockPath)).length === 0, PROMPT_MS),
    `a node is still there ${PROMPT_MS} ms after the process ended: ${JSON.stringify(await nodesOf(lockPath))}`);
  return end;
}

for (const [mode, expect] of [
  ['normal', (e) => e.code === 0],
  ['exit', (e) => e.code === 3],
  ['throw', (e) => e.code === 1],
]) {
  it(`a holder's node goes when it ends: ${mode}`, async () => {
    const lockPath = uniquePath(`exit-${mode}`);
    const { ended } = await holder(lockPath, 'hold', mode);
    const end = await goneAtOnce(ended, lockPath);
    assert.ok(expect(end), `exit ${end.code} ${end.signal}: ${end.err}`);
  });
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  it(`a holder's node goes when ${signal} ends it (by that signal, as without zklock)`, async () => {
    const lockPath = uniquePath(`exit-${signal}`);
    const { child, ended } = await holder(lockPath, 'hold', 'signal');
    assert.equal((await nodesOf(lockPath)).length, 1);
    child.kill(signal);
    const end = await goneAtOnce(ended, lockPath);
    assert.equal(end.signal, signal, `exit ${end.code}: ${end.err}`);
  });
}

for (const mode of ['exit', 'signal']) {
  it(`a waiter's node goes when it ends: ${mode}`, async () => {
    const lockPath = uniquePath(`exit-wait-${mode}`);
    const held = await client.mutex(lockPath).acquire();
    try {
      const { child, ended } = await holder(lockPath, 'wait', mode);
      if (mode === 'signal') {
        // Its node queued behind ours, then SIGINT.
        assert.ok(await waitFor(async () => (await held.lock.participants()).length === 2));
        child.kill('SIGINT');
      }
      const end = await ended;
      assert.ok(await waitFor(async () => (await held.lock.participants()).length === 1, PROMPT_MS));
      assert.ok(mode === 'exit' ? end.code === 3 : end.signal === 'SIGINT', JSON.stringify(end));
    } finally {
      await held.release();
    }
  });
}

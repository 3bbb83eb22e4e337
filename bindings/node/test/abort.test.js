'use strict';
// An AbortSignal gives up its own acquire and no other (the C API's per-acquire cancel scope).

const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startServer, uniquePath, waitFor } = require('../test-support/server');
const zklock = require('..');

let server;
let client;

before(async () => {
  server = await startServer();
  client = await zklock.connect(server.hosts);
});

after(async () => {
  await client?.close();
  await server?.close();
});

it('aborting one acquire of a handle leaves its other acquire waiting', async () => {
  const path = uniquePath('abort-one');
  const leases = client.semaphore(path, 2);
  const holder = await leases.acquire();
  const second = await leases.acquire();
  const sem = client.semaphore(path, 2);
  const ac = new AbortController();
  const aborted = sem.acquire({ signal: ac.signal }).catch((e) => e);
  const kept = sem.acquire({ timeout: 20000 }).catch((e) => e);
  // A cancel of the whole handle (zkl_lock_cancel) would end the sibling too, whenever it
  // landed: sticky, it would end the next acquire to begin.
  const reason = new Error('no longer wanted');
  setTimeout(() => ac.abort(reason), 300);
  const err = await aborted;
  assert.ok(err instanceof zklock.AbortError, String(err));
  assert.ok(err instanceof zklock.CancelledError);
  assert.equal(err.name, 'AbortError');
  assert.equal(err.cause, reason);
  await holder.release();
  const guard = await kept;
  assert.ok(guard instanceof zklock.Guard, String(guard));
  assert.equal(guard.isHeld, true);
  await guard.release();
  await second.release();
});

it('an aborted signal never starts the acquire', async () => {
  const lock = client.mutex(uniquePath('abort-before'));
  const err = await lock.acquire({ signal: AbortSignal.abort() }).catch((e) => e);
  assert.ok(err instanceof zklock.AbortError);
  assert.equal(lock.isHeld, false);
  assert.deepEqual(await lock.participants(), []);
  const g = await lock.acquire({ timeout: 0 }); // no sticky cancel left on the handle
  await g.release();
});

it('AbortSignal.timeout() gives the acquire up, and no node is left', async () => {
  const path = uniquePath('abort-timeout');
  const holder = await client.mutex(path).acquire();
  const lock = client.mutex(path);
  const err = await lock.acquire({ signal: AbortSignal.timeout(200) }).catch((e) => e);
  assert.ok(err instanceof zklock.AbortError, String(err));
  assert.equal(err.cause.name, 'TimeoutError');
  assert.equal((await lock.participants()).length, 1);
  await holder.release();
});

it('an acquire queued behind maxAcquires is aborted without ever starting', async () => {
  const before = zklock.configure().maxAcquires;
  zklock.configure({ maxAcquires: 1 });
  try {
    const path = uniquePath('abort-queued');
    const holder = await client.mutex(path).acquire();
    const first = client.mutex(path).acquire({ timeout: 20000 });
    const ac = new AbortController();
    const queued = client.mutex(path).acquire({ signal: ac.signal }).catch((e) => e);
    assert.ok(await waitFor(async () => (await holder.lock.participants()).length === 2));
    ac.abort();
    assert.ok(await queued instanceof zklock.AbortError);
    assert.equal((await holder.lock.participants()).length, 2);
    await holder.release();
    await (await first).release();
  } finally {
    zklock.configure({ maxAcquires: before });
  }
});

it("lock.cancel() is the handle's sticky cancel: it ends the next acquire, once", async () => {
  const lock = client.mutex(uniquePath('sticky'));
  lock.cancel();
  const err = await lock.acquire({ timeout: 0 }).catch((e) => e);
  assert.ok(err instanceof zklock.CancelledError, String(err));
  assert.equal(err.code, 'ZKL_CANCELLED');
  const g = await lock.acquire({ timeout: 0 });
  await g.release();
  lock.cancel();
  assert.equal(lock.resetCancel(), true);
  assert.equal(lock.resetCancel(), false);
  await (await lock.acquire({ timeout: 0 })).release();
  await lock.close();
});

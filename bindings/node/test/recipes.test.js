'use strict';
// The recipes against a real server: who holds, fencing tokens, timeouts, errors, close.

const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { startServer, startProxy, uniquePath, waitFor } = require('../test-support/server');
const zklock = require('..');

let server;
let client;
let other;

before(async () => {
  server = await startServer();
  client = await zklock.connect(server.hosts, { sessionTimeout: 10000 });
  other = await zklock.connect(server.hosts, { sessionTimeout: 10000, holderId: 'other' });
});

after(async () => {
  await client?.close();
  await other?.close();
  await server?.close();
});

describe('mutex', () => {
  it('is held by one at a time, and each next holder has a larger fencing token', async () => {
    const path = uniquePath('mutex');
    const a = client.mutex(path);
    const b = other.mutex(path);
    const first = await a.acquire({ timeout: 5000 });
    assert.equal(first.isHeld, true);
    assert.equal(first.holdState, 'held');
    assert.equal(typeof first.fencingToken, 'bigint');
    assert.equal(await b.tryAcquire(), null);
    const waiting = b.acquire({ timeout: 10000 });
    assert.ok(await waitFor(async () => (await a.participants()).length === 2));
    await first.release();
    assert.equal(first.isHeld, false);
    assert.equal(first.holdState, 'none');
    const second = await waiting;
    assert.ok(second.fencingToken > first.fencingToken);
    const [holder] = await a.participants();
    assert.equal(holder.holderId, 'other');
    assert.equal(holder.isHolder, true);
    await second.release();
    await a.close();
    await b.close();
  });

  it('is reentrant per handle: two guards, two releases', async () => {
    const lock = client.mutex(uniquePath('reentrant'));
    const g1 = await lock.acquire();
    const g2 = await lock.acquire({ timeout: 0 });
    await g1.release();
    assert.equal(lock.isHeld, true);
    await g2.release();
    assert.equal(lock.isHeld, false);
    await lock.close();
  });

  it('rejects with TimeoutError carrying the status and the message', async () => {
    const path = uniquePath('timeout');
    const held = await client.mutex(path).acquire();
    const started = Date.now();
    const err = await other.mutex(path).acquire({ timeout: 300 }).catch((e) => e);
    assert.ok(err instanceof zklock.TimeoutError);
    assert.ok(err instanceof zklock.ZkLockError);
    assert.ok(err instanceof Error);
    assert.equal(err.status, zklock.STATUS.TIMEOUT);
    assert.equal(err.code, 'ZKL_TIMEOUT');
    assert.equal(err.name, 'TimeoutError');
    assert.match(err.message, /300 ms/);
    assert.ok(Date.now() - started >= 290);
    await held.release();
  });

  it('releases through Symbol.asyncDispose (await using)', async () => {
    const lock = client.mutex(uniquePath('dispose'));
    const guard = await lock.acquire();
    await guard[Symbol.asyncDispose]();
    assert.equal(lock.isHeld, false);
    await guard[Symbol.asyncDispose](); // twice is once
    await lock[Symbol.asyncDispose]();
  });

  it('calls onLost when the hold stops being believed (ZooKeeper out of reach)', async () => {
    const proxy = await startProxy(server.hosts);
    const c2 = await zklock.connect(proxy.hosts, { sessionTimeout: 2000 });
    const guard = await c2.mutex(uniquePath('lost')).acquire();
    let calls = 0;
    const lost = new Promise((resolve) => guard.onLost((state) => {
      calls += 1;
      resolve(state);
    }));
    const keepAlive = setInterval(() => {}, 1000); // the watch itself keeps no process alive
    try {
      const cutAt = Date.now();
      proxy.cut();
      assert.match(await lost, /^(uncertain|lost)$/);
      assert.ok(Date.now() - cutAt < 10000);
      assert.equal(guard.isHeld, false);
      assert.equal(calls, 1);
    } finally {
      clearInterval(keepAlive);
      await c2.close();
    }
  });

  it('does not call onLost for a hold released', async () => {
    const lock = client.mutex(uniquePath('notlost'));
    const guard = await lock.acquire();
    let called = false;
    guard.onLost(() => {
      called = true;
    });
    await guard.release();
    await lock.close();
    assert.equal(called, false);
  });
});

describe('semaphore mutex', () => {
  it('is not reentrant: a second acquire through the holder is WouldDeadlockError', async () => {
    const lock = client.semaphoreMutex(uniquePath('semmutex'));
    const guard = await lock.acquire();
    const err = await lock.acquire({ timeout: 1000 }).catch((e) => e);
    assert.ok(err instanceof zklock.WouldDeadlockError, String(err));
    assert.equal(err.code, 'ZKL_WOULD_DEADLOCK');
    assert.ok(err.message.length > 0);
    assert.equal(await other.semaphoreMutex(lock.path).tryAcquire(), null);
    await guard.release();
    const g = await other.semaphoreMutex(lock.path).acquire({ timeout: 5000 });
    await g.release();
  });
});

describe('read-write lock', () => {
  it('lets readers share and keeps a writer out', async () => {
    const path = uniquePath('rw');
    const r1 = await client.readLock(path).acquire();
    const r2 = await other.readLock(path).acquire({ timeout: 5000 });
    assert.equal(await other.writeLock(path).tryAcquire(), null);
    await r1.release();
    await r2.release();
    const w = await other.writeLock(path).acquire({ timeout: 5000 });
    assert.equal(await client.readLock(path).tryAcquire(), null);
    await w.release();
  });

  it('downgrades within one participant, and refuses the upgrade', async () => {
    const { read, write } = client.rwLock(uniquePath('rwboth'));
    const w = await write.acquire();
    const r = await read.acquire({ timeout: 0 });
    assert.equal(r.fencingToken, w.fencingToken);
    await w.release();
    const err = await write.acquire({ timeout: 0 }).catch((e) => e);
    assert.ok(err instanceof zklock.WouldDeadlockError, String(err));
    await r.release();
  });
});

describe('semaphore', () => {
  it('gives out max leases at once', async () => {
    const path = uniquePath('sem');
    const a = await client.semaphore(path, 2).acquire();
    const b = await other.semaphore(path, 2).acquire({ timeout: 5000 });
    assert.equal(await client.semaphore(path, 2).tryAcquire({ timeout: 200 }), null);
    await a.release();
    const c = await client.semaphore(path, 2).acquire({ timeout: 5000 });
    await b.release();
    await c.release();
  });
});

describe('simple lock', () => {
  it('is one node at the path itself, held by one', async () => {
    const path = uniquePath('simple');
    const lock = client.simpleLock(path);
    const g = await lock.acquire();
    const [p] = await lock.participants();
    assert.equal(p.isHolder, true);
    assert.equal(await other.simpleLock(path).tryAcquire(), null);
    await g.release();
    const g2 = await other.simpleLock(path).acquire({ timeout: 5000 });
    await g2.release();
  });
});

describe('errors and closing', () => {
  it('says what is wrong with a path, as InvalidArgumentError', () => {
    assert.throws(() => client.mutex('no-slash'), (e) => e instanceof zklock.InvalidArgumentError
      && e.status === 2 && /path/i.test(e.message));
    assert.throws(() => client.semaphore('/x', 0), zklock.InvalidArgumentError);
    assert.throws(() => client.mutex(7), TypeError);
  });

  it('refuses unknown options and explains rejectUnauthorized: false', async () => {
    await assert.rejects(zklock.connect(server.hosts, { sesionTimeout: 1 }),
      (e) => e instanceof zklock.InvalidArgumentError && /sesionTimeout/.test(e.message));
    await assert.rejects(zklock.connect(server.hosts, { tls: { rejectUnauthorized: false } }),
      (e) => e instanceof zklock.InvalidArgumentError && /dangerAcceptAnyServerName/.test(e.message));
  });

  it('says why a connect failed: ConnectionLossError with the library\'s words', async () => {
    const err = await zklock.connect('127.0.0.1:1', { connectTimeout: 1000 }).catch((e) => e);
    assert.ok(err instanceof zklock.ConnectionLossError, String(err));
    assert.equal(err.code, 'ZKL_CONNECTION_LOSS');
    assert.match(err.message, /refused|127\.0\.0\.1:1/);
  });

  it('closing a lock rejects its waiting acquire with ClosedError and frees its node', async () => {
    const path = uniquePath('close');
    const held = await client.mutex(path).acquire();
    const lock = other.mutex(path);
    const waiting = lock.acquire().catch((e) => e);
    assert.ok(await waitFor(async () => (await held.lock.participants()).length === 2));
    await lock.close();
    assert.ok(await waiting instanceof zklock.ClosedError);
    assert.equal((await held.lock.participants()).length, 1);
    await assert.rejects(lock.acquire(), zklock.ClosedError);
    await held.release();
  });

  it('closing a client releases its holds at once', async () => {
    const path = uniquePath('clientclose');
    const c2 = await zklock.connect(server.hosts);
    await c2.mutex(path).acquire();
    const lock = client.mutex(path);
    assert.equal((await lock.participants()).length, 1);
    await c2.close();
    assert.equal(c2.sessionState, 'closed');
    assert.equal((await lock.participants()).length, 0);
    assert.throws(() => c2.mutex(path), zklock.ClosedError);
  });

  it('reports the library version', () => {
    assert.match(zklock.version(), /^\d+\.\d+\.\d+/);
  });
});

describe('threads', () => {
  it("12 acquires waiting in this process starve neither libuv's threadpool nor the holder's release", async () => {
    const path = uniquePath('starve');
    const holder = await client.mutex(path).acquire();
    const waiting = Array.from({ length: 12 }, (_, i) => (i % 2 ? client : other).mutex(path))
      .map((lock) => lock.acquire({ timeout: 30000 }).then((g) => g.release().then(() => g)));
    assert.ok(await waitFor(async () => (await holder.lock.participants()).length === 13));
    // fs and crypto run on libuv's threadpool (4 threads): they are not queued behind waits.
    const started = Date.now();
    await Promise.all([
      require('node:fs/promises').readFile(__filename),
      new Promise((resolve, reject) => require('node:crypto').pbkdf2('pw', 'salt', 1, 32, 'sha256',
        (e, k) => (e ? reject(e) : resolve(k)))),
    ]);
    assert.ok(Date.now() - started < 1000, `threadpool work took ${Date.now() - started} ms`);
    await holder.release();
    const guards = await Promise.all(waiting);
    assert.equal(guards.length, 12);
    assert.ok(guards.every((g) => g.fencingToken > holder.fencingToken));
  });
});

'use strict';
// The event loop never blocks: an acquire that waits a second for another holder leaves the
// loop running all along; and 1,000 contended acquires from one process (8 handles on two
// sessions taking turns on one mutex), whose loop delay monitorEventLoopDelay measures (the
// figure is printed: a benchmark's, not a test's, to judge; the test checks one holder at a
// time and growing tokens).

const { it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { startServer, uniquePath } = require('../test-support/server');
const zklock = require('..');

const ACQUIRES = 1000;
const HANDLES = 8;

let server;
const clients = [];

before(async () => {
  server = await startServer();
  for (let i = 0; i < 2; i++) clients.push(await zklock.connect(server.hosts));
});

after(async () => {
  for (const c of clients) await c.close();
  await server?.close();
});

it('runs the loop all along while an acquire waits a second for another holder', async () => {
  const path = uniquePath('loop-runs');
  const holder = await clients[1].mutex(path).acquire();
  let ticks = 0;
  const ticker = setInterval(() => { ticks += 1; }, 10);
  const waiting = clients[0].mutex(path).acquire({ timeout: 60000 });
  // Released a second later by a timer: it fires only if the loop runs meanwhile.
  const released = new Promise((resolve) => setTimeout(() => resolve(holder.release()), 1000));
  const guard = await waiting;
  await released;
  clearInterval(ticker);
  await guard.release();
  // About 100 ticks; a loop held by the acquire would have ticked once at most.
  assert.ok(ticks >= 10, `the loop ticked ${ticks} times while the acquire waited`);
});

it(`measures the loop's delay during ${ACQUIRES} contended acquires`, async (t) => {
  const path = uniquePath('loop-delay');
  const locks = Array.from({ length: HANDLES }, (_, i) => clients[i % 2].mutex(path));
  // Workers warmed up first: the measure is of the acquires, not of starting threads.
  await Promise.all(locks.map(async (l) => (await l.acquire()).release()));
  let left = ACQUIRES;
  let holders = 0;
  let most = 0;
  let last = -1n;
  const h = monitorEventLoopDelay({ resolution: 1 });
  const started = Date.now();
  h.enable();
  await Promise.all(locks.map(async (lock) => {
    while (left > 0) {
      left -= 1;
      const guard = await lock.acquire({ timeout: 60000 });
      holders += 1;
      most = Math.max(most, holders);
      assert.ok(guard.fencingToken > last, 'fencing tokens increase from holder to holder');
      last = guard.fencingToken;
      // A turn of the loop while held: another holder at the same time would be seen.
      await new Promise((resolve) => setImmediate(resolve));
      holders -= 1;
      await guard.release();
    }
  }));
  h.disable();
  const ms = (ns) => Number(ns) / 1e6;
  const took = Date.now() - started;
  const figure = `p50 ${ms(h.percentile(50)).toFixed(2)} ms, p99 ${ms(h.percentile(99)).toFixed(2)} `
    + `ms, max ${ms(h.max).toFixed(2)} ms over ${ACQUIRES} acquires by ${HANDLES} handles in `
    + `${took} ms`;
  t.diagnostic(`event loop delay: ${figure}`);
  console.log(`# event loop delay: ${figure}`);
  assert.equal(most, 1, 'one holder at a time');
});

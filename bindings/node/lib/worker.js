'use strict';
// A worker thread of the package (lib/pool.js): it makes the library's blocking calls, one at
// a time, so that the event loop's thread never waits on ZooKeeper. Each call's failure is
// answered with the message the library kept for it, read here, right after the call: the
// library keeps one last error per thread.

const { parentPort, workerData } = require('node:worker_threads');
const { open } = require('./library');

const { c } = open(workerData.library);
// [0] is 1 from the moment the main thread hands this worker a call until the call returned:
// at process exit the main thread waits on it (Atomics.wait) before it frees handles.
const busy = new Int32Array(workerData.busy);

function failure(status) {
  return { status, message: c.zkl_last_error_message() };
}

function done(status, value) {
  return status ? failure(status) : { status: 0, value };
}

const OPS = {
  /** zkl_options_new, the setters [[name, ...args]], then the connect: the client. */
  connect(hosts, setters) {
    const o = [null];
    let s = c.zkl_options_new(o);
    if (s) return failure(s);
    try {
      for (const [name, ...args] of setters) {
        s = c[name](o[0], ...args);
        if (s) return failure(s);
      }
      const out = [null];
      s = c.zkl_client_connect_with_options(hosts, o[0], out);
      return done(s, out[0]);
    } finally {
      c.zkl_options_free(o[0]);
    }
  },

  /** The acquire, and the fencing token of the hold it got. */
  acquire(lock, ms, scope) {
    const s = c.zkl_lock_acquire_in(lock, ms, scope);
    if (s) return failure(s);
    const token = [0];
    return { status: 0, value: c.zkl_lock_fencing_token(lock, token) ? null : BigInt(token[0]) };
  },

  release(lock) {
    return done(c.zkl_lock_release(lock));
  },

  lockFree(lock) {
    c.zkl_lock_free(lock);
    return { status: 0 };
  },

  clientClose(client) {
    return done(c.zkl_client_close(client));
  },

  participants(lock) {
    const ps = [null];
    const s = c.zkl_lock_participants(lock, ps);
    if (s) return failure(s);
    try {
      const out = [];
      const n = Number(c.zkl_participants_count(ps[0]));
      for (let i = 0; i < n; i++) {
        const p = {};
        const created = [0];
        let t = c.zkl_participants_get(ps[0], i, p);
        if (!t) t = c.zkl_participants_created_ms(ps[0], i, created);
        if (t) return failure(t);
        out.push({
          node: p.node,
          holderId: p.holder_id,
          sequence: Number(p.sequence),
          isHolder: p.is_holder !== 0,
          isReader: p.is_reader !== 0,
          created: new Date(Number(created[0])),
        });
      }
      return { status: 0, value: out };
    } finally {
      c.zkl_participants_free(ps[0]);
    }
  },
};

parentPort.on('message', ({ id, op, args }) => {
  let reply;
  try {
    reply = OPS[op](...args);
  } catch (e) {
    reply = { status: -1, message: `zklock worker: ${op}: ${e && e.stack ? e.stack : e}` };
  }
  Atomics.store(busy, 0, 0);
  Atomics.notify(busy, 0);
  parentPort.postMessage({ id, ...reply });
});

'use strict';
// The library handles the package owns (clients, locks, cancel scopes), and what becomes of
// them when the process ends: at exit (the event loop ran dry, process.exit(), an uncaught
// exception) and at SIGINT, SIGTERM or SIGHUP with no handler of the program's, every
// acquire under way is cancelled, the worker threads' calls are waited for, and every lock
// is freed, which deletes its node at once: no node is left for a session timeout.

const { c } = require('./native');
const { ClosedError } = require('./errors');
const pool = require('./pool');

// How long the process's end waits for calls under way in worker threads (a cancelled
// acquire returns at once; a release takes one round trip).
const EXIT_WAIT_MS = 5000;

/** A library handle and the calls under way on it. */
class Cell {
  constructor(kind, ptr, client = null) {
    this.kind = kind; // 'client' or 'lock'
    this.ptr = ptr;
    this.client = client; // a lock's client's cell
    this.locks = new Set(); // a client's locks' cells
    this.calls = 0; // worker calls under way or queued
    this.drained = null; // resolves when calls drop to 0
    this.acquires = new Set(); // a lock's acquires: { task, scope }
    this.closing = null; // the close's promise, once begun
    this.freeTask = null; // the worker task that frees a lock
    this.freed = false;
    live.add(this);
    if (client) client.locks.add(this);
  }

  /** Throws ClosedError if the handle is closed or closing. */
  open(what) {
    if (this.closing || this.freed) throw new ClosedError(`${what} is closed`, 10);
  }

  /** Runs worker op `op` on this handle (the first argument), counted as a call under way:
   * the reply. */
  async call(op, args, lane = 'short', what = 'the lock') {
    this.open(what);
    const task = this.begin(op, args, lane);
    return this.end(task);
  }

  begin(op, args, lane) {
    this.calls += 1;
    const handles = this.client ? [this, this.client] : [this];
    return pool.run(op, args, { lane, handles });
  }

  async end(task) {
    try {
      return await task.promise;
    } finally {
      this.calls -= 1;
      if (this.calls === 0 && this.drained) {
        this.drained.resolve();
        this.drained = null;
      }
    }
  }

  /** Resolves once no call is under way on the handle. */
  idle() {
    if (this.calls === 0) return Promise.resolve();
    if (!this.drained) {
      let resolve;
      const promise = new Promise((r) => {
        resolve = r;
      });
      this.drained = { promise, resolve };
    }
    return this.drained.promise;
  }

  /** Gives up the lock's acquires under way (each rejects) and, once every call on it
   * returned, frees it on a worker thread (releasing what it holds: its node goes). */
  closeLock() {
    if (!this.closing) {
      this.closing = (async () => {
        this.cancelAcquires();
        await this.idle();
        this.freeTask = pool.run('lockFree', [this.ptr], { handles: [this] });
        await this.freeTask.promise;
        this.forget();
      })();
    }
    return this.closing;
  }

  cancelAcquires() {
    for (const { task, scope } of this.acquires) {
      if (!pool.unqueue(task)) c.zkl_cancel_scope_cancel(scope);
    }
  }

  forget() {
    this.freed = true;
    live.delete(this);
    if (this.client) {
      this.client.locks.delete(this);
      freeOrphan(this.client);
    }
  }
}

/** Frees a client the program dropped, once it has no lock left (zkl_client_free never
 * blocks; the session ends with the last handle). */
function freeOrphan(cell) {
  if (!cell.orphaned || cell.freed || cell.closing || cell.locks.size) return;
  cell.freed = true;
  live.delete(cell);
  c.zkl_client_free(cell.ptr);
}

const live = new Set();

// A Lock or Client the program dropped without closing: its handle is closed for it (a lock's
// hold is released, as Python's handles do when collected).
const collected = new FinalizationRegistry((cell) => {
  if (cell.freed || cell.closing) return;
  if (cell.kind === 'lock') {
    cell.closeLock().catch(() => {});
  } else {
    cell.orphaned = true;
    freeOrphan(cell);
  }
});

let ended = false;

function connected(clientCell) {
  if (!clientCell || clientCell.freed) return false;
  const state = [3];
  return c.zkl_client_session_state(clientCell.ptr, state) === 0 && state[0] === 0;
}

/** The process is ending: synchronously, cancel, wait for the workers' calls, free. */
function endOfProcess() {
  if (ended) return;
  ended = true;
  const locks = [...live].filter((cell) => cell.kind === 'lock');
  for (const cell of locks) {
    for (const { scope } of cell.acquires) c.zkl_cancel_scope_cancel(scope);
    c.zkl_lock_cancel(cell.ptr);
  }
  const stuck = pool.drainForExit(EXIT_WAIT_MS);
  for (const cell of locks) {
    // A free a worker began is that worker's (done, or stuck: then it is left to it).
    if (stuck.has(cell) || (cell.freeTask && cell.freeTask.started)) continue;
    // Cut off from ZooKeeper, a free would wait up to twice the session timeout to delete a
    // node that the session's end removes anyway: the process ends now instead.
    if (!connected(cell.client)) continue;
    cell.forget();
    c.zkl_lock_free(cell.ptr);
  }
  for (const cell of [...live]) {
    if (cell.kind !== 'client' || stuck.has(cell) || cell.locks.size) continue;
    cell.freed = true;
    live.delete(cell);
    c.zkl_client_free(cell.ptr);
  }
}

const SIGNALS = process.platform === 'win32' ? ['SIGINT'] : ['SIGINT', 'SIGTERM', 'SIGHUP'];

function onSignal(signal) {
  // The program listens too: it decides whether the process ends (process.exit() then
  // runs endOfProcess through 'exit').
  if (process.listenerCount(signal) > 1) return;
  endOfProcess();
  for (const s of SIGNALS) process.removeListener(s, onSignal);
  // With no listener left, the signal's default action ends the process, as without us.
  process.kill(process.pid, signal);
}

let watching = false;

/** Installs the exit and signal handlers (with the first client, not at require()). */
function watchProcessEnd() {
  if (watching) return;
  watching = true;
  process.on('exit', endOfProcess);
  for (const s of SIGNALS) process.on(s, onSignal);
}

module.exports = { Cell, collected, watchProcessEnd, endOfProcess };

'use strict';
// Lock (one participant in one lock recipe) and Guard (one hold of it).

const { c, check, replyError } = require('./native');
const { STATUS } = require('./library');
const { AbortError, ClosedError, TimeoutError, errorOf } = require('./errors');
const pool = require('./pool');
const { Cell, collected } = require('./handles');

const HOLD_STATES = ['none', 'held', 'uncertain', 'lost'];

function holdState(cell) {
  if (cell.freed) return 'none';
  const out = [0];
  check(c.zkl_lock_hold_state(cell.ptr, out));
  return HOLD_STATES[out[0]] || 'none';
}

/** The C timeout of `timeout` milliseconds: undefined, null, Infinity or a negative number
 * wait forever (-1), 0 tries once. */
function timeoutMs(timeout) {
  if (timeout === undefined || timeout === null || timeout === Infinity) return -1;
  if (typeof timeout !== 'number' || Number.isNaN(timeout)) {
    throw new TypeError(`timeout must be a number of milliseconds, not ${typeof timeout}`);
  }
  return timeout < 0 ? -1 : Math.ceil(timeout);
}

function checkSignal(signal) {
  if (signal === undefined || signal === null) return null;
  if (typeof signal !== 'object' || typeof signal.addEventListener !== 'function'
      || typeof signal.aborted !== 'boolean') {
    throw new TypeError('signal must be an AbortSignal');
  }
  return signal;
}

// ---------------------------------------------------------------------------- onLost

// The guards watched by onLost, looked at every WATCH_MS: the hold state is a read of the
// library's memory (it never blocks), so watching costs no thread.
const WATCH_MS = 100;
const watched = new Set(); // { guard, cell, callback }
let watchTimer = null;

function watchTick() {
  for (const w of watched) {
    if (w.guard.released || w.cell.freed) {
      watched.delete(w);
      continue;
    }
    let state;
    try {
      state = holdState(w.cell);
    } catch {
      state = 'lost';
    }
    if (state === 'uncertain' || state === 'lost') {
      watched.delete(w);
      process.nextTick(w.callback, state, w.guard);
    }
  }
  if (!watched.size) {
    clearInterval(watchTimer);
    watchTimer = null;
  }
}

// ---------------------------------------------------------------------------- Guard

/** One hold of a lock, as `lock.acquire()` gives it. `release()` gives it back (also
 * `await using guard = await lock.acquire()`, through Symbol.asyncDispose). */
class Guard {
  #lock;
  #cell;
  #release = null;

  constructor(lock, cell, token) {
    this.#lock = lock;
    this.#cell = cell;
    /** The hold's fencing token (a bigint): strictly increasing from one holder of the lock
     * to the next. Send it with every write the lock protects, so the resource can refuse a
     * holder that lost the lock. */
    this.fencingToken = token;
  }

  /** The lock this hold is of. */
  get lock() {
    return this.#lock;
  }

  /** True once release() was called. */
  get released() {
    return this.#release !== null;
  }

  /** Held, and the session provably alive: act on the lock only while this is true. */
  get isHeld() {
    return this.#release === null && !this.#cell.freed && c.zkl_lock_is_held(this.#cell.ptr) === 1;
  }

  /** 'held', 'uncertain' (cut off from ZooKeeper long enough that the session may have
   * expired: stop acting), 'lost' (the session ended), or 'none' once released. */
  get holdState() {
    return this.#release === null ? holdState(this.#cell) : 'none';
  }

  /** Calls `callback(state, guard)` once, when this hold stops being believed ('uncertain'
   * or 'lost'), within 100 ms; never after release(). Returns a function that stops the
   * watch. */
  onLost(callback) {
    if (typeof callback !== 'function') throw new TypeError('onLost takes a function');
    const w = { guard: this, cell: this.#cell, callback };
    watched.add(w);
    if (!watchTimer) {
      watchTimer = setInterval(watchTick, WATCH_MS);
      watchTimer.unref();
    }
    return () => watched.delete(w);
  }

  /** Gives the hold back (its node is deleted). Rejects with LockLostError if the hold had
   * been lost meanwhile (what was done under it was not protected to the end). Calling it
   * again returns the same promise; after lock.close() (which released it) it resolves. */
  release() {
    if (this.#release === null) this.#release = this.#releaseOnce();
    return this.#release;
  }

  async #releaseOnce() {
    const cell = this.#cell;
    if (cell.closing || cell.freed) return;
    const reply = await cell.call('release', [cell.ptr]);
    if (reply.status !== 0) throw replyError(reply);
  }

  [Symbol.asyncDispose]() {
    return this.release();
  }
}

// ---------------------------------------------------------------------------- Lock

/** One participant in one lock recipe (made by a Client). Reentrant where the recipe is (the
 * mutex, the read-write halves): each acquire gives a guard, each guard's release gives back
 * one hold. */
class Lock {
  #cell;

  constructor(ptr, clientCell, client, kind, path) {
    this.#cell = new Cell('lock', ptr, clientCell);
    collected.register(this, this.#cell, this.#cell);
    /** The client the lock was made from. */
    this.client = client;
    /** 'mutex', 'semaphoreMutex', 'readLock', 'writeLock', 'semaphore' or 'simpleLock'. */
    this.kind = kind;
    /** The lock path. */
    this.path = path;
  }

  /** Waits for the lock and resolves to a Guard of the hold. `timeout`: milliseconds (default:
   * as long as it takes; 0 tries once): TimeoutError if not acquired by then. `signal`: an
   * AbortSignal that gives up this acquire alone (AbortError; a hold that arrived meanwhile is
   * given back). Runs on a worker thread of the package's: the event loop never waits. */
  async acquire({ timeout, signal } = {}) {
    return this.#acquire(timeout, signal);
  }

  /** As acquire(), but resolves to null instead of rejecting with TimeoutError. */
  async tryAcquire({ timeout = 0, signal } = {}) {
    try {
      return await this.#acquire(timeout, signal);
    } catch (e) {
      if (e instanceof TimeoutError) return null;
      throw e;
    }
  }

  async #acquire(timeout, signal) {
    const ms = timeoutMs(timeout);
    signal = checkSignal(signal);
    if (signal && signal.aborted) throw new AbortError(signal.reason);
    const cell = this.#cell;
    cell.open('the lock');
    const deadline = ms > 0 ? Date.now() + ms : null;
    const out = [null];
    check(c.zkl_cancel_scope_new(out));
    const scope = out[0];
    // The timeout counts from this call: the C acquire gets what is left when it starts.
    const task = cell.begin('acquire', () => [cell.ptr, deadline === null ? ms
      : Math.max(0, deadline - Date.now()), scope], 'wait');
    const acquire = { task, scope };
    cell.acquires.add(acquire);
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      if (!pool.unqueue(task)) c.zkl_cancel_scope_cancel(scope);
    };
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    let reply;
    try {
      reply = await cell.end(task);
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
      cell.acquires.delete(acquire);
      c.zkl_cancel_scope_free(scope);
    }
    if (reply.status === 0 && (aborted || cell.closing)) {
      // Wanted no more: given back (a lock being closed gives it back as it is freed).
      if (!cell.closing) {
        const back = await cell.call('release', [cell.ptr]);
        if (back.status !== 0 && back.status !== STATUS.LOCK_LOST) throw replyError(back);
      }
    } else if (reply.status === 0) {
      return new Guard(this, cell, reply.value);
    }
    if (aborted) throw new AbortError(signal.reason);
    if (cell.closing && (reply.status === -2 || reply.status === STATUS.CANCELLED
      || reply.status === 0)) {
      throw new ClosedError('the lock was closed during the acquire', STATUS.CLOSED);
    }
    throw replyError(reply);
  }

  /** Ends the acquire under way on this handle, whichever it is (it rejects with
   * CancelledError). Sticky: with none under way, the handle's next acquire rejects at once,
   * forgetting it (as kazoo's cancel()). To give up one acquire of several, use its signal. */
  cancel() {
    this.#cell.open('the lock');
    check(c.zkl_lock_cancel(this.#cell.ptr));
  }

  /** Forgets a cancel() remembered for the next acquire: true if there was one. */
  resetCancel() {
    this.#cell.open('the lock');
    return c.zkl_lock_reset_cancel(this.#cell.ptr) === 1;
  }

  /** Held by this handle, and the session provably alive. */
  get isHeld() {
    return !this.#cell.freed && c.zkl_lock_is_held(this.#cell.ptr) === 1;
  }

  /** 'none', 'held', 'uncertain' or 'lost' (see Guard#holdState). */
  get holdState() {
    return holdState(this.#cell);
  }

  /** Milliseconds the hold stays provably valid if ZooKeeper went silent now
   * (NotHeldError if nothing is held). */
  get leaseRemaining() {
    this.#cell.open('the lock');
    const out = [0];
    check(c.zkl_lock_lease_remaining_ms(this.#cell.ptr, out));
    return Number(out[0]);
  }

  /** Who holds (first) and who waits: [{ node, holderId, sequence, isHolder, isReader,
   * created }]. */
  async participants() {
    const reply = await this.#cell.call('participants', [this.#cell.ptr]);
    if (reply.status !== 0) throw replyError(reply);
    return reply.value;
  }

  /** This handle's statistics: acquires by outcome, holds ended by release or loss, and
   * wait and hold percentiles (milliseconds, over the last 1024). */
  stats() {
    this.#cell.open('the lock');
    const st = {};
    check(c.zkl_lock_stats(this.#cell.ptr, st));
    const pct = (p) => ({
      count: Number(p.count),
      p50: Number(p.p50_us) / 1000,
      p90: Number(p.p90_us) / 1000,
      p99: Number(p.p99_us) / 1000,
      max: Number(p.max_us) / 1000,
    });
    return {
      acquisitions: Number(st.acquisitions),
      timeouts: Number(st.timeouts),
      cancels: Number(st.cancels),
      failures: Number(st.failures),
      releases: Number(st.releases),
      losses: Number(st.losses),
      wait: pct(st.wait),
      hold: pct(st.hold),
    };
  }

  /** Frees the handle: its acquires under way reject (ClosedError), what it holds is
   * released (its node goes at once). Later calls reject with ClosedError. */
  close() {
    collected.unregister(this.#cell);
    return this.#cell.closeLock();
  }

  [Symbol.asyncDispose]() {
    return this.close();
  }
}

module.exports = { Lock, Guard, timeoutMs, HOLD_STATES };

'use strict';
// The package's worker threads: every call of the library that may block (connect, acquire,
// release, close, free, participants) runs on one of them, never on the event loop's thread,
// and never on libuv's threadpool either (a waiting acquire there would hold one of its four
// threads, which fs, dns and crypto share, for as long as it waits).
//
// Two lanes. "wait" calls (acquires) may wait as long as their timeout: at most
// `maxAcquires` of them run at once (the others queue, in order). "short" calls (release,
// close, ...) always find a thread: the pool has RESERVE threads more than acquires may take,
// so a release never queues behind acquires that wait for it. Threads are made when needed
// and end after IDLE_MS without work; an idle one does not keep the process alive.

const path = require('node:path');
const { Worker } = require('node:worker_threads');

const RESERVE = 2;
const IDLE_MS = 10000;

const settings = { maxAcquires: 32 };
let library = null; // where the main thread found the library: every worker loads that file
let nextId = 1;
const slots = new Set(); // every worker: { worker, busy, task, idleTimer }
const idle = [];
const queues = { wait: [], short: [] };
const running = { wait: 0, short: 0 };

function configure({ maxAcquires } = {}) {
  if (maxAcquires !== undefined) {
    if (!Number.isInteger(maxAcquires) || maxAcquires < 1) {
      throw new RangeError(`maxAcquires must be an integer of at least 1, not ${maxAcquires}`);
    }
    settings.maxAcquires = maxAcquires;
    pump();
  }
  return { ...settings };
}

function spawn() {
  const busy = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(path.join(__dirname, 'worker.js'), {
    workerData: { library, busy: busy.buffer },
    name: 'zklock',
  });
  const slot = { worker, busy, task: null, idleTimer: null };
  worker.on('message', (reply) => finish(slot, reply));
  const lost = (why) => {
    slots.delete(slot);
    const i = idle.indexOf(slot);
    if (i >= 0) idle.splice(i, 1);
    if (slot.task) {
      const task = slot.task;
      slot.task = null;
      running[task.lane] -= 1;
      task.resolve({ status: -1, message: `zklock worker thread ended during ${task.op}: ${why}` });
      pump();
    }
  };
  worker.on('error', (e) => lost(e && e.message));
  worker.on('exit', (code) => lost(`exit code ${code}`));
  slots.add(slot);
  return slot;
}

function start(task) {
  let slot = idle.pop();
  if (slot) clearTimeout(slot.idleTimer);
  else slot = spawn();
  slot.task = task;
  task.started = true;
  running[task.lane] += 1;
  Atomics.store(slot.busy, 0, 1);
  slot.worker.ref(); // a call under way keeps the process alive, as a socket's read does
  // Arguments given as a function are made now (an acquire's timeout left after its wait in
  // the queue).
  const args = typeof task.args === 'function' ? task.args() : task.args;
  slot.worker.postMessage({ id: task.id, op: task.op, args });
}

function finish(slot, reply) {
  const task = slot.task;
  if (!task || task.id !== reply.id) return;
  slot.task = null;
  running[task.lane] -= 1;
  slot.worker.unref();
  idle.push(slot);
  slot.idleTimer = setTimeout(() => {
    const i = idle.indexOf(slot);
    if (i >= 0) {
      idle.splice(i, 1);
      slots.delete(slot);
      slot.worker.terminate();
    }
  }, IDLE_MS).unref();
  pump();
  task.resolve(reply);
}

function pump() {
  for (;;) {
    const total = running.wait + running.short;
    const cap = settings.maxAcquires + RESERVE;
    let task;
    if (queues.short.length && total < cap) task = queues.short.shift();
    else if (queues.wait.length && running.wait < settings.maxAcquires && total < cap) {
      task = queues.wait.shift();
    } else return;
    start(task);
  }
}

/** Runs worker op `op(...args)` on a worker thread (`args`: an array, or a function that makes
 * it as the call starts): a task whose `promise` resolves to the reply
 * { status, message, value } (status -1: the worker failed, message says how; -2: taken out
 * of the queue by unqueue before it started).
 * `handles` are the handle cells the call uses (process exit leaves them to the call when it
 * cannot wait for it). */
function run(op, args, { lane = 'short', handles = [] } = {}) {
  if (!library) throw new Error('zklock: the pool is used before the library was loaded');
  const task = { id: nextId++, op, args, lane, handles, started: false };
  task.promise = new Promise((resolve) => {
    task.resolve = resolve;
  });
  queues[lane].push(task);
  pump();
  return task;
}

/** Takes `task` out of its queue if it has not started: true then (it never will). */
function unqueue(task) {
  if (task.started) return false;
  const q = queues[task.lane];
  const i = q.indexOf(task);
  if (i >= 0) q.splice(i, 1);
  task.started = true; // never starts now
  task.resolve({ status: -2 });
  return true;
}

/** At process exit: no call starts any more; waits (blocking: the process is ending) until the
 * worker threads' calls returned, at most `ms`. Returns the handle cells still in use by calls
 * that did not return in time. */
function drainForExit(ms) {
  queues.wait.length = 0;
  queues.short.length = 0;
  const deadline = Date.now() + ms;
  const stuck = new Set();
  for (const slot of slots) {
    while (Atomics.load(slot.busy, 0) === 1) {
      const left = deadline - Date.now();
      if (left <= 0 || Atomics.wait(slot.busy, 0, 1, left) === 'timed-out') {
        if (slot.task) for (const h of slot.task.handles) stuck.add(h);
        break;
      }
    }
  }
  return stuck;
}

function setLibrary(spec) {
  library = spec;
}

module.exports = { configure, run, unqueue, drainForExit, setLibrary, settings };

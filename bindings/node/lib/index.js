'use strict';
// zklock: distributed locks on Apache ZooKeeper, over the zklock C library (through koffi).
//
//   const zklock = require('zklock');            // or: import { connect } from 'zklock';
//   const client = await zklock.connect('127.0.0.1:2181');
//   const guard = await client.mutex('/locks/orders').acquire({ timeout: 5000 });
//   try { /* ... */ } finally { await guard.release(); }
//   await client.close();

const { c } = require('./native');
const {
  ZkLockError,
  TimeoutError,
  InvalidArgumentError,
  NotHeldError,
  ConnectionLossError,
  SessionExpiredError,
  ZooKeeperError,
  InternalError,
  CancelledError,
  LockLostError,
  ClosedError,
  WouldDeadlockError,
  AuthFailedError,
  AbortError,
} = require('./errors');
const { STATUS } = require('./library');
const { connect, Client } = require('./client');
const { Lock, Guard } = require('./lock');
const pool = require('./pool');

/** The loaded library's version, e.g. "0.3.0". */
function version() {
  return c.zkl_version();
}

/** Package settings: `maxAcquires`, how many acquires may wait at once (each waits on a
 * worker thread of the package's; the others queue in order; default 32). Returns them. */
function configure(settings) {
  return pool.configure(settings);
}

module.exports = {
  connect,
  Client,
  Lock,
  Guard,
  version,
  configure,
  STATUS,
  // Shorthand, one by one: ESM's `import { TimeoutError } from 'zklock'` sees them.
  ZkLockError,
  TimeoutError,
  InvalidArgumentError,
  NotHeldError,
  ConnectionLossError,
  SessionExpiredError,
  ZooKeeperError,
  InternalError,
  CancelledError,
  LockLostError,
  ClosedError,
  WouldDeadlockError,
  AuthFailedError,
  AbortError,
};

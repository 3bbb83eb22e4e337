// The package from an ES module: every name is a named export (cjs-module-lexer reads them
// from lib/index.js), and the default export is the whole.
import { it } from 'node:test';
import assert from 'node:assert/strict';
import '../test-support/server.js';
import zklock, {
  connect, configure, version, Client, Lock, Guard, STATUS, ZkLockError, TimeoutError,
  InvalidArgumentError, NotHeldError, ConnectionLossError, SessionExpiredError, ZooKeeperError,
  InternalError, CancelledError, LockLostError, ClosedError, WouldDeadlockError,
  AuthFailedError, AbortError,
} from '../lib/index.js';

it('exports every name to ES modules', () => {
  const named = {
    connect, configure, version, Client, Lock, Guard, STATUS, ZkLockError, TimeoutError,
    InvalidArgumentError, NotHeldError, ConnectionLossError, SessionExpiredError, ZooKeeperError,
    InternalError, CancelledError, LockLostError, ClosedError, WouldDeadlockError,
    AuthFailedError, AbortError,
  };
  assert.deepEqual(Object.keys(named).sort(), Object.keys(zklock).sort());
  for (const [name, value] of Object.entries(named)) assert.equal(value, zklock[name], name);
});

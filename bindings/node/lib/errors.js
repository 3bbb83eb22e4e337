'use strict';
// The errors: one Error subclass per zkl_status, each carrying `status` (the number), `code`
// (its name, "ZKL_TIMEOUT") and the library's message.

const { STATUS } = require('./library');

const NAMES = Object.fromEntries(Object.entries(STATUS).map(([k, v]) => [v, `ZKL_${k}`]));

/** A zklock call failed: `status` is the zkl_status number, `code` its name, `message` the
 * library's words (what happened and what to do). */
class ZkLockError extends Error {
  constructor(message, status = STATUS.INTERNAL_ERROR, options = undefined) {
    super(message, options);
    this.status = status;
    this.code = NAMES[status] || 'ZKL_UNKNOWN_STATUS';
  }

  get name() {
    return this.constructor.name;
  }
}

/** Not acquired before the timeout (timeout 0: the lock was busy). */
class TimeoutError extends ZkLockError {}
/** A malformed path or host list, or a value out of range. */
class InvalidArgumentError extends ZkLockError {}
/** Release (or fencing token) of a lock this handle does not hold. */
class NotHeldError extends ZkLockError {}
/** ZooKeeper not reachable in time; nothing of the call is left on the server. */
class ConnectionLossError extends ZkLockError {}
/** The session expired: every lock it held is lost. */
class SessionExpiredError extends ZkLockError {}
/** Any other error the server returned (no auth, ACL, ...). */
class ZooKeeperError extends ZkLockError {}
/** A bug caught at the library's boundary; the handle is unusable. */
class InternalError extends ZkLockError {}
/** An acquire was cancelled (its AbortSignal, or the lock closed during it). */
class CancelledError extends ZkLockError {}
/** The hold was lost before its release (its session ended, or its node was removed). */
class LockLostError extends ZkLockError {}
/** The client (or the lock) was closed. */
class ClosedError extends ZkLockError {}
/** The acquire could only wait for this handle's own hold: a non-reentrant lock this handle
 * holds, a read -> write upgrade, a semaphore whose leases this handle fills. */
class WouldDeadlockError extends ZkLockError {}
/** The servers refused this client's credentials or certificate, or the client refused the
 * servers' certificate: the message says what to fix; retrying will not help. */
class AuthFailedError extends ZkLockError {}

/** An acquire given up through its AbortSignal: `cause` is the signal's reason. A
 * CancelledError too, named "AbortError" as Node's own aborted calls are. */
class AbortError extends CancelledError {
  constructor(reason) {
    super('the acquire was aborted', STATUS.CANCELLED, { cause: reason });
  }

  get name() {
    return 'AbortError';
  }
}

const CLASSES = {
  [STATUS.TIMEOUT]: TimeoutError,
  [STATUS.INVALID_ARGUMENT]: InvalidArgumentError,
  [STATUS.NOT_HELD]: NotHeldError,
  [STATUS.CONNECTION_LOSS]: ConnectionLossError,
  [STATUS.SESSION_EXPIRED]: SessionExpiredError,
  [STATUS.ZOOKEEPER_ERROR]: ZooKeeperError,
  [STATUS.INTERNAL_ERROR]: InternalError,
  [STATUS.CANCELLED]: CancelledError,
  [STATUS.LOCK_LOST]: LockLostError,
  [STATUS.CLOSED]: ClosedError,
  [STATUS.WOULD_DEADLOCK]: WouldDeadlockError,
  [STATUS.AUTH_FAILED]: AuthFailedError,
};

/** The error of a status other than ZKL_OK and its message. */
function errorOf(status, message) {
  const Class = CLASSES[status] || ZkLockError;
  return new Class(message, status);
}

module.exports = {
  NAMES,
  CLASSES,
  errorOf,
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

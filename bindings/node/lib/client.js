'use strict';
// Client: one ZooKeeper session, its options as Node users name them, and the locks made
// from it.

const { c, check, replyError } = require('./native');
const { STATUS } = require('./library');
const { InvalidArgumentError } = require('./errors');
const pool = require('./pool');
const { Cell, collected, watchProcessEnd } = require('./handles');
const { Lock } = require('./lock');

const PROTOCOLS = { curator: 0, kazoo: 1 };
const ACLS = { open: 0, 'creator-all': 1, 'creator-all-read-all': 2 };
const SESSION_STATES = ['connected', 'suspended', 'expired', 'closed'];
const OPTIONS = ['sessionTimeout', 'connectTimeout', 'holderId', 'protocol', 'acl', 'serverTick',
  'auth', 'tls', 'sasl'];
const TLS_OPTIONS = ['ca', 'cert', 'key', 'passphrase', 'caFile', 'certFile', 'keyFile',
  'dangerAcceptAnyServerName', 'rejectUnauthorized'];

function invalid(message) {
  return new InvalidArgumentError(message, STATUS.INVALID_ARGUMENT);
}

function text(value, what) {
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be a string, not ${value === null ? 'null' : typeof value}`);
  }
  if (value.includes('\0')) throw invalid(`${what} contains a NUL character`);
  return value;
}

/** PEM text from a string or Buffer (or an array of them, as node's tls takes `ca`). */
function pem(value, what) {
  if (Array.isArray(value)) return value.map((v, i) => pem(v, `${what}[${i}]`)).join('\n');
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) {
    return text(Buffer.from(value).toString('utf8'), what);
  }
  if (typeof value !== 'string') {
    throw new TypeError(`${what} must be PEM text (a string or Buffer, as node's tls module takes `
      + `it), not ${typeof value}`);
  }
  return text(value, what);
}

function millis(value, what, min) {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new TypeError(`${what} must be a finite number of milliseconds`);
  }
  const ms = Math.ceil(value);
  if (ms < min || ms > 0xffffffff) {
    throw invalid(`${what} of ${value} ms is out of range (${min} to ${0xffffffff})`);
  }
  return ms;
}

function member(table, value, what) {
  if (!Object.hasOwn(table, value)) {
    throw invalid(`${what} must be one of ${Object.keys(table).map((k) => `'${k}'`).join(', ')},`
      + ` not ${JSON.stringify(value)}`);
  }
  return table[value];
}

function tlsSetters(tls) {
  if (tls === undefined || tls === null || tls === false) return [];
  if (tls === true) return [['zkl_options_use_tls']];
  if (typeof tls !== 'object') throw new TypeError('tls must be true or an object');
  const unknown = Object.keys(tls).filter((k) => !TLS_OPTIONS.includes(k));
  if (unknown.length) {
    throw invalid(`tls: unknown option(s) ${unknown.join(', ')} (zklock takes `
      + `${TLS_OPTIONS.join(', ')})`);
  }
  if (tls.rejectUnauthorized === false) {
    throw invalid('tls.rejectUnauthorized: false is not supported: zklock always checks the '
      + "servers' certificates against the CA (give it as tls.ca); "
      + 'tls.dangerAcceptAnyServerName: true turns off only the check of the host name');
  }
  const out = [['zkl_options_use_tls']];
  if (tls.ca !== undefined && tls.caFile !== undefined) throw invalid('tls: give ca or caFile, not both');
  if (tls.ca !== undefined) out.push(['zkl_options_set_tls_ca_pem', pem(tls.ca, 'tls.ca')]);
  if (tls.caFile !== undefined) out.push(['zkl_options_set_tls_ca_file', text(tls.caFile, 'tls.caFile')]);
  const inline = tls.cert !== undefined || tls.key !== undefined;
  const files = tls.certFile !== undefined || tls.keyFile !== undefined;
  if (inline && files) throw invalid('tls: give cert and key, or certFile and keyFile, not both');
  if (inline) {
    if (tls.cert === undefined || tls.key === undefined) {
      throw invalid("tls: give both cert and key (the client's certificate and its private key)");
    }
    out.push(['zkl_options_set_tls_identity_pem', pem(tls.cert, 'tls.cert'), pem(tls.key, 'tls.key')]);
  }
  if (files) {
    if (tls.certFile === undefined || tls.keyFile === undefined) {
      throw invalid('tls: give both certFile and keyFile');
    }
    out.push(['zkl_options_set_tls_identity_files', text(tls.certFile, 'tls.certFile'),
      text(tls.keyFile, 'tls.keyFile')]);
  }
  if (tls.passphrase !== undefined) {
    if (!inline && !files) throw invalid('tls.passphrase without a key: give tls.cert and tls.key');
    out.push(['zkl_options_set_tls_key_password', text(tls.passphrase, 'tls.passphrase')]);
  }
  if (tls.dangerAcceptAnyServerName === true) {
    out.push(['zkl_options_tls_danger_accept_any_server_name']);
  }
  return out;
}

function saslSetters(sasl) {
  if (sasl === undefined || sasl === null) return [];
  if (typeof sasl !== 'object') {
    throw new TypeError("sasl must be an object such as { mechanism: 'DIGEST-MD5', username, password }");
  }
  const mechanism = sasl.mechanism === undefined ? 'DIGEST-MD5' : sasl.mechanism;
  if (typeof mechanism !== 'string' || mechanism.toUpperCase() !== 'DIGEST-MD5') {
    throw invalid(`sasl.mechanism ${JSON.stringify(mechanism)} is not supported: DIGEST-MD5 is `
      + "the one SASL mechanism of this package's library");
  }
  return [['zkl_options_set_sasl_digest_md5', text(sasl.username, 'sasl.username'),
    text(sasl.password, 'sasl.password')]];
}

function authSetters(auth) {
  if (auth === undefined || auth === null) return [];
  if (!Array.isArray(auth)) {
    throw new TypeError("auth must be an array such as [{ scheme: 'digest', auth: 'user:password' }]");
  }
  return auth.map((a, i) => {
    if (!a || typeof a !== 'object') throw new TypeError(`auth[${i}] must be { scheme, auth }`);
    return ['zkl_options_add_auth', text(a.scheme, `auth[${i}].scheme`), text(a.auth, `auth[${i}].auth`)];
  });
}

/** The zkl_options setters of connect()'s options, every one checked before anything is made. */
function setters(options) {
  if (typeof options !== 'object' || options === null) throw new TypeError('options must be an object');
  const unknown = Object.keys(options).filter((k) => !OPTIONS.includes(k));
  if (unknown.length) {
    throw invalid(`unknown option(s) ${unknown.join(', ')} (zklock.connect takes ${OPTIONS.join(', ')})`);
  }
  const out = [];
  if (options.sessionTimeout !== undefined) {
    out.push(['zkl_options_set_session_timeout', millis(options.sessionTimeout, 'sessionTimeout', 100)]);
  }
  if (options.connectTimeout !== undefined) {
    out.push(['zkl_options_set_connect_timeout', millis(options.connectTimeout, 'connectTimeout', 1)]);
  }
  if (options.holderId !== undefined) {
    out.push(['zkl_options_set_holder_id', text(options.holderId, 'holderId')]);
  }
  if (options.serverTick !== undefined) {
    out.push(['zkl_options_set_server_tick', millis(options.serverTick, 'serverTick', 1)]);
  }
  if (options.protocol !== undefined) {
    out.push(['zkl_options_set_protocol', member(PROTOCOLS, options.protocol, 'protocol')]);
  }
  if (options.acl !== undefined) {
    out.push(['zkl_options_set_acl', member(ACLS, options.acl, 'acl')]);
  }
  return out.concat(authSetters(options.auth), tlsSetters(options.tls), saslSetters(options.sasl));
}

/** One ZooKeeper session. Made by zklock.connect(); `await client.close()` ends it. */
class Client {
  #cell;

  constructor(ptr, hosts) {
    this.#cell = new Cell('client', ptr);
    collected.register(this, this.#cell, this.#cell);
    /** The connect string. */
    this.hosts = hosts;
  }

  /** The holder id stored in this client's lock nodes (default "HOSTNAME:PID"). */
  get holderId() {
    this.#cell.open('the client');
    const out = [null];
    check(c.zkl_client_holder_id(this.#cell.ptr, out));
    return out[0];
  }

  /** 'connected', 'suspended' (cut off; the session may survive), 'expired' or 'closed'. */
  get sessionState() {
    if (this.#cell.freed || this.#cell.closing) return 'closed';
    const out = [0];
    check(c.zkl_client_session_state(this.#cell.ptr, out));
    return SESSION_STATES[out[0]];
  }

  #make(kind, fn, path, ...extra) {
    this.#cell.open('the client');
    text(path, 'path');
    const out = [null];
    check(c[fn](this.#cell.ptr, path, ...extra, out));
    return new Lock(out[0], this.#cell, this, kind, path);
  }

  /** A fair, reentrant exclusive lock (Curator's InterProcessMutex, kazoo's Lock). */
  mutex(path) {
    return this.#make('mutex', 'zkl_mutex_new', path);
  }

  /** A fair exclusive lock that is not reentrant (Curator's InterProcessSemaphoreMutex). */
  semaphoreMutex(path) {
    return this.#make('semaphoreMutex', 'zkl_semaphore_mutex_new', path);
  }

  /** The shared half of the read-write lock at `path` (a participant of its own). */
  readLock(path) {
    return this.#make('readLock', 'zkl_read_lock_new', path);
  }

  /** The exclusive half of the read-write lock at `path` (a participant of its own). */
  writeLock(path) {
    return this.#make('writeLock', 'zkl_write_lock_new', path);
  }

  /** Both halves of one read-write lock, one participant: { read, write }. While the write
   * half is held the read half may be taken too (downgrade); the reverse rejects with
   * WouldDeadlockError. */
  rwLock(path) {
    this.#cell.open('the client');
    text(path, 'path');
    const read = [null];
    const write = [null];
    check(c.zkl_rwlock_new(this.#cell.ptr, path, read, write));
    return {
      read: new Lock(read[0], this.#cell, this, 'readLock', path),
      write: new Lock(write[0], this.#cell, this, 'writeLock', path),
    };
  }

  /** A counting semaphore of `maxLeases` leases: each acquire takes one. */
  semaphore(path, maxLeases) {
    if (!Number.isInteger(maxLeases) || maxLeases < 1 || maxLeases > 0xffffffff) {
      throw invalid(`maxLeases must be an integer from 1 to ${0xffffffff}, not ${maxLeases}`);
    }
    return this.#make('semaphore', 'zkl_semaphore_new', path, maxLeases);
  }

  /** One ephemeral node at `path` itself: cheapest, not fair, not reentrant. */
  simpleLock(path) {
    return this.#make('simpleLock', 'zkl_simple_lock_new', path);
  }

  /** Ends the session: every lock made from the client is closed (its acquires reject with
   * ClosedError, its holds are released: their nodes go at once), then the session. Calling
   * it again returns the same promise. */
  close() {
    const cell = this.#cell;
    if (!cell.closing) {
      collected.unregister(cell);
      cell.closing = (async () => {
        if (!cell.freed) {
          // Holds are lost at once, waiting acquires return; then each lock is freed.
          const task = cell.begin('clientClose', [cell.ptr], 'short');
          const closed = await cell.end(task);
          await Promise.all([...cell.locks].map((lock) => lock.closeLock()));
          await cell.idle();
          cell.freed = true;
          c.zkl_client_free(cell.ptr); // never blocks: the session ends with its last handle
          cell.forget();
          if (closed.status !== 0 && closed.status !== STATUS.CLOSED) throw replyError(closed);
        }
      })();
    }
    return cell.closing;
  }

  [Symbol.asyncDispose]() {
    return this.close();
  }
}

/** Connects to ZooKeeper: resolves to a Client once its session is open. `hosts`:
 * "host:port[,host:port...][/chroot]" (a host may be written tcp+tls://host:port). */
async function connect(hosts, options = {}) {
  text(hosts, 'hosts');
  const calls = setters(options);
  const task = pool.run('connect', [hosts, calls]);
  const reply = await task.promise;
  if (reply.status !== 0) throw replyError(reply);
  watchProcessEnd();
  return new Client(reply.value, hosts);
}

module.exports = { connect, Client, PROTOCOLS, ACLS, SESSION_STATES };

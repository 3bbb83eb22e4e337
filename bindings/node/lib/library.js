'use strict';
// The C library: where it is found, and the koffi declarations of the zklock.h calls this
// package makes. Loaded once by the main thread and once by each of the package's worker
// threads (lib/worker.js), always from the same file, so every thread calls one library and
// the handles one thread makes are valid on the others.

const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');

// zkl_status values (include/zklock.h).
const STATUS = Object.freeze({
  OK: 0,
  TIMEOUT: 1,
  INVALID_ARGUMENT: 2,
  NOT_HELD: 3,
  CONNECTION_LOSS: 4,
  SESSION_EXPIRED: 5,
  ZOOKEEPER_ERROR: 6,
  INTERNAL_ERROR: 7,
  CANCELLED: 8,
  LOCK_LOST: 9,
  CLOSED: 10,
  WOULD_DEADLOCK: 11,
  AUTH_FAILED: 12,
});

// The directory of a library bundled with the package (scripts/test-node.sh copies it there
// before `npm pack`).
const BUNDLED = path.join(__dirname, '..', 'native');
// Names dlopen looks up on the system's library path (the SONAME first).
const SYSTEM = process.platform === 'darwin'
  ? ['libzklock.0.dylib', 'libzklock.dylib']
  : ['libzklock.so.0.3', 'libzklock.so.0', 'libzklock.so'];

/** Where the library is, as the Python package finds it: $ZKLOCK_LIBRARY, else the one
 * bundled beside the package, else the system's. Returns [spec, library]. */
function find() {
  const explicit = process.env.ZKLOCK_LIBRARY;
  if (explicit) {
    try {
      return [explicit, koffi.load(explicit)];
    } catch (e) {
      throw new Error(`ZKLOCK_LIBRARY=${explicit} could not be loaded: ${e.message}`);
    }
  }
  let bundled = [];
  try {
    bundled = fs.readdirSync(BUNDLED)
      .filter((f) => /^libzklock.*\.(so|dylib)(\.[0-9.]+)?$/.test(f)).sort();
  } catch {
    // no bundled library
  }
  if (bundled.length) {
    const file = path.join(BUNDLED, bundled[0]);
    return [file, koffi.load(file)];
  }
  const tried = [];
  for (const name of SYSTEM) {
    try {
      return [name, koffi.load(name)];
    } catch (e) {
      tried.push(`${name} (${e.message.split('\n')[0]})`);
    }
  }
  throw new Error('the zklock C library was not found: set ZKLOCK_LIBRARY to its file, '
    + `bundle it in ${BUNDLED}, or install it on the system; tried ${tried.join('; ')}`);
}

let typesDeclared = false;

/** koffi's types for zklock.h (once per thread: koffi's types are per module instance). */
function declareTypes() {
  if (typesDeclared) return;
  typesDeclared = true;
  for (const name of ['zkl_client', 'zkl_lock', 'zkl_options', 'zkl_cancel_scope',
    'zkl_participants']) {
    koffi.opaque(name);
  }
  koffi.struct('zkl_participant', {
    node: 'const char *',
    holder_id: 'const char *',
    sequence: 'int64_t',
    is_holder: 'int32_t',
    is_reader: 'int32_t',
  });
  koffi.struct('zkl_percentiles', {
    count: 'uint64_t', p50_us: 'int64_t', p90_us: 'int64_t', p99_us: 'int64_t', max_us: 'int64_t',
  });
  koffi.struct('zkl_stats', {
    acquisitions: 'uint64_t',
    timeouts: 'uint64_t',
    cancels: 'uint64_t',
    failures: 'uint64_t',
    releases: 'uint64_t',
    losses: 'uint64_t',
    wait: 'zkl_percentiles',
    hold: 'zkl_percentiles',
  });
}

// Every zklock.h call this package makes, as its prototype in the header (statuses as int;
// the enum arguments are uint32_t there already). test/header.test.js checks them against
// include/zklock.h.
const PROTOTYPES = [
  'int zkl_options_new(_Out_ zkl_options **out)',
  'void zkl_options_free(zkl_options *o)',
  'int zkl_options_set_session_timeout(zkl_options *o, uint32_t ms)',
  'int zkl_options_set_connect_timeout(zkl_options *o, uint32_t ms)',
  'int zkl_options_set_holder_id(zkl_options *o, const char *id)',
  'int zkl_options_set_server_tick(zkl_options *o, uint32_t ms)',
  'int zkl_options_set_protocol(zkl_options *o, uint32_t protocol)',
  'int zkl_options_set_acl(zkl_options *o, uint32_t acl)',
  'int zkl_options_add_auth(zkl_options *o, const char *scheme, const char *auth)',
  'int zkl_options_use_tls(zkl_options *o)',
  'int zkl_options_set_tls_ca_file(zkl_options *o, const char *path)',
  'int zkl_options_set_tls_ca_pem(zkl_options *o, const char *pem)',
  'int zkl_options_set_tls_identity_files(zkl_options *o, const char *cert, const char *key)',
  'int zkl_options_set_tls_identity_pem(zkl_options *o, const char *cert_pem, const char *key_pem)',
  'int zkl_options_set_tls_key_password(zkl_options *o, const char *password)',
  'int zkl_options_tls_danger_accept_any_server_name(zkl_options *o)',
  'int zkl_options_set_sasl_digest_md5(zkl_options *o, const char *user, const char *password)',
  'int zkl_client_connect_with_options(const char *hosts, const zkl_options *o, _Out_ zkl_client **out)',
  'int zkl_client_holder_id(const zkl_client *client, _Out_ const char **out_id)',
  'int zkl_client_session_state(const zkl_client *client, _Out_ uint32_t *out_state)',
  'int zkl_client_close(zkl_client *client)',
  'void zkl_client_free(zkl_client *client)',
  'int zkl_mutex_new(zkl_client *client, const char *path, _Out_ zkl_lock **out_lock)',
  'int zkl_semaphore_mutex_new(zkl_client *client, const char *path, _Out_ zkl_lock **out_lock)',
  'int zkl_simple_lock_new(zkl_client *client, const char *path, _Out_ zkl_lock **out_lock)',
  'int zkl_read_lock_new(zkl_client *client, const char *path, _Out_ zkl_lock **out_lock)',
  'int zkl_write_lock_new(zkl_client *client, const char *path, _Out_ zkl_lock **out_lock)',
  'int zkl_rwlock_new(zkl_client *client, const char *path, _Out_ zkl_lock **out_read, _Out_ zkl_lock **out_write)',
  'int zkl_semaphore_new(zkl_client *client, const char *path, uint32_t max_leases, _Out_ zkl_lock **out_lock)',
  'int zkl_cancel_scope_new(_Out_ zkl_cancel_scope **out)',
  'int zkl_cancel_scope_cancel(const zkl_cancel_scope *scope)',
  'void zkl_cancel_scope_free(zkl_cancel_scope *scope)',
  'int zkl_lock_acquire_in(zkl_lock *lock, int64_t timeout_ms, const zkl_cancel_scope *scope)',
  'int zkl_lock_release(zkl_lock *lock)',
  'int zkl_lock_cancel(const zkl_lock *lock)',
  'int zkl_lock_reset_cancel(const zkl_lock *lock)',
  'int zkl_lock_is_held(const zkl_lock *lock)',
  'int zkl_lock_hold_state(const zkl_lock *lock, _Out_ uint32_t *out_state)',
  'int zkl_lock_fencing_token(const zkl_lock *lock, _Out_ int64_t *out_token)',
  'int zkl_lock_lease_remaining_ms(const zkl_lock *lock, _Out_ int64_t *out_ms)',
  'int zkl_lock_stats(const zkl_lock *lock, _Out_ zkl_stats *out)',
  'void zkl_lock_free(zkl_lock *lock)',
  'int zkl_lock_participants(const zkl_lock *lock, _Out_ zkl_participants **out)',
  'size_t zkl_participants_count(const zkl_participants *participants)',
  'int zkl_participants_get(const zkl_participants *participants, size_t index, _Out_ zkl_participant *out)',
  'int zkl_participants_created_ms(const zkl_participants *participants, size_t index, _Out_ int64_t *out_ms)',
  'void zkl_participants_free(zkl_participants *participants)',
  'const char *zkl_last_error_message(void)',
  'const char *zkl_status_name(uint32_t status)',
  'const char *zkl_version(void)',
];

/** The declared calls of the library `lib`, by name. */
function declare(lib) {
  declareTypes();
  const c = {};
  for (const proto of PROTOTYPES) {
    const fn = lib.func(proto);
    c[/\b(zkl_[a-z0-9_]+)\(/.exec(proto)[1]] = fn;
  }
  return c;
}

/** The library for this thread: found (main thread) or at `spec` (a worker, told by the
 * main thread where it was found). */
function open(spec) {
  const [where, lib] = spec ? [spec, koffi.load(spec)] : find();
  return { spec: where, c: declare(lib) };
}

module.exports = { STATUS, PROTOTYPES, open };

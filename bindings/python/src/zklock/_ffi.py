"""The C library: loading it, the ctypes declarations of every ``zklock.h`` function this
package calls, and the call that reads a failure's message on the thread that made it."""

from __future__ import annotations

import ctypes
import glob
import os
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)


# zkl_status
OK = 0
TIMEOUT = 1
INVALID_ARGUMENT = 2
NOT_HELD = 3
CONNECTION_LOSS = 4
SESSION_EXPIRED = 5
ZOOKEEPER_ERROR = 6
INTERNAL_ERROR = 7
CANCELLED = 8
LOCK_LOST = 9
CLOSED = 10
WOULD_DEADLOCK = 11
AUTH_FAILED = 12


def _load() -> ctypes.CDLL:
    """The library bundled in this package; ``$ZKLOCK_LIBRARY`` overrides it (development)."""
    explicit = os.environ.get("ZKLOCK_LIBRARY")
    if explicit:
        return ctypes.CDLL(explicit)
    here = os.path.dirname(os.path.abspath(__file__))
    for pattern in ("_native*.so", "_native*.dylib", "libzklock*.so*"):
        found = sorted(glob.glob(os.path.join(here, pattern)))
        if found:
            return ctypes.CDLL(found[0])
    raise OSError("the zklock library is not bundled in %s: reinstall the package" % here)


_lib = _load()

_status = c_int
_client_p = c_void_p
_lock_p = c_void_p
_participants_p = c_void_p
_options_p = c_void_p
_cancel_scope_p = c_void_p
_LOG_CALLBACK = CFUNCTYPE(None, c_uint32, c_char_p, c_char_p, c_void_p)


class _Participant(Structure):
    _fields_ = [("node", c_char_p), ("holder_id", c_char_p), ("sequence", c_int64),
                ("is_holder", c_int32), ("is_reader", c_int32)]


class _Percentiles(Structure):
    _fields_ = [("count", c_uint64), ("p50_us", c_int64), ("p90_us", c_int64),
                ("p99_us", c_int64), ("max_us", c_int64)]


class _Stats(Structure):
    _fields_ = [("acquisitions", c_uint64), ("timeouts", c_uint64), ("cancels", c_uint64),
                ("failures", c_uint64), ("releases", c_uint64), ("losses", c_uint64),
                ("wait", _Percentiles), ("hold", _Percentiles)]


class _SessionEvent(Structure):
    _fields_ = [("seq", c_uint64), ("state", c_uint32), ("session_id", c_int64),
                ("generation", c_uint64)]


class _ZklOp(Structure):
    """zkl_op: one write of zkl_lock_multi."""
    _fields_ = [("kind", c_uint32), ("path", c_char_p), ("data", POINTER(c_uint8)),
                ("len", c_size_t), ("version", c_int32), ("mode", c_uint32)]

# Every function of zklock.h this package calls: (restype, argtypes). tests/test_header.py
# checks this table against the header, so the two cannot drift apart.
_SIGNATURES = {
    "zkl_client_connect": (_status, [c_char_p, c_uint32, POINTER(_client_p)]),
    "zkl_client_connect_with": (_status, [c_char_p, c_uint32, c_uint32, c_char_p,
                                          POINTER(_client_p)]),
    "zkl_client_connect_with_tick": (_status, [c_char_p, c_uint32, c_uint32, c_char_p,
                                               c_uint32, POINTER(_client_p)]),
    "zkl_client_connect_with_options": (_status, [c_char_p, _options_p, POINTER(_client_p)]),
    "zkl_options_new": (_status, [POINTER(_options_p)]),
    "zkl_options_free": (None, [_options_p]),
    "zkl_options_set_session_timeout": (_status, [_options_p, c_uint32]),
    "zkl_options_set_connect_timeout": (_status, [_options_p, c_uint32]),
    "zkl_options_set_holder_id": (_status, [_options_p, c_char_p]),
    "zkl_options_set_server_tick": (_status, [_options_p, c_uint32]),
    "zkl_options_set_protocol": (_status, [_options_p, c_uint32]),
    "zkl_options_add_auth": (_status, [_options_p, c_char_p, c_char_p]),
    "zkl_options_use_tls": (_status, [_options_p]),
    "zkl_options_set_tls_ca_file": (_status, [_options_p, c_char_p]),
    "zkl_options_set_tls_identity_files": (_status, [_options_p, c_char_p, c_char_p]),
    "zkl_options_set_tls_key_password": (_status, [_options_p, c_char_p]),
    "zkl_options_tls_danger_accept_any_server_name": (_status, [_options_p]),
    "zkl_options_set_sasl_digest_md5": (_status, [_options_p, c_char_p, c_char_p]),
    "zkl_options_set_sasl_gssapi": (_status, [_options_p, c_char_p, c_char_p, c_char_p]),
    "zkl_client_holder_id": (_status, [_client_p, POINTER(c_char_p)]),
    "zkl_client_session_state": (_status, [_client_p, POINTER(c_uint32)]),
    "zkl_client_wait_session_event": (_status, [_client_p, c_uint64, c_int64,
                                                POINTER(_SessionEvent)]),
    "zkl_client_request_revoke": (_status, [_client_p, c_char_p]),
    "zkl_client_close": (_status, [_client_p]),
    "zkl_client_set_protocol": (_status, [_client_p, c_uint32]),
    "zkl_client_add_auth": (_status, [_client_p, c_char_p, c_char_p]),
    "zkl_client_set_acl": (_status, [_client_p, c_uint32]),
    "zkl_client_free": (None, [_client_p]),
    "zkl_mutex_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_semaphore_mutex_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_read_lock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_write_lock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_rwlock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p), POINTER(_lock_p)]),
    "zkl_semaphore_new": (_status, [_client_p, c_char_p, c_uint32, POINTER(_lock_p)]),
    "zkl_simple_lock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_leader_election_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_multi_lock_new": (_status, [POINTER(_lock_p), c_size_t, POINTER(_lock_p)]),
    "zkl_multi_lock_token_at": (_status, [_lock_p, c_size_t, POINTER(c_int64)]),
    "zkl_multi_lock_token_of": (_status, [_lock_p, c_char_p, POINTER(c_int64)]),
    "zkl_lock_acquire": (_status, [_lock_p, c_int64]),
    "zkl_lock_acquire_in": (_status, [_lock_p, c_int64, _cancel_scope_p]),
    "zkl_cancel_scope_new": (_status, [POINTER(_cancel_scope_p)]),
    "zkl_cancel_scope_cancel": (_status, [_cancel_scope_p]),
    "zkl_cancel_scope_free": (None, [_cancel_scope_p]),
    "zkl_lock_release": (_status, [_lock_p]),
    "zkl_semaphore_acquire_many": (_status, [_lock_p, c_uint32, c_int64, POINTER(c_int64)]),
    "zkl_semaphore_release_many": (_status, [_lock_p, POINTER(c_int64), c_size_t]),
    "zkl_lock_multi": (_status, [_lock_p, POINTER(_ZklOp), c_size_t]),
    "zkl_lock_set_data": (_status, [_lock_p, c_char_p, POINTER(c_uint8), c_size_t]),
    "zkl_lock_create": (_status, [_lock_p, c_char_p, POINTER(c_uint8), c_size_t, c_uint32]),
    "zkl_lock_delete": (_status, [_lock_p, c_char_p]),
    "zkl_lock_cancel": (_status, [_lock_p]),
    "zkl_lock_reset_cancel": (c_int, [_lock_p]),
    "zkl_lock_is_held": (c_int, [_lock_p]),
    "zkl_lock_hold_state": (_status, [_lock_p, POINTER(c_uint32)]),
    "zkl_lock_lease_remaining_ms": (_status, [_lock_p, POINTER(c_int64)]),
    "zkl_lock_fencing_token": (_status, [_lock_p, POINTER(c_int64)]),
    "zkl_lock_free": (None, [_lock_p]),
    "zkl_lock_wait_lost": (_status, [_lock_p, c_int64]),
    "zkl_lock_participants": (_status, [_lock_p, POINTER(_participants_p)]),
    "zkl_participants_count": (c_size_t, [_participants_p]),
    "zkl_participants_get": (_status, [_participants_p, c_size_t, POINTER(_Participant)]),
    "zkl_participants_created_ms": (_status, [_participants_p, c_size_t, POINTER(c_int64)]),
    "zkl_participants_free": (None, [_participants_p]),
    "zkl_lock_stats": (_status, [_lock_p, POINTER(_Stats)]),
    "zkl_lock_make_revocable": (_status, [_lock_p]),
    "zkl_lock_wait_revoke_request": (_status, [_lock_p, c_int64]),
    "zkl_lock_revoke_holders": (_status, [_lock_p, POINTER(c_size_t)]),
    "zkl_set_log_callback": (_status, [_LOG_CALLBACK, c_uint32, c_void_p]),
    "zkl_log_start": (_status, [c_uint32]),
    "zkl_log_next": (_status, [c_int64, POINTER(c_uint32), POINTER(c_char_p), POINTER(c_char_p)]),
    "zkl_log_stop": (_status, []),
    "zkl_last_error_message": (c_char_p, []),
    "zkl_last_error_hint": (c_uint32, []),
    "zkl_last_error_reason": (c_char_p, []),
    "zkl_status_name": (c_char_p, [c_uint32]),
    "zkl_version": (c_char_p, []),
}

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes


def version() -> str:
    """The library's version, e.g. ``"0.3.0"`` (the crate's, and this package's)."""
    return _lib.zkl_version().decode()


class _Status(int):
    """A status other than ZKL_OK with the library's message, read on the thread that made the
    call right after it: the library keeps one last error per thread, so a status handed to
    another thread (a blocking acquire runs on a helper thread, an async one on a worker) must
    carry its message along."""

    message = ""

    def __new__(cls, status: int, message: str):
        self = super().__new__(cls, status)
        self.message = message
        return self


# The settings the library's hints name (zkl_hint, from zkl_last_error_hint), as this package's
# keywords: the message names them after the library's reason, where C names its functions.
_HINT_KEYWORDS = {
    1: "ca=",  # ZKL_HINT_TLS_CA_FILE
    2: "certfile= and keyfile=",  # ZKL_HINT_TLS_IDENTITY
    3: "keyfile_password=",  # ZKL_HINT_TLS_KEY_PASSWORD
    4: "use_ssl=",  # ZKL_HINT_TLS
    5: "sasl_options=",  # ZKL_HINT_SASL
    6: "sasl_options=, certfile= or auth_data=",  # ZKL_HINT_IDENTITY
    7: "connect_timeout=",  # ZKL_HINT_CONNECT_TIMEOUT
}


def _last_message() -> str:
    """This thread's last error message, its hint (the setting that fixes it) named with this
    package's keywords: the library's reason, then the keyword in parentheses."""
    keyword = _HINT_KEYWORDS.get(_lib.zkl_last_error_hint())
    if keyword is None:  # no hint (or one newer than this package: the C words then)
        return _lib.zkl_last_error_message().decode("utf-8", "replace")
    return "%s (%s)" % (_lib.zkl_last_error_reason().decode("utf-8", "replace"), keyword)


def _c(fn, *args) -> int:
    """``fn(*args)``, a zkl_ function that returns a status: ZKL_OK, or a :class:`_Status` with
    this thread's message of it."""
    status = fn(*args)
    if status == OK:
        return OK
    return _Status(status, _last_message())


def _plain(fn, *args):
    """``fn(*args)``, for a zkl_ function whose result is not a status."""
    return fn(*args)

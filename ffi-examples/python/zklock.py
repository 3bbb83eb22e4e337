"""zklock for Python: a ctypes binding of the zklock C API (include/zklock.h).

    import zklock
    client = zklock.Client("127.0.0.1:2181")
    with client.mutex("/locks/orders") as lock:      # acquires, releases at the end
        print("holding, fencing token", lock.fencing_token)
    lock = client.mutex("/locks/orders")
    if lock.acquire(timeout=2.0):                   # False if not acquired in time
        try:
            ...
        finally:
            lock.release()

Errors raise ZklError(status, message). Blocking calls release the GIL (ctypes.CDLL), so
other Python threads run meanwhile and Lock.cancel() from another thread interrupts a
waiting acquire.

The shared library is loaded from $ZKLOCK_LIBRARY if set, else from the crate's
target/{debug,release}/ next to this file's checkout, else from the system's library path.
"""

import ctypes
import ctypes.util
import os
from ctypes import POINTER, c_char_p, c_int, c_int64, c_size_t, c_uint32, c_void_p

__all__ = [
    "Client",
    "Lock",
    "ZklError",
    "multi_lock",
    "version",
    "status_name",
    "PROTOCOL_CURATOR",
    "PROTOCOL_KAZOO",
]

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

# zkl_protocol
PROTOCOL_CURATOR = 0
PROTOCOL_KAZOO = 1


def _load():
    explicit = os.environ.get("ZKLOCK_LIBRARY")
    if explicit:
        return ctypes.CDLL(explicit)
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    targets = [os.environ.get("CARGO_TARGET_DIR") or "", os.path.join(root, "target")]
    for target in targets:
        for profile in ("debug", "release"):
            path = os.path.join(target, profile, "libzklock.so") if target else ""
            if path and os.path.exists(path):
                return ctypes.CDLL(path)
    found = ctypes.util.find_library("zklock")
    if found:
        return ctypes.CDLL(found)
    raise OSError("libzklock.so not found: build it with `cargo build` or set ZKLOCK_LIBRARY")


_lib = _load()

# Handles are opaque pointers; statuses are C enums (int); enum values from Python are uint32_t.
_status = c_int
_client_p = c_void_p
_lock_p = c_void_p

_SIGNATURES = {
    "zkl_client_connect": (_status, [c_char_p, c_uint32, POINTER(_client_p)]),
    "zkl_client_set_protocol": (_status, [_client_p, c_uint32]),
    "zkl_client_add_auth": (_status, [_client_p, c_char_p, c_char_p]),
    "zkl_client_free": (None, [_client_p]),
    "zkl_mutex_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_semaphore_mutex_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_read_lock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_write_lock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_rwlock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p), POINTER(_lock_p)]),
    "zkl_semaphore_new": (_status, [_client_p, c_char_p, c_uint32, POINTER(_lock_p)]),
    "zkl_simple_lock_new": (_status, [_client_p, c_char_p, POINTER(_lock_p)]),
    "zkl_multi_lock_new": (_status, [POINTER(_lock_p), c_size_t, POINTER(_lock_p)]),
    "zkl_lock_acquire": (_status, [_lock_p, c_int64]),
    "zkl_lock_release": (_status, [_lock_p]),
    "zkl_lock_cancel": (_status, [_lock_p]),
    "zkl_lock_is_held": (c_int, [_lock_p]),
    "zkl_lock_hold_state": (_status, [_lock_p, POINTER(c_uint32)]),
    "zkl_lock_lease_remaining_ms": (_status, [_lock_p, POINTER(c_int64)]),
    "zkl_client_set_acl": (_status, [_client_p, c_uint32]),
    "zkl_lock_fencing_token": (_status, [_lock_p, POINTER(c_int64)]),
    "zkl_lock_free": (None, [_lock_p]),
    "zkl_last_error_message": (c_char_p, []),
    "zkl_status_name": (c_char_p, [c_uint32]),
    "zkl_version": (c_char_p, []),
}

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes


def version():
    """The library's version, e.g. "0.1.0"."""
    return _lib.zkl_version().decode()


def status_name(status):
    """The name of a status value, e.g. "ZKL_TIMEOUT" ("ZKL_UNKNOWN_STATUS" for others)."""
    return _lib.zkl_status_name(status & 0xFFFFFFFF).decode()


class ZklError(Exception):
    """A call returned a status other than ZKL_OK; `status` is the number, `message` the words."""

    def __init__(self, status, message):
        super().__init__(status, message)
        self.status = status
        self.message = message

    @property
    def name(self):
        return status_name(self.status)

    def __str__(self):
        return "%s: %s" % (self.name, self.message)


def _check(status):
    if status != OK:
        raise ZklError(status, _lib.zkl_last_error_message().decode("utf-8", "replace"))


def _text(s, what):
    if isinstance(s, bytes):
        return s
    if not isinstance(s, str):
        raise TypeError("%s must be str or bytes, not %s" % (what, type(s).__name__))
    return s.encode("utf-8")


def _millis(timeout):
    """None -> -1 (forever); seconds (float) -> whole milliseconds, rounded up."""
    if timeout is None:
        return -1
    if timeout <= 0:
        return 0
    return min(max(1, int(timeout * 1000 + 0.999)), 2**63 - 1)


class _Managed:
    """A handle that frees itself: close() is idempotent and also runs on garbage collection."""

    _free = None
    _ptr = None  # also when __init__ failed before setting it

    def __init__(self, ptr):
        self._ptr = ptr

    def _handle(self):
        if self._ptr is None:
            raise ValueError("%s is closed" % type(self).__name__)
        return self._ptr

    def close(self):
        ptr, self._ptr = self._ptr, None
        if ptr is not None:
            type(self)._free(ptr)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone already
            pass


class Lock(_Managed):
    """One participant in one lock recipe. `with lock:` holds it for the block.

    The handle is the participant: any thread may release what another thread acquired
    through it (thread pools and asyncio.to_thread move calls between threads). Use from one
    thread at a time, except cancel(), which any thread may call.
    """

    _free = staticmethod(_lib.zkl_lock_free)

    def acquire(self, timeout=None):
        """Waits for the lock: forever (None), at most `timeout` seconds, or tries once (0).

        Returns True when held, False when not acquired in time; raises ZklError otherwise
        (CANCELLED if cancel() interrupted it)."""
        status = _lib.zkl_lock_acquire(self._handle(), _millis(timeout))
        if status == TIMEOUT:
            return False
        _check(status)
        return True

    def release(self):
        """Releases one hold (ZklError NOT_HELD if not held)."""
        _check(_lib.zkl_lock_release(self._handle()))

    def cancel(self):
        """Makes acquires waiting on this lock (in other threads) raise ZklError CANCELLED."""
        _check(_lib.zkl_lock_cancel(self._handle()))

    @property
    def is_held(self):
        return self._ptr is not None and _lib.zkl_lock_is_held(self._ptr) == 1

    @property
    def hold_state(self):
        """"none", "held", "uncertain" (cut off: stop acting) or "lost"."""
        state = c_uint32()
        _check(_lib.zkl_lock_hold_state(self._handle(), ctypes.byref(state)))
        return ("none", "held", "uncertain", "lost")[state.value]

    @property
    def lease_remaining(self):
        """Seconds the hold stays provably valid if the server went silent now."""
        ms = c_int64()
        _check(_lib.zkl_lock_lease_remaining_ms(self._handle(), ctypes.byref(ms)))
        return ms.value / 1000.0

    @property
    def fencing_token(self):
        """The current hold's fencing token (ZklError NOT_HELD if not held)."""
        token = c_int64()
        _check(_lib.zkl_lock_fencing_token(self._handle(), ctypes.byref(token)))
        return token.value

    def hold(self, timeout=None):
        """A context manager that holds the lock, raising ZklError TIMEOUT if not acquired
        within `timeout` seconds: `with lock.hold(2.0): ...`."""
        return _Hold(self, timeout)

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()
        return False


class _Hold:
    def __init__(self, lock, timeout):
        self._lock, self._timeout = lock, timeout

    def __enter__(self):
        status = _lib.zkl_lock_acquire(self._lock._handle(), _millis(self._timeout))
        _check(status)
        return self._lock

    def __exit__(self, *exc):
        self._lock.release()
        return False


def multi_lock(locks):
    """All or nothing over `locks` (Lock objects of any kinds except multi-locks). Takes them
    over on success (they are closed and must not be used any more); on error they are
    unchanged."""
    locks = list(locks)
    array = (_lock_p * len(locks))(*[l._handle() for l in locks])
    out = _lock_p()
    _check(_lib.zkl_multi_lock_new(array, len(locks), ctypes.byref(out)))
    for l in locks:
        l._ptr = None  # owned by the multi-lock now
    return Lock(out.value)


class Client(_Managed):
    """One ZooKeeper session; any number of threads may use it. `with Client(...) as c:`
    closes it at the end (locks made from it keep the session open until they are closed)."""

    _free = staticmethod(_lib.zkl_client_free)

    def __init__(self, hosts, session_timeout=10.0):
        ptr = _client_p()
        _check(_lib.zkl_client_connect(_text(hosts, "hosts"), _millis(session_timeout), ctypes.byref(ptr)))
        super().__init__(ptr.value)

    def set_protocol(self, protocol):
        """PROTOCOL_CURATOR or PROTOCOL_KAZOO, for locks made after the call."""
        _check(_lib.zkl_client_set_protocol(self._handle(), protocol))

    def add_auth(self, scheme, auth):
        _check(_lib.zkl_client_add_auth(self._handle(), _text(scheme, "scheme"), _text(auth, "auth")))

    def _make(self, fn, path, *extra):
        out = _lock_p()
        _check(fn(self._handle(), _text(path, "path"), *extra, ctypes.byref(out)))
        return Lock(out.value)

    def mutex(self, path):
        """A fair, reentrant (per thread) exclusive lock (Curator InterProcessMutex)."""
        return self._make(_lib.zkl_mutex_new, path)

    def semaphore_mutex(self, path):
        """A fair exclusive lock, not reentrant, that any thread may release."""
        return self._make(_lib.zkl_semaphore_mutex_new, path)

    def read_lock(self, path):
        """The shared half of the read-write lock at `path`."""
        return self._make(_lib.zkl_read_lock_new, path)

    def write_lock(self, path):
        """The exclusive half of the read-write lock at `path`."""
        return self._make(_lib.zkl_write_lock_new, path)

    def rwlock(self, path):
        """Both halves of one read-write lock, sharing holds: (read, write). A thread holding
        the write half may take the read half (downgrade); the reverse fails at once."""
        read, write = _lock_p(), _lock_p()
        _check(_lib.zkl_rwlock_new(self._handle(), _text(path, "path"),
                                   ctypes.byref(read), ctypes.byref(write)))
        return Lock(read.value), Lock(write.value)

    def semaphore(self, path, max_leases):
        """A semaphore of `max_leases` leases; each acquire takes one."""
        return self._make(_lib.zkl_semaphore_new, path, max_leases)

    def simple_lock(self, path):
        """One ephemeral node at `path` itself: cheapest, not fair."""
        return self._make(_lib.zkl_simple_lock_new, path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

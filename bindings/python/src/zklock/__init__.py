"""zklock: distributed locks on Apache ZooKeeper, through the zklock C library bundled with
this package (a ctypes binding of ``zklock.h``).

    import zklock
    with zklock.Client("127.0.0.1:2181") as client:
        lock = client.mutex("/locks/orders")
        with lock.hold(timeout=5.0):                 # zklock.Timeout if not acquired in 5 s
            print("holding, fencing token", lock.fencing_token)

Timeouts are seconds: ``None`` waits forever, ``0`` tries once. Every failure raises a
subclass of :class:`ZklError`. Blocking calls release the GIL. A lock handle is one participant:
any thread may release what another thread acquired through it (use it from one thread at a
time, except :meth:`Lock.cancel` and :meth:`Lock.close`, which any thread may call: close
cancels a waiting acquire and waits for calls under way before it frees the handle).

The library logs to the ``logging`` logger ``"zklock"`` from the package's own thread
``zklock-log``, never from the library's I/O threads: a slow handler delays only the log
lines. The package stops the library's logging at exit (atexit), before the interpreter
finalizes.
"""

from __future__ import annotations

import atexit
import ctypes
import glob
import logging
import os
import sys
import threading
from ctypes import (
    CFUNCTYPE,
    POINTER,
    c_char_p,
    c_int,
    c_int64,
    c_size_t,
    c_uint32,
    c_void_p,
)
from typing import Iterable, Optional, Tuple, Type

__all__ = [
    "Client",
    "Lock",
    "ZklError",
    "Timeout",
    "InvalidArgument",
    "NotHeld",
    "ConnectionLoss",
    "SessionExpired",
    "ZooKeeperError",
    "InternalError",
    "Cancelled",
    "multi_lock",
    "version",
    "status_name",
    "PROTOCOL_CURATOR",
    "PROTOCOL_KAZOO",
    "ACL_OPEN",
    "ACL_CREATOR_ALL",
    "ACL_CREATOR_ALL_READ_ALL",
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

# zkl_acl
ACL_OPEN = 0
ACL_CREATOR_ALL = 1
ACL_CREATOR_ALL_READ_ALL = 2

# zkl_hold_state
_HOLD_STATES = ("none", "held", "uncertain", "lost")

# zkl_log_level (1 = error ... 5 = trace) -> logging levels
_LOG_LEVELS = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG, 5: 5}


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
_LOG_CALLBACK = CFUNCTYPE(None, c_uint32, c_char_p, c_char_p, c_void_p)

# Every function of zklock.h this package calls: (restype, argtypes). tests/test_header.py
# checks this table against the header, so the two cannot drift apart.
_SIGNATURES = {
    "zkl_client_connect": (_status, [c_char_p, c_uint32, POINTER(_client_p)]),
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
    "zkl_multi_lock_new": (_status, [POINTER(_lock_p), c_size_t, POINTER(_lock_p)]),
    "zkl_lock_acquire": (_status, [_lock_p, c_int64]),
    "zkl_lock_release": (_status, [_lock_p]),
    "zkl_lock_cancel": (_status, [_lock_p]),
    "zkl_lock_is_held": (c_int, [_lock_p]),
    "zkl_lock_hold_state": (_status, [_lock_p, POINTER(c_uint32)]),
    "zkl_lock_lease_remaining_ms": (_status, [_lock_p, POINTER(c_int64)]),
    "zkl_lock_fencing_token": (_status, [_lock_p, POINTER(c_int64)]),
    "zkl_lock_free": (None, [_lock_p]),
    "zkl_set_log_callback": (_status, [_LOG_CALLBACK, c_uint32, c_void_p]),
    "zkl_log_start": (_status, [c_uint32]),
    "zkl_log_next": (_status, [c_int64, POINTER(c_uint32), POINTER(c_char_p), POINTER(c_char_p)]),
    "zkl_log_stop": (_status, []),
    "zkl_last_error_message": (c_char_p, []),
    "zkl_status_name": (c_char_p, [c_uint32]),
    "zkl_version": (c_char_p, []),
}

for _name, (_restype, _argtypes) in _SIGNATURES.items():
    _fn = getattr(_lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes


def version() -> str:
    """The library's version, e.g. ``"0.2.0"``."""
    return _lib.zkl_version().decode()


def status_name(status: int) -> str:
    """The name of a status value, e.g. ``"ZKL_TIMEOUT"`` (``"ZKL_UNKNOWN_STATUS"`` otherwise)."""
    return _lib.zkl_status_name(status & 0xFFFFFFFF).decode()


class ZklError(Exception):
    """A call returned a status other than ZKL_OK: ``status`` is the number, ``message`` the
    library's words. Each status has its own subclass."""

    status = -1

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message

    @property
    def name(self) -> str:
        return status_name(self.status)

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.message)


class Timeout(ZklError):
    """Not acquired before the timeout (timeout 0: the lock was busy)."""

    status = TIMEOUT


class InvalidArgument(ZklError, ValueError):
    """A malformed path or host list, a bad value, or a misuse (acquiring again a non-reentrant
    lock, a read -> write upgrade)."""

    status = INVALID_ARGUMENT


class NotHeld(ZklError):
    """Release (or fencing token) of a lock this handle does not hold."""

    status = NOT_HELD


class ConnectionLoss(ZklError, ConnectionError):
    """ZooKeeper not reachable in time; nothing of the call is left on the server."""

    status = CONNECTION_LOSS


class SessionExpired(ZklError):
    """The session ended: every lock it held is lost."""

    status = SESSION_EXPIRED


class ZooKeeperError(ZklError):
    """Any other error the server returned (no auth, ACL, ...)."""

    status = ZOOKEEPER_ERROR


class InternalError(ZklError):
    """A bug caught at the library's boundary; the handle is unusable."""

    status = INTERNAL_ERROR


class Cancelled(ZklError):
    """A waiting acquire was cancelled with :meth:`Lock.cancel`."""

    status = CANCELLED


_ERRORS = {c.status: c for c in (Timeout, InvalidArgument, NotHeld, ConnectionLoss,
                                 SessionExpired, ZooKeeperError, InternalError, Cancelled)}


def _error(status: int) -> ZklError:
    message = _lib.zkl_last_error_message().decode("utf-8", "replace")
    cls: Type[ZklError] = _ERRORS.get(status, ZklError)
    return cls(message, status)


def _check(status: int) -> None:
    if status != OK:
        raise _error(status)


def _text(s, what: str) -> bytes:
    if isinstance(s, bytes):
        return s
    if not isinstance(s, str):
        raise TypeError("%s must be str or bytes, not %s" % (what, type(s).__name__))
    return s.encode("utf-8")


def _millis(timeout: Optional[float]) -> int:
    """None -> -1 (forever); seconds -> whole milliseconds, rounded up; <= 0 -> try once."""
    if timeout is None:
        return -1
    if timeout <= 0:
        return 0
    return min(max(1, int(timeout * 1000 + 0.999)), 2**63 - 1)


# ---------------------------------------------------------------------------------- logging

_logger = logging.getLogger("zklock")


def _drain_log() -> None:
    """The ``zklock-log`` thread: takes the library's log lines (zkl_log_next, which waits
    without the GIL) and hands them to ``logging``. Python code never runs on the library's
    own threads, so a slow handler (or a garbage collection it triggers) holds up only this
    thread, never ZooKeeper I/O; lines wait in the library meanwhile (1024 at most, then
    dropped and counted)."""
    level, target, message = c_uint32(), c_char_p(), c_char_p()
    while _lib.zkl_log_next(-1, ctypes.byref(level), ctypes.byref(target),
                            ctypes.byref(message)) == OK:
        try:
            _logger.log(_LOG_LEVELS.get(level.value, logging.INFO), "%s: %s",
                        target.value.decode("utf-8", "replace"),
                        message.value.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a failing handler must not end the drain
            pass


def _stop_log() -> None:
    """At exit, before the interpreter finalizes: the library stops logging and the drain
    ends, so no log line reaches Python code while the interpreter shuts down."""
    _lib.zkl_log_stop()
    thread = _log_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join(1.0)  # a handler still busy past that is left to finish (a daemon thread)


# Lines of INFO and above (lock acquired, released, lost; session changes; background
# deletes) reach `logging`, whose own level then filters (logging.getLogger("zklock")
# .setLevel(...)). Another copy of the library's log delivery in this process (a second
# binding) keeps the lines: then this package logs nothing.
_log_thread: Optional[threading.Thread] = None
if _lib.zkl_log_start(3) == OK:
    _log_thread = threading.Thread(target=_drain_log, name="zklock-log", daemon=True)
    _log_thread.start()
    atexit.register(_stop_log)


# ---------------------------------------------------------------------------------- handles

class _Managed:
    """A handle that frees itself: close() is idempotent and also runs on garbage collection.

    Every call into the library on the handle is counted while it runs. close() refuses new
    calls (ValueError), makes those under way return (a lock's waiting acquire is cancelled),
    waits for them, and only then frees the handle: closing from another thread never frees
    it under a running call."""

    _free = None
    _ptr: Optional[int] = None  # also when __init__ failed before setting it
    _mu: Optional[threading.Condition] = None

    def __init__(self, ptr: int):
        self._mu = threading.Condition(threading.Lock())
        self._calls = 0
        self._ptr = ptr

    def _closed(self) -> ValueError:
        return ValueError("%s is closed" % type(self).__name__)

    def _call(self, fn, *args):
        """``fn(handle, *args)``; the handle stays valid until it returns."""
        mu = self._mu
        if mu is None:
            raise self._closed()
        with mu:
            ptr = self._ptr
            if ptr is None:
                raise self._closed()
            self._calls += 1
        try:
            return fn(ptr, *args)
        finally:
            with mu:
                self._calls -= 1
                if not self._calls:
                    mu.notify_all()

    def _interrupt(self, ptr: int) -> None:
        """Makes calls under way on ``ptr`` return soon (close() is waiting for them)."""

    def close(self) -> None:
        """Frees the handle. Calls under way in other threads are made to return first (a
        waiting :meth:`Lock.acquire` raises :class:`Cancelled`) and waited for; later calls
        raise ValueError."""
        mu = self._mu
        if mu is None:
            return
        with mu:
            ptr, self._ptr = self._ptr, None
            if ptr is None:
                return
            busy = self._calls
        while busy:
            # Again until they are done: a call that was about to start waiting when the
            # first interruption came would not see it.
            self._interrupt(ptr)
            if sys.is_finalizing():
                # The interpreter is shutting down: it ends the threads of those calls when
                # they come back, so they may never say they are done. Freeing under them
                # is not an option and waiting may never end: the handle is left to the
                # process's exit.
                return
            with mu:
                if self._calls:
                    mu.wait(0.05)
                busy = self._calls
        type(self)._free(ptr)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


class Lock(_Managed):
    """One participant in one lock recipe. ``with lock:`` holds it for the block (waiting as
    long as it takes); ``with lock.hold(timeout=2.0):`` raises :class:`Timeout` instead.

    The handle is the participant: any thread may release what another thread acquired
    through it (thread pools and ``asyncio.to_thread`` move calls between threads). Use from
    one thread at a time, except :meth:`cancel`, which any thread may call.
    """

    _free = staticmethod(_lib.zkl_lock_free)

    def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits for the lock: forever (None), at most ``timeout`` seconds, or tries once (0).
        True when held, False when not acquired in time; raises :class:`ZklError` otherwise
        (:class:`Cancelled` if :meth:`cancel` or :meth:`close` interrupted it)."""
        return self._acquire(_millis(timeout))

    def _acquire(self, millis: int, timeout_raises: bool = False) -> bool:
        status = self._call(_lib.zkl_lock_acquire, millis)
        if status == TIMEOUT and not timeout_raises:
            return False
        if status == CANCELLED and self._ptr is None:
            raise Cancelled("cancelled: the lock was closed during the acquire", CANCELLED)
        _check(status)
        return True

    def release(self) -> None:
        """Releases one hold (:class:`NotHeld` if none)."""
        _check(self._call(_lib.zkl_lock_release))

    def cancel(self) -> None:
        """Makes acquires waiting on this lock (in other threads) raise :class:`Cancelled`."""
        _check(self._call(_lib.zkl_lock_cancel))

    def _interrupt(self, ptr: int) -> None:
        _lib.zkl_lock_cancel(ptr)

    @property
    def is_held(self) -> bool:
        """Held, and the session provably alive."""
        try:
            return self._call(_lib.zkl_lock_is_held) == 1
        except ValueError:  # closed
            return False

    @property
    def hold_state(self) -> str:
        """``"none"``, ``"held"``, ``"uncertain"`` (cut off long enough that the server may
        have freed it: stop acting) or ``"lost"``."""
        state = c_uint32()
        _check(self._call(_lib.zkl_lock_hold_state, ctypes.byref(state)))
        return _HOLD_STATES[state.value]

    @property
    def lease_remaining(self) -> float:
        """Seconds the hold stays provably valid if the server went silent now."""
        ms = c_int64()
        _check(self._call(_lib.zkl_lock_lease_remaining_ms, ctypes.byref(ms)))
        return ms.value / 1000.0

    @property
    def fencing_token(self) -> int:
        """The current hold's fencing token, strictly increasing from one holder to the next
        (:class:`NotHeld` if not held)."""
        token = c_int64()
        _check(self._call(_lib.zkl_lock_fencing_token, ctypes.byref(token)))
        return token.value

    def hold(self, timeout: Optional[float] = None) -> "_Hold":
        """A context manager that holds the lock for its block, raising :class:`Timeout` if
        it is not acquired within ``timeout`` seconds: ``with lock.hold(2.0): ...``."""
        return _Hold(self, timeout)

    def __enter__(self) -> "Lock":
        self._acquire(-1, timeout_raises=True)
        return self

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


class _Hold:
    def __init__(self, lock: Lock, timeout: Optional[float]):
        self._lock, self._timeout = lock, timeout

    def __enter__(self) -> Lock:
        self._lock._acquire(_millis(self._timeout), timeout_raises=True)
        return self._lock

    def __exit__(self, *exc) -> bool:
        self._lock.release()
        return False


def multi_lock(locks: Iterable[Lock]) -> Lock:
    """All or nothing over ``locks`` (of any kinds except multi-locks). Takes them over on
    success (they must not be used any more: they are closed); on error they are unchanged.
    A lock in use by another thread at the time is refused (ValueError)."""
    locks = list(locks)
    taken = []  # (lock, handle): no call starts on a lock while it is being handed over
    try:
        for lk in locks:
            if any(lk is t for t, _ in taken):
                raise InvalidArgument("the same lock is given twice", INVALID_ARGUMENT)
            with lk._mu or threading.Lock():
                if lk._ptr is None:
                    raise lk._closed()
                if lk._calls:
                    raise ValueError("a lock given to multi_lock is in use by another thread")
                taken.append((lk, lk._ptr))
                lk._ptr = None
        array = (_lock_p * len(taken))(*[ptr for _, ptr in taken])
        out = _lock_p()
        _check(_lib.zkl_multi_lock_new(array, len(taken), ctypes.byref(out)))
    except BaseException:
        for lk, ptr in taken:
            with lk._mu:
                lk._ptr = ptr
        raise
    return Lock(out.value)


class Client(_Managed):
    """One ZooKeeper session; any number of threads may use it. ``with Client(...) as c:``
    closes it at the end (locks made from it keep the session open until they are closed)."""

    _free = staticmethod(_lib.zkl_client_free)

    def __init__(self, hosts: str, session_timeout: float = 10.0):
        """Connects to ``hosts`` (``"host:port[,host:port...][/chroot]"``), waiting up to
        ``session_timeout`` seconds (:class:`ConnectionLoss` then)."""
        ptr = _client_p()
        _check(_lib.zkl_client_connect(_text(hosts, "hosts"), _millis(session_timeout),
                                       ctypes.byref(ptr)))
        super().__init__(ptr.value)

    def set_protocol(self, protocol: int) -> None:
        """:data:`PROTOCOL_CURATOR` or :data:`PROTOCOL_KAZOO`, for locks made after the call."""
        _check(self._call(_lib.zkl_client_set_protocol, protocol))

    def add_auth(self, scheme: str, auth: str) -> None:
        """Adds authentication, e.g. ``("digest", "user:password")``."""
        _check(self._call(_lib.zkl_client_add_auth, _text(scheme, "scheme"), _text(auth, "auth")))

    def set_acl(self, acl: int) -> None:
        """The ACL of nodes created after the call: :data:`ACL_OPEN`, :data:`ACL_CREATOR_ALL`
        or :data:`ACL_CREATOR_ALL_READ_ALL` (the last two need :meth:`add_auth` first)."""
        _check(self._call(_lib.zkl_client_set_acl, acl))

    def _make(self, fn, path: str, *extra) -> Lock:
        out = _lock_p()
        _check(self._call(fn, _text(path, "path"), *extra, ctypes.byref(out)))
        return Lock(out.value)

    def mutex(self, path: str) -> Lock:
        """A fair, reentrant exclusive lock (Curator's InterProcessMutex)."""
        return self._make(_lib.zkl_mutex_new, path)

    def semaphore_mutex(self, path: str) -> Lock:
        """A fair exclusive lock that is not reentrant."""
        return self._make(_lib.zkl_semaphore_mutex_new, path)

    def read_lock(self, path: str) -> Lock:
        """The shared half of the read-write lock at ``path``."""
        return self._make(_lib.zkl_read_lock_new, path)

    def write_lock(self, path: str) -> Lock:
        """The exclusive half of the read-write lock at ``path``."""
        return self._make(_lib.zkl_write_lock_new, path)

    def rwlock(self, path: str) -> Tuple[Lock, Lock]:
        """Both halves of one read-write lock, one participant: ``(read, write)``. While the
        write half is held the read half may be taken (downgrade); the reverse fails at once."""
        read, write = _lock_p(), _lock_p()
        _check(self._call(_lib.zkl_rwlock_new, _text(path, "path"), ctypes.byref(read),
                          ctypes.byref(write)))
        return Lock(read.value), Lock(write.value)

    def semaphore(self, path: str, max_leases: int) -> Lock:
        """A semaphore of ``max_leases`` leases; each acquire takes one, each release returns
        the most recent."""
        return self._make(_lib.zkl_semaphore_new, path, max_leases)

    def simple_lock(self, path: str) -> Lock:
        """One ephemeral node at ``path`` itself: cheapest, not fair, not reentrant."""
        return self._make(_lib.zkl_simple_lock_new, path)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

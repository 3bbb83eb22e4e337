"""zklock: distributed locks on Apache ZooKeeper, through the zklock C library bundled with
this package (a ctypes binding of ``zklock.h``).

    import zklock
    with zklock.Client("127.0.0.1:2181") as client:
        lock = client.mutex("/locks/orders")
        with lock.hold(timeout=5.0):                 # zklock.Timeout if not acquired in 5 s
            print("holding, fencing token", lock.fencing_token)

Timeouts are seconds: ``None`` waits forever, ``0`` tries once. Every failure raises a
subclass of :class:`ZklError`. Blocking calls release the GIL, and a blocking acquire on the
main thread is interruptible: Ctrl-C raises ``KeyboardInterrupt`` at once, the wait is
cancelled and a hold that arrived meanwhile is released. From asyncio, use
:meth:`Lock.acquire_async` / :meth:`Lock.hold_async`: their C calls run on the package's own
threads (never the loop's thread or its executor), and a cancelled task ends only once its
acquire has ended and given back what it got: no hold or node is left behind and the next
acquire may start at once. A lock handle is one participant: any thread may release what
another thread acquired through it (use it from one thread at a time, except
:meth:`Lock.cancel`, :meth:`Lock.reset_cancel` and :meth:`Lock.close`, which any thread may
call: close cancels a waiting acquire and waits for calls under way before it frees the
handle). A cancel is sticky: made with no acquire under way, it ends the next one at once.

The library logs to ``logging`` under ``"zklock"`` (child loggers per module, e.g.
``"zklock.recipes.hold"``) from the package's own thread ``zklock-log``, never from the
library's I/O threads: a slow handler delays only the log lines. INFO is what an operator acts
on (losses, background deletes, session changes); each acquire and release is DEBUG, which
:func:`set_log_level` turns on. The package stops the library's logging at exit (atexit),
before the interpreter finalizes.

Make clients after ``fork()``. A client belongs to the process that connected it: in a child
forked after it was made (``os.fork``, ``multiprocessing`` with the fork start method, a
pre-fork server's workers), the client and its locks are inert. Every call on them raises
:class:`Closed` (the message says fork), nothing is sent on the parent's session, and closing
them or letting them be collected releases nothing of the parent's, so the child exits at once.
A child of a process that had already made a client cannot make one (:class:`Closed`): the
library's I/O does not survive fork. So connect in each worker after the fork, and not in the
process that forks them.

The distribution is ``pyzklock`` on the package index (``zklock`` there is an unrelated
project); the import name is ``zklock``.
"""

from __future__ import annotations

import asyncio
import collections.abc
import contextlib
import ctypes
import enum
import os
import threading
import weakref
from ctypes import c_char_p, c_int64, c_size_t, c_uint32
from typing import Callable, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from ._args import _member, _millis, _millis_u32, _text, _u32
from ._errors import (
    _ERRORS,
    AuthFailed,
    Cancelled,
    Closed,
    ConnectionLoss,
    InternalError,
    InvalidArgument,
    LockLost,
    NotHeld,
    SessionExpired,
    Timeout,
    WouldDeadlock,
    ZklError,
    ZooKeeperError,
    _check,
    _error,
    status_name,
)
from ._ffi import (
    AUTH_FAILED,
    CANCELLED,
    CLOSED,
    CONNECTION_LOSS,
    INTERNAL_ERROR,
    INVALID_ARGUMENT,
    LOCK_LOST,
    NOT_HELD,
    OK,
    SESSION_EXPIRED,
    TIMEOUT,
    WOULD_DEADLOCK,
    ZOOKEEPER_ERROR,
    _LOG_CALLBACK,
    _SIGNATURES,
    _c,
    _client_p,
    _lib,
    _lock_p,
    _options_p,
    _Participant,
    _participants_p,
    _Percentiles,
    _plain,
    _SessionEvent,
    _Stats,
    _status,
    _Status,
    version,
)
from ._log import _logger, set_log_level
from ._managed import _exiting, _Managed, _start_watcher

__all__ = [
    "Client",
    "Lock",
    "Participant",
    "Stats",
    "Percentiles",
    "Protocol",
    "Acl",
    "HoldState",
    "SessionState",
    "ZklError",
    "Timeout",
    "InvalidArgument",
    "NotHeld",
    "ConnectionLoss",
    "SessionExpired",
    "ZooKeeperError",
    "InternalError",
    "Cancelled",
    "LockLost",
    "Closed",
    "WouldDeadlock",
    "AuthFailed",
    "multi_lock",
    "version",
    "status_name",
    "set_log_level",
    "__version__",
    "PROTOCOL_CURATOR",
    "PROTOCOL_KAZOO",
    "ACL_OPEN",
    "ACL_CREATOR_ALL",
    "ACL_CREATOR_ALL_READ_ALL",
]


class Protocol(enum.IntEnum):
    """How lock nodes are named (zkl_protocol), so that other clients can share a lock path.
    ``KAZOO`` shares kazoo's node *layout*, not its API semantics: zklock's locks are reentrant
    per handle, kazoo's are not."""

    CURATOR = 0
    KAZOO = 1


class Acl(enum.IntEnum):
    """The ACL of the lock nodes and parents a client creates (zkl_acl)."""

    OPEN = 0
    CREATOR_ALL = 1
    CREATOR_ALL_READ_ALL = 2


class HoldState(enum.IntEnum):
    """What a lock handle may believe about its hold (zkl_hold_state). Compares equal to its
    lower-case name too (``lock.hold_state == "held"``), as 0.2 returned strings."""

    NONE = 0
    HELD = 1
    UNCERTAIN = 2
    LOST = 3

    def __eq__(self, other):
        if isinstance(other, str):
            return self.name.lower() == other
        return int.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    __hash__ = int.__hash__

    def __str__(self) -> str:
        return self.name.lower()


class SessionState(enum.IntEnum):
    """The state of a client's session (zkl_session_state). Compares equal to the C value;
    prints as its name (``SessionState.SUSPENDED``), not as the number an IntEnum prints
    since Python 3.11."""

    CONNECTED = 0
    SUSPENDED = 1
    EXPIRED = 2
    CLOSED = 3

    def __str__(self) -> str:
        return "%s.%s" % (type(self).__name__, self.name)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


# The 0.2 names.
PROTOCOL_CURATOR = Protocol.CURATOR
PROTOCOL_KAZOO = Protocol.KAZOO
ACL_OPEN = Acl.OPEN
ACL_CREATOR_ALL = Acl.CREATOR_ALL
ACL_CREATOR_ALL_READ_ALL = Acl.CREATOR_ALL_READ_ALL


__version__ = version()


class Participant(NamedTuple):
    """One participant of a lock (:meth:`Lock.participants`): holders first."""

    node: str
    holder_id: str
    sequence: int
    is_holder: bool
    is_reader: bool
    created_ms: int  # when its node was created (server clock, ms since the epoch)


class Percentiles(NamedTuple):
    """A distribution of durations, in seconds: percentiles over the last 1024, max over all."""

    count: int
    p50: float
    p90: float
    p99: float
    max: float


class Stats(NamedTuple):
    """A lock handle's statistics (:meth:`Lock.stats`)."""

    acquisitions: int
    timeouts: int
    cancels: int
    failures: int
    releases: int
    losses: int
    wait: Percentiles
    hold: Percentiles


def _percentiles(p: _Percentiles) -> Percentiles:
    return Percentiles(p.count, p.p50_us / 1e6, p.p90_us / 1e6, p.p99_us / 1e6, p.max_us / 1e6)


class _Attempt:
    """One C acquire of ``lock`` on a thread of the package's own, which another thread (the
    main thread on Ctrl-C, an event loop on a task's cancellation) may give up at any moment:
    before it begins (it then never begins), while it waits (zkl_lock_cancel ends it), or as it
    returns. The thread owns the outcome unless the acquire was over before it was given up;
    what it owns and got (a hold) it gives back. A cancel of its own that came after the C
    acquire had returned is forgotten (zkl_lock_reset_cancel), so it never ends the handle's
    next acquire. ``on_done(attempt)`` runs on the thread once :attr:`done` is set."""

    def __init__(self, lock: "Lock", millis: int,
                 on_done: Optional[Callable[["_Attempt"], None]] = None):
        self._lock, self._millis, self._on_done = lock, millis, on_done
        self._mu = threading.Lock()
        self._begun = False      # the C acquire may be under way
        self._over = False       # its outcome is known (or it never began)
        self._given_up = False
        self._cancel_sent = False
        self._given_back = False
        self._status: Optional[int] = None
        self._error: Optional[BaseException] = None
        self.done = threading.Event()
        threading.Thread(target=self._run, name="zklock-acquire", daemon=True).start()

    def _run(self) -> None:
        try:
            with self._mu:
                if self._given_up:
                    self._status = _Status(CANCELLED, "cancelled before the acquire began")
                    self._over = True
                    return
                self._begun = True
            # A cancel from here on ends this acquire: one sent before the library sees it
            # begin is remembered by the library for it (a cancel is sticky).
            status, error = None, None
            try:
                status = self._lock._call(_lib.zkl_lock_acquire, self._millis)
            except BaseException as e:  # noqa: BLE001 - handed to whoever wants the outcome
                error = e
            with self._mu:
                self._status, self._error, self._over = status, error, True
                unwanted, cancel_sent = self._given_up, self._cancel_sent
            if cancel_sent:
                with contextlib.suppress(ValueError):
                    self._lock.reset_cancel()
            if unwanted:
                self.give_back()
        finally:
            self.done.set()
            if self._on_done is not None:
                self._on_done(self)

    def give_up(self) -> bool:
        """The outcome is no longer wanted: the acquire is cancelled (or never begins), and its
        thread gives back what it gets; False then. True if the acquire was over before: the
        outcome is the caller's, who gives it back (:meth:`give_back`) once :attr:`done` is
        set. Calling it again answers the same."""
        with self._mu:
            if self._over:
                return not self._given_up
            self._given_up = True
            if self._begun:
                # Under the mutex, so that the thread knows, once the acquire has returned,
                # whether a cancel of its own may be left over.
                self._cancel_sent = True
                with contextlib.suppress(ValueError):
                    self._lock._call(_lib.zkl_lock_cancel)
            return False

    def give_back(self) -> None:
        """Releases the hold the acquire got, if it got one (errors of the release, say a hold
        lost meanwhile, are dropped: nobody wants this hold)."""
        if self._status == OK and not self._given_back:
            self._given_back = True
            with contextlib.suppress(ZklError, ValueError):
                self._lock.release()

    def outcome(self) -> int:
        """The C acquire's status (after :attr:`done`); raises what its call raised."""
        if self._error is not None:
            raise self._error
        return self._status


def _through_interrupts(fn):
    """``fn()`` to its end on the main thread: a signal handler's exception meanwhile (a second
    Ctrl-C) makes it run again (``fn`` may run twice)."""
    while True:
        try:
            return fn()
        except BaseException:  # noqa: BLE001 - the first interruption is the one raised
            continue


def _deliver(loop, fut, unclaimed, value) -> None:
    """From another thread: ``fut`` (of ``loop``) gets ``value``. If the loop is closed, nobody
    awaits it any more: ``unclaimed()`` disposes of what it would have carried."""

    def settle():
        if not fut.done():
            if isinstance(value, BaseException):
                fut.set_exception(value)
            else:
                fut.set_result(value)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed
        if unclaimed is not None:
            unclaimed()


async def _through_cancels(fut) -> None:
    """Waits for ``fut`` to end, whatever cancellations of the awaiting task come meanwhile (the
    caller raises CancelledError after it)."""
    while not fut.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(fut)


async def _off_loop(fn):
    """``fn()`` on a thread of the package's own, awaited: the loop's thread never blocks on it
    and the loop's executor is not used. A cancellation of the awaiting task meanwhile is
    raised once ``fn`` has returned (it is never abandoned half done)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def run():
        try:
            value = fn()
        except BaseException as e:  # noqa: BLE001 - raised in the awaiting task
            value = e
        _deliver(loop, fut, None, _Returned(value))

    threading.Thread(target=run, name="zklock-off-loop", daemon=True).start()
    try:
        returned = await asyncio.shield(fut)
    except asyncio.CancelledError:
        await _through_cancels(fut)
        raise
    if isinstance(returned.value, BaseException):
        raise returned.value
    return returned.value


class _Returned(NamedTuple):
    """What a call returned or raised, carried as a value."""

    value: object


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class Lock(_Managed):
    """One participant in one lock recipe. ``with lock:`` holds it for the block (waiting as
    long as it takes); ``with lock.hold(timeout=2.0):`` raises :class:`Timeout` instead;
    ``async with lock.hold_async(timeout=2.0):`` from asyncio.

    The handle is the participant: any thread may release what another thread acquired
    through it (thread pools and ``asyncio.to_thread`` move calls between threads). Use from
    one thread at a time, except :meth:`cancel` and :meth:`reset_cancel`, which any thread may
    call. Reentrant per handle where the recipe is (the mutex, the read-write halves), unlike
    kazoo's locks.
    """

    _free = staticmethod(_lib.zkl_lock_free)

    def __init__(self, ptr: int, kind: str = "lock", path: str = "",
                 client: Optional["Client"] = None):
        super().__init__(ptr)
        self._kind, self._path, self._client = kind, path, client
        self._parts: List[str] = []  # a multi-lock's locks' paths, in the order given

    def __repr__(self) -> str:
        try:
            state = str(self.hold_state)
        except (ValueError, ZklError):
            state = "closed"
        return "<zklock.Lock %s %r %s>" % (self._kind, self._path, state)

    @property
    def path(self) -> str:
        """The lock path."""
        return self._path

    @property
    def identifier(self) -> str:
        """The holder id stored in this lock's nodes (the client's, as kazoo's
        ``identifier``): what :meth:`participants` shows for this handle."""
        if self._client is None:
            raise ValueError("a multi-lock has no single identifier")
        return self._client.holder_id

    def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits for the lock: forever (None or a negative number, as C's -1), at most
        ``timeout`` seconds, or tries once (0).
        True when held, False when not acquired in time; raises :class:`ZklError` otherwise
        (:class:`Cancelled` if :meth:`cancel` ended it, made during the acquire or before it
        began, or if :meth:`close` interrupted it). On the main
        thread, Ctrl-C (any signal whose handler raises) ends the wait at once: the acquire
        is cancelled, a hold that arrived meanwhile is released, and the exception goes on."""
        return self._acquire(_millis(timeout))

    def _acquire(self, millis: int, timeout_raises: bool = False) -> bool:
        if millis != 0 and _on_main_thread():
            status = self._acquire_interruptibly(millis)
        else:
            status = self._call(_lib.zkl_lock_acquire, millis)
        return self._outcome(status, timeout_raises)

    def _outcome(self, status: int, timeout_raises: bool) -> bool:
        if status == TIMEOUT and not timeout_raises:
            return False
        if status == CANCELLED and self._ptr is None:
            raise Cancelled("cancelled: the lock was closed during the acquire", CANCELLED)
        _check(status)
        return True

    def _acquire_interruptibly(self, millis: int) -> int:
        """The C acquire on a thread of the package's (an :class:`_Attempt`) while this (main)
        thread waits on a Python primitive, which a signal handler can interrupt: then the
        acquire is given up and waited for, and a hold it got anyway is released before the
        exception goes on."""
        attempt = _Attempt(self, millis)
        try:
            attempt.done.wait()
        except BaseException:
            mine = _through_interrupts(attempt.give_up)
            while not attempt.done.is_set():
                with contextlib.suppress(BaseException):
                    attempt.done.wait(0.05)
            if mine:
                attempt.give_back()
            raise
        return attempt.outcome()

    async def acquire_async(self, timeout: Optional[float] = None) -> bool:
        """:meth:`acquire` for asyncio: the C acquire runs on a thread of the package's own (never
        the loop's executor, which waits would starve), and the loop's thread never blocks.
        Cancellation (``task.cancel()``, ``asyncio.wait_for``, ``asyncio.timeout``) gives the
        acquire up, even one that has not begun yet, and ends only once the C acquire has
        ended and given back what it got: then no node of it is left and the next acquire on
        the handle may start at once. A cancelled acquire never leaves the lock held."""
        millis = _millis(timeout)
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        attempt = _Attempt(self, millis, lambda a: _deliver(loop, fut, a.give_back, None))
        try:
            await asyncio.shield(fut)
        except asyncio.CancelledError:
            mine = attempt.give_up()
            await _through_cancels(fut)
            if mine:
                await _off_loop(attempt.give_back)
            raise
        return self._outcome(attempt.outcome(), False)

    def hold_async(self, timeout: Optional[float] = None) -> "_AsyncHold":
        """``async with lock.hold_async(timeout=2.0):`` holds the lock for the block
        (:class:`Timeout` if not acquired in time; cancellation-safe as :meth:`acquire_async`)."""
        return _AsyncHold(self, timeout)

    def release(self) -> None:
        """Releases one hold (:class:`NotHeld` if none; :class:`LockLost` if it had been
        lost)."""
        _check(self._call(_lib.zkl_lock_release))

    def cancel(self) -> None:
        """Ends the acquire under way on this lock (in another thread): it raises
        :class:`Cancelled`. If none is under way, the lock remembers the cancel and its next
        acquire raises :class:`Cancelled` at once, forgetting it (as kazoo's ``cancel()``
        before ``acquire()``): a cancel that lands just before an acquire begins is not lost.
        One cancel ends one acquire; several with none between are one. Any thread, any time.
        """
        _check(self._call(_lib.zkl_lock_cancel))

    def reset_cancel(self) -> bool:
        """Forgets a cancel remembered for the next acquire (:meth:`cancel` with no acquire
        under way), say one that came just after the acquire it was meant for had returned.
        True if there was one. Any thread, any time."""
        return self._call_raw(_plain, _lib.zkl_lock_reset_cancel) == 1

    def _interrupt(self, ptr: int) -> None:
        _lib.zkl_lock_cancel(ptr)

    @property
    def is_held(self) -> bool:
        """Held, and the session provably alive."""
        try:
            return self._call_raw(_plain, _lib.zkl_lock_is_held) == 1
        except ValueError:  # closed
            return False

    @property
    def hold_state(self) -> HoldState:
        """:class:`HoldState`: ``NONE``, ``HELD``, ``UNCERTAIN`` (cut off long enough that the
        server may have freed it: stop acting) or ``LOST``."""
        state = c_uint32()
        _check(self._call(_lib.zkl_lock_hold_state, ctypes.byref(state)))
        return HoldState(state.value)

    @property
    def lease_remaining(self) -> float:
        """Seconds the hold stays provably valid if the server went silent now."""
        ms = c_int64()
        _check(self._call(_lib.zkl_lock_lease_remaining_ms, ctypes.byref(ms)))
        return ms.value / 1000.0

    @property
    def fencing_token(self) -> int:
        """The current hold's fencing token, strictly increasing from one holder to the next
        (:class:`NotHeld` if not held). A multi-lock's is the largest of its locks' tokens: it
        fences only what holders of that whole set write (a holder of one of the locks alone may
        get a smaller one); fence a resource that one lock guards with :attr:`tokens` or
        :meth:`token`."""
        token = c_int64()
        _check(self._call(_lib.zkl_lock_fencing_token, ctypes.byref(token)))
        return token.value

    @property
    def tokens(self) -> List[int]:
        """A multi-lock's: each lock's own fencing token in the current hold, in the order the
        locks were given to :func:`multi_lock` (:class:`NotHeld` if not held;
        :class:`InvalidArgument` for a lock that is not a multi-lock)."""
        out = []
        for i in range(max(len(self._parts), 1)):
            token = c_int64()
            _check(self._call(_lib.zkl_multi_lock_token_at, i, ctypes.byref(token)))
            out.append(token.value)
        return out

    def token(self, path: str) -> int:
        """A multi-lock's: the fencing token of its lock at ``path`` in the current hold."""
        token = c_int64()
        _check(self._call(_lib.zkl_multi_lock_token_of, _text(path, "path"),
                          ctypes.byref(token)))
        return token.value

    def participants(self) -> List[Participant]:
        """Who holds (first) and who waits, with their holder ids (kazoo's ``contenders()``,
        Curator's ``getParticipantNodes()``)."""
        ps = _participants_p()
        _check(self._call(_lib.zkl_lock_participants, ctypes.byref(ps)))
        try:
            out = []
            for i in range(_lib.zkl_participants_count(ps)):
                p, created = _Participant(), c_int64()
                _check(_c(_lib.zkl_participants_get, ps, i, ctypes.byref(p)))
                _check(_c(_lib.zkl_participants_created_ms, ps, i, ctypes.byref(created)))
                out.append(Participant(p.node.decode("utf-8", "replace"),
                                       p.holder_id.decode("utf-8", "replace"), p.sequence,
                                       bool(p.is_holder), bool(p.is_reader), created.value))
            return out
        finally:
            _lib.zkl_participants_free(ps)

    def lease_holders(self) -> List[str]:
        """The holder ids of the current holders (kazoo's ``Semaphore.lease_holders()``)."""
        return [p.holder_id for p in self.participants() if p.is_holder]

    def stats(self) -> Stats:
        """This handle's statistics: acquires by outcome, holds ended by release or loss, and
        wait and hold time percentiles (seconds)."""
        st = _Stats()
        _check(self._call(_lib.zkl_lock_stats, ctypes.byref(st)))
        return Stats(st.acquisitions, st.timeouts, st.cancels, st.failures, st.releases,
                     st.losses, _percentiles(st.wait), _percentiles(st.hold))

    def on_lost(self, callback: Callable[["Lock"], None]) -> threading.Thread:
        """Calls ``callback(lock)`` once, on a thread of this package's, when the current hold
        stops being believed (its lease ran out or its session ended: stop acting on it). The
        watch ends without a call when the hold is released or the lock closed. Returns the
        watching thread."""

        def watch():
            while not _exiting.is_set():
                try:
                    status = self._call(_lib.zkl_lock_wait_lost, 200)
                except ValueError:  # closed
                    return
                if status == TIMEOUT:
                    continue
                if status == OK:
                    try:
                        callback(self)
                    except Exception:  # noqa: BLE001 - reported, never raised into nothing
                        _logger.exception("an on_lost callback of %r failed", self)
                return

        return _start_watcher(watch, "zklock-on-lost")

    def make_revocable(self, callback: Optional[Callable[["Lock"], None]] = None) -> None:
        """Makes this handle's holds revocable (Curator's ``makeRevocable``): when someone asks
        the holder to let go (:meth:`revoke_holders`, ``zklock revoke``, Curator's
        ``Revoker``), :meth:`wait_revoke_request` returns True and ``callback(lock)`` is called
        on a thread of this package's (for each hold asked). Cooperative: nothing is released
        unless the holder does it."""
        _check(self._call(_lib.zkl_lock_make_revocable))
        if callback is None:
            return

        def watch():
            asked = None  # the fencing token of the hold last told
            while not _exiting.is_set():
                try:
                    status = self._call(_lib.zkl_lock_wait_revoke_request, 200)
                    token = c_int64()
                    held = self._call(_lib.zkl_lock_fencing_token, ctypes.byref(token)) == OK
                except ValueError:  # closed
                    return
                if status == OK and held and token.value != asked:
                    asked = token.value
                    try:
                        callback(self)
                    except Exception:  # noqa: BLE001
                        _logger.exception("a revocation callback of %r failed", self)
                elif status not in (OK, TIMEOUT, NOT_HELD):
                    return
                if status != TIMEOUT:
                    _exiting.wait(0.05)  # asked already, or nothing held: look again shortly

        _start_watcher(watch, "zklock-revoke")

    def wait_revoke_request(self, timeout: Optional[float] = None) -> bool:
        """After :meth:`make_revocable`: True when someone asked this holder to let go, False
        at the timeout (:class:`NotHeld` if nothing is held)."""
        status = self._call(_lib.zkl_lock_wait_revoke_request, _millis(timeout))
        if status == TIMEOUT:
            return False
        _check(status)
        return True

    def revoke_holders(self) -> int:
        """Asks every current holder to let go (only revocable holders hear it); returns how
        many were asked."""
        n = c_size_t()
        _check(self._call(_lib.zkl_lock_revoke_holders, ctypes.byref(n)))
        return n.value

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


class _AsyncHold:
    def __init__(self, lock: Lock, timeout: Optional[float]):
        self._lock, self._timeout = lock, timeout

    async def __aenter__(self) -> Lock:
        if not await self._lock.acquire_async(self._timeout):
            raise Timeout("not acquired within %s s" % self._timeout, TIMEOUT)
        return self._lock

    async def __aexit__(self, *exc) -> bool:
        # Off the loop's thread: during an outage a release may take a session timeout.
        await _off_loop(self._lock.release)
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
        _check(_c(_lib.zkl_multi_lock_new, array, len(taken), ctypes.byref(out)))
    except BaseException:
        for lk, ptr in taken:
            with lk._mu:
                lk._ptr = ptr
        raise
    multi = Lock(out.value, "multi_lock", ",".join(lk.path for lk in locks))
    multi._parts = [lk.path for lk in locks]
    return multi


# ---------------------------------------------------------------------------------- connect

def _file(value, what: str) -> bytes:
    """A file name (str, bytes or os.PathLike) for a C string argument."""
    try:
        value = os.fspath(value)
    except TypeError:
        raise TypeError("%s must be a file name (str, bytes or os.PathLike), not %s"
                        % (what, type(value).__name__)) from None
    if isinstance(value, bytes):
        value = os.fsdecode(value)
    return _text(value, what)


def _auth_data_setters(auth_data) -> list:
    """``[(scheme, credential), ...]`` -> zkl_options_add_auth calls."""
    if auth_data is None:
        return []
    if isinstance(auth_data, (str, bytes)):
        raise TypeError("auth_data must be a list of (scheme, credential) pairs, "
                        "e.g. [('digest', 'user:password')]")
    out = []
    for entry in auth_data:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise TypeError("auth_data must be a list of (scheme, credential) pairs, "
                            "e.g. [('digest', 'user:password')], not one holding %r" % (entry,))
        scheme, credential = entry
        out.append((_lib.zkl_options_add_auth, _text(scheme, "auth_data scheme"),
                    _text(credential, "auth_data credential")))
    return out


def _tls_setters(use_ssl, ca, certfile, keyfile, keyfile_password, verify_certs) -> list:
    """kazoo's TLS keywords -> zkl_options_* TLS calls (none when TLS is not asked for)."""
    if use_ssl is not None and not isinstance(use_ssl, bool):
        raise TypeError("use_ssl must be True or False, not %s" % type(use_ssl).__name__)
    if not isinstance(verify_certs, bool):
        raise TypeError("verify_certs must be True or False, not %s"
                        % type(verify_certs).__name__)
    given = [name for name, value in (("ca", ca), ("certfile", certfile), ("keyfile", keyfile),
                                      ("keyfile_password", keyfile_password))
             if value is not None]
    if use_ssl is False and (given or not verify_certs):
        raise InvalidArgument("use_ssl=False with %s: TLS settings need TLS (drop use_ssl=False,"
                              " or the TLS settings)"
                              % ", ".join(given + ([] if verify_certs else ["verify_certs=False"])),
                              INVALID_ARGUMENT)
    if not (use_ssl or given or not verify_certs):
        return []
    out = [(_lib.zkl_options_use_tls,)]
    if ca is not None:
        out.append((_lib.zkl_options_set_tls_ca_file, _file(ca, "ca")))
    if keyfile is not None and certfile is None:
        raise InvalidArgument("keyfile without certfile: give the client's certificate too "
                              "(certfile=)", INVALID_ARGUMENT)
    if certfile is not None:
        cert = _file(certfile, "certfile")
        key = cert if keyfile is None else _file(keyfile, "keyfile")
        out.append((_lib.zkl_options_set_tls_identity_files, cert, key))
    if keyfile_password is not None:
        if certfile is None:
            raise InvalidArgument("keyfile_password without a key: give certfile= and keyfile=",
                                  INVALID_ARGUMENT)
        out.append((_lib.zkl_options_set_tls_key_password,
                    _text(keyfile_password, "keyfile_password")))
    if not verify_certs:
        out.append((_lib.zkl_options_tls_danger_accept_any_server_name,))
    return out


_SASL_KEYS = ("mechanism", "username", "password")


def _sasl_setters(sasl_options) -> list:
    """kazoo's ``sasl_options`` -> zkl_options_set_sasl_digest_md5."""
    if sasl_options is None:
        return []
    if not isinstance(sasl_options, collections.abc.Mapping):
        raise TypeError("sasl_options must be a dict such as {'mechanism': 'DIGEST-MD5', "
                        "'username': 'bob', 'password': '...'}, not %s"
                        % type(sasl_options).__name__)
    unknown = sorted(str(k) for k in sasl_options if k not in _SASL_KEYS)
    if unknown:
        raise InvalidArgument("sasl_options: unknown key(s) %s (zklock takes %s)"
                              % (", ".join(unknown), ", ".join(_SASL_KEYS)), INVALID_ARGUMENT)
    mechanism = sasl_options.get("mechanism")
    if not isinstance(mechanism, str) or mechanism.upper() != "DIGEST-MD5":
        extra = ""
        if isinstance(mechanism, str) and mechanism.upper() == "GSSAPI":
            extra = (" GSSAPI (Kerberos) exists in the Rust library behind its sasl-gssapi "
                     "cargo feature, which this package's library is not built with.")
        raise InvalidArgument("sasl_options mechanism %r is not supported: DIGEST-MD5 is the "
                              "one SASL mechanism this package supports.%s" % (mechanism, extra),
                              INVALID_ARGUMENT)
    missing = [k for k in ("username", "password") if sasl_options.get(k) is None]
    if missing:
        raise InvalidArgument("sasl_options for DIGEST-MD5 needs %s" % " and ".join(missing),
                              INVALID_ARGUMENT)
    return [(_lib.zkl_options_set_sasl_digest_md5,
             _text(sasl_options["username"], "sasl_options username"),
             _text(sasl_options["password"], "sasl_options password"))]


# The library's hints name its Rust API; a Python caller fixes things with these keywords.
_HINTS = (
    ("Tls::ca_file", "ca="),
    ("Tls::identity_files", "certfile= and keyfile="),
    ("Tls::key_password", "keyfile_password="),
    ("Tls::danger_accept_any_server_name", "verify_certs=False"),
    ("Options::sasl", "sasl_options="),
    ("Options::tls", "use_ssl="),
)


def _connect_error(status: int) -> ZklError:
    """The error of a failed connect, its hints in this package's keywords."""
    err = _error(status)
    message = err.message
    for rust, python in _HINTS:
        message = message.replace(rust, python)
    return type(err)(message, status)


class Client(_Managed):
    """One ZooKeeper session; any number of threads may use it. ``with Client(...) as c:``
    ends the session at the end of the block (:meth:`close`): its locks are lost then, and
    their nodes go at once."""

    _free = staticmethod(_lib.zkl_client_free)

    def __init__(self, hosts: str, session_timeout: float = 10.0, *,
                 connect_timeout: Optional[float] = None, holder_id: Optional[str] = None,
                 protocol: Optional[int] = None, server_tick: Optional[float] = None,
                 auth_data: Optional[Iterable[Tuple[str, str]]] = None,
                 use_ssl: Optional[bool] = None, ca=None, certfile=None, keyfile=None,
                 keyfile_password: Optional[str] = None, verify_certs: bool = True,
                 sasl_options: Optional[Mapping[str, str]] = None):
        """Connects to ``hosts`` (``"host:port[,host:port...][/chroot]"``; a host may say
        ``tcp://`` or ``tcp+tls://``), waiting up to ``connect_timeout`` seconds (default: the
        session timeout; :class:`ConnectionLoss` then, saying why). ``session_timeout``: 0.1 s
        to 3600 s (the server may grant less). ``holder_id``: stored in this client's lock
        nodes (default ``HOSTNAME:PID``). ``protocol``: :class:`Protocol` of the locks made
        from this client (default ``CURATOR``). ``server_tick``: the servers' tickTime in
        seconds, which the lease of every hold reckons with (default: read from the servers'
        ``conf`` four-letter word, else ZooKeeper's 2 s); saying a longer tick than the servers
        use only shortens leases, a shorter one makes them unsound (docs/hold-model.md, "The
        server's tick").

        Credentials and TLS, with kazoo's keywords:

        ``auth_data``: ``[(scheme, credential), ...]`` added to every session as it is made,
        e.g. ``[("digest", "user:password")]`` (ZooKeeper's addAuth; ``digest`` sends the
        password in clear unless the connection is TLS).

        ``use_ssl``: TLS to every server (their ``secureClientPort``). Giving ``ca``,
        ``certfile``, ``keyfile`` or ``verify_certs=False`` turns it on too; ``use_ssl=False``
        with any of them is refused (:class:`InvalidArgument`). ``ca``: a PEM file of the certificate authorities
        that sign the servers' certificates (default: the system's CA bundle).
        ``certfile`` / ``keyfile``: the client's certificate (PEM, with its chain) and private
        key (PEM), for servers that require one (``ssl.clientAuth=need``, mutual TLS); without
        ``keyfile`` the key is read from ``certfile``, as :mod:`ssl` does.
        ``keyfile_password``: the password of an encrypted PKCS#8 key. Files are read at each
        new session, so a certificate renewed on disk is used from the next one on.

        ``verify_certs``: zklock **always** checks the servers' certificates against the CA:
        the underlying library cannot skip that check. ``verify_certs=False`` turns off only
        the check that a server's certificate is issued for the host name or address
        connected to (a warning is logged). Anyone holding *any* certificate from that CA can
        then pose as the servers and see every request, credentials included; prefer
        certificates that name the servers.

        ``sasl_options``: SASL authentication at connect, as kazoo takes it:
        ``{"mechanism": "DIGEST-MD5", "username": "bob", "password": "..."}``, the one
        mechanism this package supports (GSSAPI/Kerberos needs a library built with the Rust
        crate's ``sasl-gssapi`` feature; this package's is not). DIGEST-MD5 sends no password
        over the wire.

        A server that refuses the credentials, or a TLS handshake that fails over a
        certificate, raises :class:`AuthFailed` saying what to fix; a bad file is
        :class:`InvalidArgument` naming it."""
        session_ms = _millis_u32(session_timeout, "session_timeout", 100)
        if session_ms > 3_600_000:
            raise InvalidArgument("session_timeout of %r s is more than any server grants (at"
                                  " most 3600 s)" % (session_timeout,), INVALID_ARGUMENT)
        # Every argument is checked before anything is made: a TypeError or InvalidArgument
        # from here leaves nothing to free.
        # connect_timeout 0: the session timeout.
        connect_ms = 0 if connect_timeout is None else _millis_u32(
            connect_timeout, "connect_timeout", 1)
        setters = [(_lib.zkl_options_set_session_timeout, session_ms),
                   (_lib.zkl_options_set_connect_timeout, connect_ms)]
        if holder_id is not None:
            setters.append((_lib.zkl_options_set_holder_id, _text(holder_id, "holder_id")))
        if server_tick is not None:
            setters.append((_lib.zkl_options_set_server_tick,
                            _millis_u32(server_tick, "server_tick", 1)))
        if protocol is not None:
            setters.append((_lib.zkl_options_set_protocol,
                            _member(Protocol, protocol, "protocol")))
        setters += _auth_data_setters(auth_data)
        setters += _tls_setters(use_ssl, ca, certfile, keyfile, keyfile_password, verify_certs)
        setters += _sasl_setters(sasl_options)
        hosts_b = _text(hosts, "hosts")
        if not verify_certs:
            _logger.warning(
                "zklock.Client(%s, verify_certs=False): the servers' certificates are checked "
                "against the CA, but not whether they are issued for the hosts connected to: "
                "any holder of a certificate from that CA can pose as the servers", hosts)
        opts = _options_p()
        _check(_c(_lib.zkl_options_new, ctypes.byref(opts)))
        try:
            for fn, *args in setters:
                _check(_c(fn, opts, *args))
            ptr = _client_p()
            status = _c(_lib.zkl_client_connect_with_options, hosts_b, opts,
                        ctypes.byref(ptr))
        finally:
            _lib.zkl_options_free(opts)
        if status != OK:
            raise _connect_error(status)
        super().__init__(ptr.value)
        self._hosts = hosts
        self._locks: List["weakref.ref[Lock]"] = []

    def __repr__(self) -> str:
        try:
            state = self.session_state.name.lower()
        except (ValueError, ZklError):
            state = "closed"
        return "<zklock.Client %s %s>" % (self._hosts, state)

    @property
    def holder_id(self) -> str:
        """The holder id stored in this client's lock nodes."""
        out = c_char_p()
        _check(self._call(_lib.zkl_client_holder_id, ctypes.byref(out)))
        return out.value.decode("utf-8", "replace")

    @property
    def session_state(self) -> SessionState:
        """:class:`SessionState` of the session now."""
        state = c_uint32()
        _check(self._call(_lib.zkl_client_session_state, ctypes.byref(state)))
        return SessionState(state.value)

    def add_listener(self, callback: Callable[[SessionState], None]) -> threading.Thread:
        """Calls ``callback(state)`` with every change of the session's state, in order, on a
        thread of this package's (never the library's), until the session is closed. Returns
        that thread."""

        def listen():
            event = _SessionEvent()
            after = 0
            while not _exiting.is_set():
                try:
                    status = self._call(_lib.zkl_client_wait_session_event, after, 200,
                                        ctypes.byref(event))
                except ValueError:  # closed
                    return
                if status == TIMEOUT:
                    continue
                if status != OK:
                    return
                after = event.seq
                try:
                    callback(SessionState(event.state))
                except Exception:  # noqa: BLE001
                    _logger.exception("a session listener of %r failed", self)

        return _start_watcher(listen, "zklock-session-listener")

    def request_revoke(self, node_path: str) -> bool:
        """Asks the holder of a lock node (full path) to let go, as Curator's
        ``Revoker.attemptRevoke``; False if there is no such node."""
        status = self._call(_lib.zkl_client_request_revoke, _text(node_path, "node_path"))
        if status == NOT_HELD:
            return False
        _check(status)
        return True

    def close(self) -> None:
        """Ends the session now: the locks made from this client are closed too (a waiting
        acquire raises :class:`Cancelled`, a hold is released: its node goes at once, so
        waiters elsewhere get the lock without waiting for the session to expire; later calls
        on them raise ValueError), then the session is closed and the handle freed. A client
        that is only garbage-collected does not end the session while its locks live."""
        if not self._forked:  # in a forked child the session is the parent's: left alone
            with contextlib.suppress(ValueError):
                _check(self._call(_lib.zkl_client_close))
        for ref in list(self._locks):
            lk = ref()
            if lk is not None:
                with contextlib.suppress(Exception):
                    lk.close()
        self._locks.clear()
        self._dispose()

    def set_protocol(self, protocol: int) -> None:
        """:class:`Protocol` (``CURATOR`` or ``KAZOO``), for locks made after the call."""
        _check(self._call(_lib.zkl_client_set_protocol, _member(Protocol, protocol, "protocol")))

    def add_auth(self, scheme: str, auth: str) -> None:
        """Adds authentication, e.g. ``("digest", "user:password")``."""
        _check(self._call(_lib.zkl_client_add_auth, _text(scheme, "scheme"), _text(auth, "auth")))

    def set_acl(self, acl: int) -> None:
        """The ACL of nodes created after the call: :class:`Acl` ``OPEN``, ``CREATOR_ALL`` or
        ``CREATOR_ALL_READ_ALL`` (the last two need :meth:`add_auth` first)."""
        _check(self._call(_lib.zkl_client_set_acl, _member(Acl, acl, "acl")))

    def _make(self, kind: str, fn, path: str, *extra) -> Lock:
        out = _lock_p()
        _check(self._call(fn, _text(path, "path"), *extra, ctypes.byref(out)))
        return self._track(Lock(out.value, kind, path, self))

    def _track(self, lock: Lock) -> Lock:
        """Remembers a lock made from this client, for :meth:`close` (weakly: it may go)."""
        self._locks = [r for r in self._locks if r() is not None]
        self._locks.append(weakref.ref(lock))
        return lock

    def mutex(self, path: str) -> Lock:
        """A fair, reentrant exclusive lock (Curator's InterProcessMutex)."""
        return self._make("mutex", _lib.zkl_mutex_new, path)

    def semaphore_mutex(self, path: str) -> Lock:
        """A fair exclusive lock that is not reentrant."""
        return self._make("semaphore_mutex", _lib.zkl_semaphore_mutex_new, path)

    def read_lock(self, path: str) -> Lock:
        """The shared half of the read-write lock at ``path``."""
        return self._make("read_lock", _lib.zkl_read_lock_new, path)

    def write_lock(self, path: str) -> Lock:
        """The exclusive half of the read-write lock at ``path``."""
        return self._make("write_lock", _lib.zkl_write_lock_new, path)

    def rwlock(self, path: str) -> Tuple[Lock, Lock]:
        """Both halves of one read-write lock, one participant: ``(read, write)``. While the
        write half is held the read half may be taken (downgrade); the reverse raises
        :class:`WouldDeadlock` at once."""
        read, write = _lock_p(), _lock_p()
        _check(self._call(_lib.zkl_rwlock_new, _text(path, "path"), ctypes.byref(read),
                          ctypes.byref(write)))
        return (self._track(Lock(read.value, "read_lock", path, self)),
                self._track(Lock(write.value, "write_lock", path, self)))

    def semaphore(self, path: str, max_leases: int) -> Lock:
        """A semaphore of ``max_leases`` leases (1 to 2**32-1); each acquire takes one, each
        release returns the most recent. A handle whose own leases fill it raises
        :class:`WouldDeadlock` instead of waiting for itself."""
        return self._make("semaphore", _lib.zkl_semaphore_new, path,
                          _u32(max_leases, "max_leases", 1))

    def simple_lock(self, path: str) -> Lock:
        """One ephemeral node at ``path`` itself: cheapest, not fair, not reentrant."""
        return self._make("simple_lock", _lib.zkl_simple_lock_new, path)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

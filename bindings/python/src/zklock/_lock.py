"""Lock: one participant in one lock recipe (the kinds a :class:`Client` makes, and
:func:`multi_lock`), blocking, interruptible and async."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import enum
import threading
from ctypes import c_int64, c_size_t, c_uint32
from typing import TYPE_CHECKING, Callable, Iterable, List, NamedTuple, Optional, Union

from ._args import _millis, _text
from ._attempt import (
    _Attempt,
    _deliver,
    _off_loop,
    _on_main_thread,
    _through_cancels,
    _through_interrupts,
)
from ._errors import Cancelled, InvalidArgument, Timeout, ZklError, _check
from ._ffi import (
    CANCELLED,
    INVALID_ARGUMENT,
    NOT_HELD,
    OK,
    TIMEOUT,
    _c,
    _lib,
    _lock_p,
    _Participant,
    _participants_p,
    _Percentiles,
    _plain,
    _Stats,
)
from . import _fenced, _many
from ._log import _logger
from ._managed import _exiting, _Managed, _start_watcher

if TYPE_CHECKING:
    from ._client import Client
    from ._fenced import Op
    from ._many import LeaseSet


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
        True when held, and held as it returns (:meth:`is_held` is true then); False when
        not acquired in time, or when the hold could not be proven held by then (its node is
        given back; with no timeout, or 0, it proves for one session timeout at most); raises
        :class:`ZklError` otherwise
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
            # In slices: a Ctrl-C the kernel delivers to another thread (any of the library's)
            # only flags the signal, and a wait without a timeout would never look at it.
            while not attempt.done.wait(0.05):
                pass
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

    def acquire_many(self, n: int, timeout: Optional[float] = None) -> Optional["LeaseSet"]:
        """A semaphore's ``n`` leases at once, all or none, under one timeout (Curator's
        ``acquire(qty)``, in its layout or kazoo's): a :class:`LeaseSet` of them, held as it
        returns; None when not all were free in time (0: now), with none of them left taken.
        :class:`InvalidArgument` for ``n`` below 1 or over ``max_leases``, or a lock that is
        not a semaphore; :class:`WouldDeadlock` when this handle's own leases leave fewer than
        ``n`` free. Timeouts and Ctrl-C as :meth:`acquire`::

            with sem.acquire_many(3, timeout=5.0) as leases:  # (None if not in 5 s)
                print(leases.tokens)
        """
        return _many.acquire_many(self, n, timeout)

    def multi(self, ops: Iterable["Op"]) -> None:
        """Guarded writes (docs/guarded-writes.md): applies ``ops`` (:class:`Op` values) to
        ZooKeeper in one multi, together with a check that this handle's hold (its most
        recent) still exists: all of them, or none. The fence for writes to ZooKeeper: a holder
        that lost its lock (its session expired while it was paused, and someone else took the
        lock) cannot write, however late its request arrives; fence anything else with
        :attr:`fencing_token`. Raises :class:`LockLost` when the hold is gone (nothing
        written), :class:`NotHeld` when the handle holds nothing, :class:`ZooKeeperError` when
        an operation failed (nothing written), :class:`ConnectionLoss` when no reply came (the
        writes may have been applied, and then only while held)::

            with lock:
                lock.multi([zklock.Op.set_data("/config/primary", b"db-2"),
                            zklock.Op.create("/config/history/db-2")])
        """
        _fenced.multi(self, ops)

    def set_data(self, path: str, data: Union[bytes, str]) -> None:
        """Replaces the data of ``path`` only while this handle's hold holds (as :meth:`multi`)."""
        b = _fenced._bytes(data)
        ptr, _buf = _fenced._buffer(b)
        _check(self._call(_lib.zkl_lock_set_data, _text(path, "path"), ptr, len(b)))

    def create(self, path: str, data: Union[bytes, str] = b"",
               mode: int = _fenced.NODE_PERSISTENT) -> None:
        """Creates ``path`` holding ``data`` (``mode``: ``zklock.NODE_*``) only while this
        handle's hold holds (as :meth:`multi`)."""
        b = _fenced._bytes(data)
        ptr, _buf = _fenced._buffer(b)
        _check(self._call(_lib.zkl_lock_create, _text(path, "path"), ptr, len(b), mode))

    def delete(self, path: str) -> None:
        """Deletes ``path`` only while this handle's hold holds (as :meth:`multi`)."""
        _check(self._call(_lib.zkl_lock_delete, _text(path, "path")))

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

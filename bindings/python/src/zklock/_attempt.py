"""An acquire on a thread of the package's own, which another thread may give up: the main
thread on Ctrl-C (:meth:`Lock.acquire` stays interruptible) or an event loop on a task's
cancellation (:meth:`Lock.acquire_async`); and the helpers that await such threads from
asyncio without blocking the loop."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import threading
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional

from ._errors import ZklError, _check
from ._ffi import CANCELLED, OK, _cancel_scope_p, _lib, _Status

if TYPE_CHECKING:
    from ._lock import Lock


class _Attempt:
    """One C acquire of ``lock`` on a thread of the package's own, which another thread (the
    main thread on Ctrl-C, an event loop on a task's cancellation) may give up at any moment:
    before it begins (it then never begins), while it waits (its own cancel scope ends it:
    zkl_lock_acquire_in, so the handle's other acquires under way go on), or as it returns. The
    thread owns the outcome unless the acquire was over before it was given up; what it owns
    and got (a hold) it gives back. ``on_done(attempt)`` runs on the thread once :attr:`done`
    is set."""

    def __init__(self, lock: "Lock", millis: int,
                 on_done: Optional[Callable[["_Attempt"], None]] = None):
        self._lock, self._millis, self._on_done = lock, millis, on_done
        self._mu = threading.Lock()
        self._begun = False      # the C acquire may be under way
        self._over = False       # its outcome is known (or it never began)
        self._given_up = False
        self._given_back = False
        scope = _cancel_scope_p()
        _check(_lib.zkl_cancel_scope_new(ctypes.byref(scope)))
        self._scope = scope
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
            # A cancel of the scope from here on ends this acquire, and this one alone: one
            # sent before the library sees it begin ends it at once (a scope's cancel is
            # sticky).
            status, error = None, None
            try:
                status = self._lock._call(_lib.zkl_lock_acquire_in, self._millis, self._scope)
            except BaseException as e:  # noqa: BLE001 - handed to whoever wants the outcome
                error = e
            with self._mu:
                self._status, self._error, self._over = status, error, True
                unwanted = self._given_up
            if unwanted:
                self.give_back()
        finally:
            with self._mu:
                # Over: give_up no longer touches the scope.
                self._over = True
                scope, self._scope = self._scope, None
            _lib.zkl_cancel_scope_free(scope)
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
                # Under the mutex: the scope lives until the acquire is over.
                _lib.zkl_cancel_scope_cancel(self._scope)
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

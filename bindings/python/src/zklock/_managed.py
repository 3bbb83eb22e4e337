"""The owned handle: a library handle that frees itself on close, on garbage collection, at
exit (the watcher threads that keep it busy stop first) and that a forked child leaves to
its parent."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from typing import Callable, Optional

# _log first: its stop at exit then runs after the watchers' (atexit runs in reverse).
from . import _log  # noqa: F401
from ._ffi import _c


class _Managed:
    """A handle that frees itself: close() is idempotent and also runs on garbage collection.

    Every call into the library on the handle is counted while it runs. close() refuses new
    calls (ValueError), makes those under way return (a lock's waiting acquire is cancelled),
    waits for them, and only then frees the handle: closing from another thread never frees
    it under a running call."""

    _free = None
    _ptr: Optional[int] = None  # also when __init__ failed before setting it
    _mu: Optional[threading.Condition] = None
    # Set in a forked child (see _after_fork_in_child): the handle is the parent's.
    _forked = False

    def __init__(self, ptr: int):
        self._mu = threading.Condition(threading.Lock())
        self._calls = 0
        self._ptr = ptr
        _handles.add(self)

    def _closed(self) -> ValueError:
        return ValueError("%s is closed" % type(self).__name__)

    def _call(self, fn, *args):
        """``fn(handle, *args)``, a zkl_ function that returns a status (:func:`_c`: one
        that fails carries its message); the handle stays valid until it returns."""
        return self._call_raw(_c, fn, *args)

    def _call_raw(self, call, *args):
        """``call(*args)`` with the handle inserted after the first argument of ``args``."""
        fn, args = args[0], args[1:]
        mu = self._mu
        if mu is None:
            raise self._closed()
        with mu:
            ptr = self._ptr
            if ptr is None:
                raise self._closed()
            self._calls += 1
        try:
            return call(fn, ptr, *args)
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
        self._dispose()

    def _dispose(self) -> None:
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
            self._dispose()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


# The watcher threads (on_lost, make_revocable's callback, session listeners). Each waits in
# the library 0.2 s at a time, with its handle in use: at interpreter exit the handle could then
# not be freed (see _Managed._dispose), and a held lock's node would stay on the server for a
# session timeout. So they stop at exit (atexit, before the interpreter finalizes), and the
# handles are freed as if they had never been watched: their nodes go at once.
_exiting = threading.Event()
_watchers: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()


def _start_watcher(target: Callable[[], None], name: str) -> threading.Thread:
    t = threading.Thread(target=target, name=name, daemon=True)
    _watchers.add(t)
    t.start()
    return t


def _stop_watchers() -> None:
    """At exit: the watchers end their waits (within 0.2 s) and return."""
    _exiting.set()
    deadline = time.monotonic() + 2.0
    for t in list(_watchers):
        if t is not threading.current_thread():
            t.join(max(0.0, deadline - time.monotonic()))


atexit.register(_stop_watchers)


# Every live handle, so that a forked child can make them inert.
_handles: "weakref.WeakSet[_Managed]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Runs in the child of every ``os.fork()`` (``os.register_at_fork``). The handles the
    child inherited are the parent's: the library makes every call on them fail (Closed) and
    their free release nothing. Here the package forgets what only existed in the parent: calls
    under way in its other threads (which do not exist in the child: closing would wait for
    them forever) and locks those threads may have held (the log drain thread: see
    _log._after_fork_in_child)."""
    for h in list(_handles):
        h._mu = threading.Condition(threading.Lock())
        h._calls = 0
        h._forked = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

"""LeaseSet: several leases of a semaphore taken together (:meth:`Lock.acquire_many`, over
zkl_semaphore_acquire_many / zkl_semaphore_release_many)."""

from __future__ import annotations

import contextlib
import threading
from ctypes import c_int64
from typing import TYPE_CHECKING, Iterator, List, Optional

from ._args import _millis
from ._attempt import _on_main_thread
from ._errors import InvalidArgument, _check
from ._ffi import INVALID_ARGUMENT, OK, TIMEOUT, _lib

if TYPE_CHECKING:
    from ._lock import Lock


class LeaseSet:
    """``n`` leases of one semaphore, taken together by :meth:`Lock.acquire_many`: each its
    own lease with its own fencing token (:attr:`tokens`), returned together by
    :meth:`release` or at the end of a ``with`` block. The handle holds them meanwhile
    (:meth:`Lock.release` would return its most recent one alone)."""

    def __init__(self, lock: "Lock", tokens: List[int]):
        self._lock, self._tokens, self._released = lock, list(tokens), False

    def __repr__(self) -> str:
        return "<zklock.LeaseSet %r tokens=%r%s>" % (
            self._lock.path, self._tokens, " released" if self._released else "")

    @property
    def tokens(self) -> List[int]:
        """The leases' fencing tokens, oldest lease first."""
        return list(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def __iter__(self) -> Iterator[int]:
        return iter(self.tokens)

    def release(self) -> None:
        """Returns every lease of the set (each whatever becomes of the others); raises the
        first failure (:class:`LockLost` for a lease lost meanwhile). Once only: again, it
        does nothing."""
        if self._released:
            return
        self._released = True
        arr = (c_int64 * len(self._tokens))(*self._tokens)
        _check(self._lock._call(_lib.zkl_semaphore_release_many, arr, len(self._tokens)))

    def __enter__(self) -> "LeaseSet":
        return self

    def __exit__(self, *exc) -> bool:
        self.release()
        return False


def acquire_many(lock: "Lock", n: int, timeout: Optional[float],
                 timeout_raises: bool = False) -> Optional[LeaseSet]:
    """:meth:`Lock.acquire_many`'s body."""
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n < 2 ** 32:
        raise InvalidArgument("invalid argument: n must be a count of leases from 1 to the "
                              "semaphore's max_leases (got %r)" % (n,), INVALID_ARGUMENT)
    millis = _millis(timeout)
    out = (c_int64 * n)()
    if millis != 0 and _on_main_thread():
        status = _interruptibly(lock, n, millis, out)
    else:
        status = lock._call(_lib.zkl_semaphore_acquire_many, n, millis, out)
    if status == TIMEOUT and not timeout_raises:
        return None
    _check(status)
    return LeaseSet(lock, list(out))


def _interruptibly(lock: "Lock", n: int, millis: int, out) -> int:
    """The C call on a thread of its own while this (main) thread waits in slices, which a
    signal handler can interrupt: then the handle's acquire is cancelled and waited for, the
    leases it got anyway are returned, and the exception goes on."""
    result: list = []

    def run() -> None:
        try:
            result.append(lock._call(_lib.zkl_semaphore_acquire_many, n, millis, out))
        except BaseException as e:  # the handle was closed meanwhile
            result.append(e)

    t = threading.Thread(target=run, name="zklock-acquire-many", daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.05)
    except BaseException:
        with contextlib.suppress(BaseException):
            lock.cancel()
        while t.is_alive():
            with contextlib.suppress(BaseException):
                t.join(0.05)
        if result and result[0] == OK:
            with contextlib.suppress(BaseException):
                LeaseSet(lock, list(out)).release()
        # A cancel the acquire did not need (it had ended) is forgotten.
        with contextlib.suppress(BaseException):
            lock.reset_cancel()
        raise
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]



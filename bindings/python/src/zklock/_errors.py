"""The exceptions: one class per zkl_status, and the status -> exception mapping."""

from __future__ import annotations

from typing import Optional, Type

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
    _last_message,
    _lib,
)


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
            self.status = int(status)
        self.message = message

    @property
    def name(self) -> str:
        return status_name(self.status)

    def __str__(self) -> str:
        return "%s: %s" % (self.name, self.message)


class Timeout(ZklError, TimeoutError):
    """Not acquired before the timeout (timeout 0: the lock was busy). Also a
    :class:`TimeoutError`."""

    status = TIMEOUT


class InvalidArgument(ZklError, ValueError):
    """A malformed path or host list, or a bad value."""

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
    """An acquire was ended by :meth:`Lock.cancel` (made during it, or before it began)."""

    status = CANCELLED


class LockLost(ZklError):
    """The hold was lost before its release (its session ended, or its node was removed)."""

    status = LOCK_LOST


class Closed(ZklError):
    """The client was closed."""

    status = CLOSED


class WouldDeadlock(ZklError):
    """The acquire could only wait for this handle's own hold: a non-reentrant lock this
    handle holds, a read -> write upgrade, a semaphore whose leases this handle fills."""

    status = WOULD_DEADLOCK


class AuthFailed(ZklError):
    """The servers did not accept this client's credentials, or the client did not accept
    the servers': a wrong SASL user or password, a server that requires SASL and got none, a
    TLS server certificate not signed by a trusted CA (``ca=``) or not issued for the host
    connected to, a client certificate missing (``certfile=``) or refused. The message says
    which. Retrying with the same settings will not help."""

    status = AUTH_FAILED


_ERRORS = {c.status: c for c in (Timeout, InvalidArgument, NotHeld, ConnectionLoss,
                                 SessionExpired, ZooKeeperError, InternalError, Cancelled,
                                 LockLost, Closed, WouldDeadlock, AuthFailed)}


def _error(status: int) -> ZklError:
    message = getattr(status, "message", None)
    if message is None:  # a bare int from this thread's own last call
        message = _last_message()
    cls: Type[ZklError] = _ERRORS.get(status, ZklError)
    return cls(message, int(status))


def _check(status: int) -> None:
    if status != OK:
        raise _error(status)

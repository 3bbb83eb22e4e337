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
:func:`set_log_level` turns on. Delivery starts with the first :class:`Client` (or
:func:`set_log_level`), not at import; the package stops the library's logging at exit
(atexit), before the interpreter finalizes.

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

# The package is cut into rooms by job, as wasmtime-py is: _ffi (the library and its ctypes
# declarations), _errors (the exceptions), _args (arguments as C's), _log (log delivery),
# _managed (handles that free themselves), _attempt (acquires on the package's threads),
# _lock (Lock) and _client (Client). This module only gathers the public names.

from ._client import (
    ACL_CREATOR_ALL,
    ACL_CREATOR_ALL_READ_ALL,
    ACL_OPEN,
    PROTOCOL_CURATOR,
    PROTOCOL_KAZOO,
    Acl,
    Client,
    Protocol,
    SessionState,
)
from ._errors import (
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
    version,
)
from ._lock import HoldState, Lock, Participant, Percentiles, Stats, multi_lock
from ._fenced import (
    NODE_EPHEMERAL,
    NODE_EPHEMERAL_SEQUENTIAL,
    NODE_PERSISTENT,
    NODE_PERSISTENT_SEQUENTIAL,
    Op,
)
from ._many import LeaseSet
from ._log import set_log_level

# What tests/test_header.py checks against zklock.h (the C declarations and the status ->
# exception table), and the loaded library.
from ._errors import _ERRORS  # noqa: F401
from ._ffi import (  # noqa: F401
    _LOG_CALLBACK,
    _SIGNATURES,
    _lib,
    _Participant,
    _SessionEvent,
    _Stats,
    _ZklOp,
    _status,
)

__all__ = [
    "Client",
    "Lock",
    "LeaseSet",
    "Op",
    "NODE_PERSISTENT",
    "NODE_EPHEMERAL",
    "NODE_PERSISTENT_SEQUENTIAL",
    "NODE_EPHEMERAL_SEQUENTIAL",
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

__version__ = version()

# Their home is the package, as before it was cut into rooms: tracebacks, reprs, pickles and
# the documentation name them zklock.X, never zklock._lock.X.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) or callable(_value):
        _value.__module__ = __name__
del _name, _value

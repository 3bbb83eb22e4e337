"""Guarded writes (docs/guarded-writes.md): ZooKeeper writes applied only while a lock
handle's hold still exists (:meth:`Lock.multi` and its one-op forms), over zkl_lock_multi."""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_uint8
from typing import TYPE_CHECKING, NamedTuple, Sequence, Union

from ._args import _text
from ._errors import InvalidArgument, _check
from ._ffi import INVALID_ARGUMENT, _lib, _ZklOp

if TYPE_CHECKING:
    from ._lock import Lock

# zkl_op.kind and zkl_op.mode (the header's ZKL_OP_* and ZKL_NODE_*).
_CREATE, _SET_DATA, _DELETE, _CHECK = 0, 1, 2, 3
NODE_PERSISTENT = 0
NODE_EPHEMERAL = 1
NODE_PERSISTENT_SEQUENTIAL = 2
NODE_EPHEMERAL_SEQUENTIAL = 3


class Op(NamedTuple):
    """One write of :meth:`Lock.multi`: make them with :meth:`create`, :meth:`set_data`,
    :meth:`delete` and :meth:`check`. ``version`` -1 matches any version."""

    kind: int
    path: str
    data: bytes = b""
    version: int = -1
    mode: int = NODE_PERSISTENT

    @classmethod
    def create(cls, path: str, data: Union[bytes, str] = b"",
               mode: int = NODE_PERSISTENT) -> "Op":
        """Creates ``path`` holding ``data`` (``mode``: a ``NODE_*`` constant)."""
        return cls(_CREATE, path, _bytes(data), -1, mode)

    @classmethod
    def set_data(cls, path: str, data: Union[bytes, str], version: int = -1) -> "Op":
        """Replaces the data of ``path`` (if its data version is ``version``)."""
        return cls(_SET_DATA, path, _bytes(data), version)

    @classmethod
    def delete(cls, path: str, version: int = -1) -> "Op":
        """Deletes ``path`` (if its data version is ``version``)."""
        return cls(_DELETE, path, b"", version)

    @classmethod
    def check(cls, path: str, version: int = -1) -> "Op":
        """Writes nothing; the whole write fails unless ``path`` exists (at ``version``)."""
        return cls(_CHECK, path, b"", version)


def _bytes(data: Union[bytes, str]) -> bytes:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise InvalidArgument("invalid argument: data must be bytes or str, not %s"
                          % type(data).__name__, INVALID_ARGUMENT)


def _buffer(data: bytes):
    """``data`` as the ``const uint8_t *`` the library reads (kept alive by the caller)."""
    buf = (c_uint8 * max(len(data), 1)).from_buffer_copy(data or b"\0")
    return ctypes.cast(buf, POINTER(c_uint8)), buf


def multi(lock: "Lock", ops: Sequence[Op]) -> None:
    """:meth:`Lock.multi`'s body."""
    ops = list(ops)
    arr = (_ZklOp * max(len(ops), 1))()
    keep = []  # the buffers, alive for the call
    for i, op in enumerate(ops):
        if not isinstance(op, Op):
            raise InvalidArgument("invalid argument: ops[%d] is not a zklock.Op" % i,
                                  INVALID_ARGUMENT)
        path = _text(op.path, "path")
        ptr, buf = _buffer(op.data)
        keep.append((path, buf))
        arr[i] = _ZklOp(op.kind, path, ptr, len(op.data), op.version, op.mode)
    _check(lock._call(_lib.zkl_lock_multi, arr, len(ops)))

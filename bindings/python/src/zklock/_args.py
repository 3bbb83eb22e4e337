"""Python arguments as the C library's: text as C strings, seconds as milliseconds, integers
and enum members range-checked before ctypes (which would wrap them)."""

from __future__ import annotations

import math
from typing import Optional

from ._errors import InvalidArgument
from ._ffi import INVALID_ARGUMENT


_U32_MAX = 2**32 - 1


def _text(s, what: str) -> bytes:
    """A text argument as the C string the library reads. A NUL would end that string early
    (``"/a\\0b"`` would name ``/a``), so it is refused, as the Rust library refuses it."""
    if isinstance(s, str):
        b = s.encode("utf-8")
    elif isinstance(s, bytes):
        b = s
    else:
        raise TypeError("%s must be str or bytes, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise InvalidArgument("%s %r contains a NUL character (at %d), which no C string can "
                              "carry" % (what, s, b.index(b"\0")), INVALID_ARGUMENT)
    return b


def _seconds(value, what: str) -> float:
    """A number of seconds, checked before it reaches ctypes (bool, NaN and non-numbers are
    refused: TypeError / ValueError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("%s must be a number of seconds, not %s" % (what, type(value).__name__))
    if math.isnan(value):
        raise InvalidArgument("%s is NaN" % what, INVALID_ARGUMENT)
    return float(value)


def _millis(timeout: Optional[float]) -> int:
    """None or negative -> -1 (forever, as C's -1 and threading.Lock's timeout=-1); 0 -> try
    once; seconds -> whole milliseconds, rounded up; longer than the clock can count ->
    forever."""
    if timeout is None:
        return -1
    t = _seconds(timeout, "timeout")
    if t < 0:
        return -1
    if t == 0:
        return 0
    if t * 1000 >= 2**62:
        return -1
    return max(1, int(math.ceil(t * 1000)))


def _in_seconds(ms: int) -> str:
    """Milliseconds as seconds in plain digits: 100 -> "0.1", 4294967295 -> "4294967.295"."""
    return ("%d.%03d" % divmod(ms, 1000)).rstrip("0").rstrip(".")


def _millis_u32(seconds, what: str, low_ms: int = 1, high_ms: int = _U32_MAX) -> int:
    """Seconds as whole milliseconds for a uint32_t argument, from ``low_ms`` to ``high_ms``
    (InvalidArgument, a ValueError, otherwise: also for infinities)."""
    t = _seconds(seconds, what)
    ms = int(math.ceil(t * 1000)) if 0 < t < math.inf else (0 if t <= 0 else None)
    if ms is None or not low_ms <= ms <= high_ms:
        raise InvalidArgument("%s of %r s is out of range (%s to %s s)"
                              % (what, seconds, _in_seconds(low_ms), _in_seconds(high_ms)),
                              INVALID_ARGUMENT)
    return ms


def _u32(value, what: str, low: int = 0) -> int:
    """An integer for a uint32_t argument, range-checked before ctypes (which would wrap it)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("%s must be an int, not %s" % (what, type(value).__name__))
    if not low <= value <= _U32_MAX:
        raise InvalidArgument("%s %d is out of range (%d to %d)" % (what, value, low, _U32_MAX),
                              INVALID_ARGUMENT)
    return int(value)


def _member(enum_type, value, what: str) -> int:
    """An IntEnum value for a uint32_t argument (InvalidArgument, a ValueError, otherwise)."""
    try:
        return int(enum_type(_u32(value, what)))
    except ValueError:
        raise InvalidArgument("%s %r is not one of %s" % (
            what, value, ", ".join("%d (%s)" % (m.value, m.name) for m in enum_type)),
            INVALID_ARGUMENT) from None

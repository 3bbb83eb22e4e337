"""Log delivery: the library's log lines reach ``logging`` under ``"zklock"`` from the
package's own ``zklock-log`` thread, never from the library's I/O threads."""

from __future__ import annotations

import atexit
import ctypes
import logging
import os
import threading
from ctypes import c_char_p, c_uint32
from typing import Optional

from ._ffi import OK, _lib


# zkl_log_level (1 = error ... 5 = trace) -> logging levels
_LOG_LEVELS = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG, 5: 5}


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
            _child_logger(target.value.decode("utf-8", "replace")).log(
                _LOG_LEVELS.get(level.value, logging.INFO), "%s",
                message.value.decode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a failing handler must not end the drain
            pass


def _child_logger(target: str) -> logging.Logger:
    """``zklock::recipes::hold`` -> the logger ``zklock.recipes.hold`` (a child of
    ``zklock``); targets from elsewhere go under ``zklock`` too."""
    name = target.replace("::", ".")
    if name != "zklock" and not name.startswith("zklock."):
        name = "zklock." + name
    return logging.getLogger(name)


def _zkl_level(level: int) -> int:
    """A ``logging`` level -> the most verbose zkl_log_level it lets through."""
    if level <= 5:
        return 5
    if level <= logging.DEBUG:
        return 4
    if level <= logging.INFO:
        return 3
    if level <= logging.WARNING:
        return 2
    return 1


def _start_log(level: int) -> None:
    global _log_thread, _log_level, _log_started
    _log_level = level
    _log_started = True
    if _lib.zkl_log_start(_zkl_level(level)) == OK:
        _log_thread = threading.Thread(target=_drain_log, name="zklock-log", daemon=True)
        _log_thread.start()


def _start_log_once() -> None:
    """Starts log delivery on first use (the first :class:`Client`), not at import: at INFO,
    or at the ``zklock`` logger's level then if that is more verbose."""
    if _log_started:
        return
    with _log_mu:
        if not _log_started:
            _start_log(min(_logger.getEffectiveLevel(), logging.INFO))


def set_log_level(level: int) -> None:
    """The most verbose ``logging`` level the library sends (default: INFO, or the ``zklock``
    logger's level when the first client is made if that is more verbose).
    ``set_log_level(logging.DEBUG)`` makes every acquire and release reach ``logging`` too; the
    ``zklock`` loggers' own levels still filter. Starts log delivery if no client has yet."""
    with _log_mu:
        _lib.zkl_log_stop()
        thread = _log_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(1.0)
        _start_log(level)


def _stop_log() -> None:
    """At exit, before the interpreter finalizes: the library stops logging and the drain
    ends, so no log line reaches Python code while the interpreter shuts down."""
    if not _log_started:
        return
    _lib.zkl_log_stop()
    thread = _log_thread
    if thread is not None and thread is not threading.current_thread():
        thread.join(1.0)  # a handler still busy past that is left to finish (a daemon thread)


# Lines of INFO and above (lock acquired, released, lost; session changes; background
# deletes) reach `logging`, whose own level then filters (logging.getLogger("zklock")
# .setLevel(...)). Another copy of the library's log delivery in this process (a second
# binding) keeps the lines: then this package logs nothing.
_log_thread: Optional[threading.Thread] = None
_log_mu = threading.Lock()
_log_level = logging.INFO
# Whether delivery was started (_start_log_once): by the first client or set_log_level.
_log_started = False
atexit.register(_stop_log)


def _after_fork_in_child() -> None:
    """Runs in the child of every ``os.fork()`` (``os.register_at_fork``): the log drain
    thread existed only in the parent, so the child forgets it (and the lock it may have held)
    and starts its own if the parent had started one (else on the child's first use)."""
    global _log_mu, _log_thread
    _log_mu = threading.Lock()
    _log_thread = None
    if _log_started:
        _lib.zkl_log_stop()
        _start_log(_log_level)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

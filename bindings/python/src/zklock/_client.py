"""Client: one ZooKeeper session, made from kazoo's keywords (credentials, TLS, SASL), and
the locks made from it."""

from __future__ import annotations

import atexit
import collections.abc
import contextlib
import ctypes
import enum
import os
import threading
import weakref
from ctypes import c_char_p, c_uint32
from typing import Callable, Iterable, List, Mapping, Optional, Tuple

from ._args import _member, _millis_u32, _text, _u32
from ._errors import InvalidArgument, ZklError, _check, _error
from ._ffi import (
    INVALID_ARGUMENT,
    NOT_HELD,
    OK,
    TIMEOUT,
    _c,
    _client_p,
    _lib,
    _lock_p,
    _options_p,
    _SessionEvent,
)
from ._lock import Lock
from ._log import _logger, _start_log_once
from ._managed import _exiting, _Managed, _start_watcher


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
# kazoo's GSSAPI keys (``service``, ``principal``), and the host of the servers' principal.
_GSSAPI_KEYS = ("mechanism", "principal", "service", "host")


def _sasl_setters(sasl_options) -> list:
    """kazoo's ``sasl_options`` -> zkl_options_set_sasl_digest_md5 or
    zkl_options_set_sasl_gssapi."""
    if sasl_options is None:
        return []
    if not isinstance(sasl_options, collections.abc.Mapping):
        raise TypeError("sasl_options must be a dict such as {'mechanism': 'DIGEST-MD5', "
                        "'username': 'bob', 'password': '...'}, not %s"
                        % type(sasl_options).__name__)
    mechanism = sasl_options.get("mechanism")
    gssapi = isinstance(mechanism, str) and mechanism.upper() == "GSSAPI"
    keys = _GSSAPI_KEYS if gssapi else _SASL_KEYS
    unknown = sorted(str(k) for k in sasl_options if k not in keys)
    if unknown:
        raise InvalidArgument("sasl_options: unknown key(s) %s (zklock takes %s%s)"
                              % (", ".join(unknown), ", ".join(keys),
                                 " with GSSAPI" if gssapi else ""), INVALID_ARGUMENT)
    if gssapi:
        def opt(key):
            v = sasl_options.get(key)
            return None if v is None else _text(v, "sasl_options " + key)
        return [(_lib.zkl_options_set_sasl_gssapi, opt("principal"), opt("service"),
                 opt("host"))]
    if not isinstance(mechanism, str) or mechanism.upper() != "DIGEST-MD5":
        raise InvalidArgument("sasl_options mechanism %r is not supported: DIGEST-MD5 and "
                              "GSSAPI (Kerberos) are the SASL mechanisms this package supports"
                              % (mechanism,), INVALID_ARGUMENT)
    missing = [k for k in ("username", "password") if sasl_options.get(k) is None]
    if missing:
        raise InvalidArgument("sasl_options for DIGEST-MD5 needs %s" % " and ".join(missing),
                              INVALID_ARGUMENT)
    return [(_lib.zkl_options_set_sasl_digest_md5,
             _text(sasl_options["username"], "sasl_options username"),
             _text(sasl_options["password"], "sasl_options password"))]


# The clients still open, closed at interpreter exit (atexit, while threads still run): a lock
# handle with a call under way in another thread (an acquire waiting on a second handle of a
# semaphore, say) cannot be freed once the interpreter finalizes, and would keep its client's
# session, and every node of it, on the server for a session timeout after the process ended.
_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _close_clients_at_exit() -> None:
    for client in list(_open_clients):
        # The locks first: each gives back what it holds while its session is open (then the
        # client's close finds nothing to release, and says nothing of it).
        for ref in list(client._locks):
            lk = ref()
            if lk is not None:
                with contextlib.suppress(Exception):
                    lk.close()
        with contextlib.suppress(Exception):
            client.close()


atexit.register(_close_clients_at_exit)


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
        ``{"mechanism": "DIGEST-MD5", "username": "bob", "password": "..."}`` (DIGEST-MD5
        sends no password over the wire), or Kerberos,
        ``{"mechanism": "GSSAPI", "principal": "alice@EXAMPLE.COM", "service": "zookeeper",
        "host": "zk1.example.com"}`` (every key but ``mechanism`` optional: ``principal`` the
        one the credentials must be for, ``service`` and ``host`` those of the servers'
        principal, default ``zookeeper`` and each server's host in ``hosts``), with the
        process's Kerberos credentials: the ticket in the credential cache (``KRB5CCNAME``;
        ``kinit``), else the client keytab (``KRB5_CLIENT_KTNAME``). GSSAPI needs a library
        built with the Rust crate's ``sasl-gssapi`` feature (``ZKLOCK_CARGO_FEATURES=sasl-gssapi``
        when the package is built; docs/kerberos.md); without it the connect raises
        :class:`InvalidArgument` saying so.

        A server that refuses the credentials, or a TLS handshake that fails over a
        certificate, raises :class:`AuthFailed` saying what to fix; a bad file is
        :class:`InvalidArgument` naming it."""
        # At most an hour: more than any server grants (the library's own bound).
        session_ms = _millis_u32(session_timeout, "session_timeout", 100, 3_600_000)
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
        _start_log_once()  # before the library's first call for this client, which may log
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
            raise _error(status)
        super().__init__(ptr.value)
        self._hosts = hosts
        self._locks: List["weakref.ref[Lock]"] = []
        _open_clients.add(self)

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

    def leader_election(self, path: str) -> Lock:
        """A participant of the leader election at ``path`` (Curator's LeaderLatch layout):
        ``acquire`` waits for leadership, ``is_held`` says whether it leads now (false as
        soon as that is not provable, before another could lead), ``fencing_token`` is the
        term (greater than every earlier leader's), ``release`` relinquishes."""
        return self._make("leader_election", _lib.zkl_leader_election_new, path)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

"""Secured ensembles through the Python door, with kazoo's keywords, against real servers
(tools/testing_server.rs: a TLS-only client port with certificates made for the run, with and
without client certificates required; a server that requires SASL DIGEST-MD5): each connects
and locks, and each refusal is AuthFailed, within the connect timeout, saying what to fix."""

import logging
import shutil
import subprocess
import time

import uuid

import pytest

import zklock

# A failed connect must say why within its connect timeout (the library probes each server
# inside it); the slack covers a busy machine.
CONNECT = 5.0
SLACK = 3.0


@pytest.fixture(scope="module")
def mutual(secured_server):
    """TLS-only, ssl.clientAuth=need."""
    return secured_server("--tls", "need")


@pytest.fixture(scope="module")
def server_only(secured_server):
    """TLS-only, ssl.clientAuth=none: the client needs only the CA."""
    return secured_server("--tls", "none")


@pytest.fixture(scope="module")
def sasl(secured_server):
    """SASL DIGEST-MD5 required (enforce.auth.enabled), knowing bob."""
    return secured_server("--sasl", "bob:bobpw")


def _locks(client, path):
    lock = client.mutex(path)
    assert lock.acquire(10.0)
    assert lock.is_held
    lock.release()
    assert not lock.is_held


def _refused(what, **kwargs):
    """Connects expecting AuthFailed; returns the error after checking it came in time."""
    t0 = time.monotonic()
    with pytest.raises(zklock.AuthFailed) as caught:
        zklock.Client(what, 10.0, connect_timeout=CONNECT, **kwargs)
    took = time.monotonic() - t0
    assert took < CONNECT + SLACK, "AuthFailed after %.1f s" % took
    assert caught.value.status == zklock.AuthFailed.status == 12
    assert caught.value.name == "ZKL_AUTH_FAILED"
    return caught.value


def test_mutual_tls_with_ca_certfile_and_keyfile_locks(mutual, path):
    f = mutual.files
    with zklock.Client(mutual.hosts, ca=f["ca"], certfile=f["cert"], keyfile=f["key"]) as c:
        _locks(c, path)
    # kazoo's spelling: a bare host list and use_ssl=True.
    with zklock.Client(mutual.address, use_ssl=True, ca=f["ca"], certfile=f["cert"],
                       keyfile=f["key"]) as c:
        _locks(c, path)


def test_a_certfile_holding_the_key_too_needs_no_keyfile(mutual, path, tmp_path):
    both = tmp_path / "client-and-key.pem"
    both.write_text(open(mutual.files["cert"]).read() + open(mutual.files["key"]).read())
    with zklock.Client(mutual.hosts, ca=mutual.files["ca"], certfile=both) as c:
        _locks(c, path)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_an_encrypted_key_takes_keyfile_password(mutual, path, tmp_path):
    encrypted = tmp_path / "client.p8"
    subprocess.run(["openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", mutual.files["key"],
                    "-out", str(encrypted), "-passout", "pass:keypw"], check=True)
    f = mutual.files
    with zklock.Client(mutual.hosts, ca=f["ca"], certfile=f["cert"], keyfile=encrypted,
                       keyfile_password="keypw") as c:
        _locks(c, path)
    for password, words in ((None, "keyfile_password="), ("wrong", "cannot be decrypted")):
        with pytest.raises(zklock.InvalidArgument) as caught:
            zklock.Client(mutual.hosts, connect_timeout=CONNECT, ca=f["ca"], certfile=f["cert"],
                          keyfile=encrypted, keyfile_password=password)
        assert words in caught.value.message and str(encrypted) in caught.value.message, \
            caught.value.message


def test_mutual_tls_without_a_client_certificate_is_auth_failed(mutual):
    err = _refused(mutual.hosts, ca=mutual.files["ca"])
    assert "client certificate" in err.message, err.message
    # The hint names this package's keywords, not the Rust API's nor the C API's (issue 40).
    assert err.message.endswith("give one (certfile= and keyfile=)"), err.message
    assert "::" not in err.message and "zkl_" not in err.message, err.message


def test_server_only_tls_needs_only_the_ca(server_only, path):
    with zklock.Client(server_only.hosts, ca=server_only.files["ca"]) as c:
        _locks(c, path)
    with zklock.Client(server_only.address, use_ssl=True, ca=server_only.files["ca"]) as c:
        _locks(c, path)


def test_tls_without_the_servers_ca_is_auth_failed_naming_the_ca(server_only):
    # use_ssl=True alone trusts the system's CAs, which never signed the run's certificates.
    err = _refused(server_only.address, use_ssl=True)
    assert "not signed by a CA this client trusts" in err.message, err.message
    assert err.message.endswith("(ca=)"), err.message


def test_a_server_certificate_for_another_name_is_refused_unless_verify_certs_is_false(
        server_only, proxy, path, caplog):
    # The server's certificate names 127.0.0.1 and localhost; through a relay on 127.0.0.2
    # the client connects to a name the certificate does not carry.
    relay = proxy(server_only.address, "127.0.0.2")
    err = _refused("tcp+tls://" + relay.hosts, ca=server_only.files["ca"])
    assert "not issued for" in err.message and "127.0.0.2" in err.message, err.message
    caplog.set_level(logging.WARNING, logger="zklock")
    with zklock.Client("tcp+tls://" + relay.hosts, ca=server_only.files["ca"],
                       verify_certs=False) as c:
        _locks(c, path)
    assert any("verify_certs=False" in r.getMessage() for r in caplog.records), caplog.text
    # No warning names the Rust API's setting (Tls::danger_accept_any_server_name).
    assert not any("::" in r.getMessage() for r in caplog.records), caplog.text
    # The CA is still checked: without it the same connect is refused.
    err = _refused(relay.hosts, use_ssl=True, verify_certs=False)
    assert "not signed by a CA this client trusts" in err.message, err.message


def test_sasl_digest_md5_locks(sasl, path):
    options = {"mechanism": "DIGEST-MD5", "username": "bob", "password": "bobpw"}
    with zklock.Client(sasl.hosts, sasl_options=options) as c:
        _locks(c, path)


def test_sasl_with_a_wrong_password_is_auth_failed_naming_the_user(sasl):
    err = _refused(sasl.hosts, sasl_options={"mechanism": "DIGEST-MD5", "username": "bob",
                                             "password": "wrong"})
    assert "bob" in err.message, err.message


def test_a_sasl_server_without_credentials_is_auth_failed_pointing_at_sasl_options(sasl):
    err = _refused(sasl.hosts)
    assert "sasl_options=" in err.message, err.message


def test_auth_data_is_added_to_the_session_like_kazoo(zk_hosts):
    # A creator-only ACL needs an authenticated identity: auth_data gives it at connect. The
    # lock's own root: its missing parents are made creator-only too, and under the tests'
    # shared /pytest they would lock every other test out.
    path = "/pytest-acl-%s" % uuid.uuid4().hex
    with zklock.Client(zk_hosts, auth_data=[("digest", "alice:alicepw")]) as c:
        c.set_acl(zklock.Acl.CREATOR_ALL)
        _locks(c, path)


def test_other_sasl_mechanisms_are_refused_naming_digest_md5_and_gssapi():
    for mechanism in ("PLAIN", "SCRAM-SHA-256"):
        with pytest.raises(zklock.InvalidArgument) as caught:
            zklock.Client("127.0.0.1:1", sasl_options={"mechanism": mechanism,
                                                       "username": "bob", "password": "x"})
        message = caught.value.message
        assert "DIGEST-MD5 and GSSAPI (Kerberos) are the SASL mechanisms" in message, message
    # GSSAPI takes kazoo's keys for it, not a user and a password.
    for mechanism in ("GSSAPI", "gssapi"):
        with pytest.raises(zklock.InvalidArgument) as caught:
            zklock.Client("127.0.0.1:1", sasl_options={"mechanism": mechanism,
                                                       "username": "bob", "password": "x"})
        message = caught.value.message
        assert "unknown key(s) password, username" in message, message
        assert "principal, service, host with GSSAPI" in message, message


def test_contradictory_or_incomplete_settings_are_refused_before_connecting():
    cases = [
        (dict(use_ssl=False, ca="/tmp/ca.pem"), "use_ssl=False with ca"),
        (dict(keyfile="/tmp/k.pem"), "keyfile without certfile"),
        (dict(sasl_options={"mechanism": "DIGEST-MD5", "username": "bob"}), "needs password"),
        (dict(sasl_options={"mechanism": "DIGEST-MD5", "username": "bob", "password": "x",
                            "service": "zk"}), "unknown key(s) service"),
    ]
    for kwargs, words in cases:
        with pytest.raises(zklock.InvalidArgument) as caught:
            zklock.Client("127.0.0.1:1", **kwargs)
        assert words in caught.value.message, (kwargs, caught.value.message)
    with pytest.raises(TypeError):
        zklock.Client("127.0.0.1:1", auth_data="digest:alice:pw")
    with pytest.raises(TypeError):
        zklock.Client("127.0.0.1:1", use_ssl="yes")


def test_an_unreadable_ca_file_is_invalid_argument_naming_it(server_only, tmp_path):
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(zklock.InvalidArgument) as caught:
        zklock.Client(server_only.hosts, connect_timeout=CONNECT, ca=missing)
    assert str(missing) in caught.value.message, caught.value.message

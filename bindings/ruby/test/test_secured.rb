# frozen_string_literal: true

require_relative "test_helper"
require "pathname"
require "tmpdir"

# TLS (server-only and mutual) and SASL DIGEST-MD5 against real secured servers started by
# tools/testing_server.rs; each refusal is AuthFailed within the connect timeout, saying what
# to fix in this gem's keywords (never a Rust name).
class TestSecured < Minitest::Test
  include ZkTest

  CONNECT = 5

  def mutual
    TestServers.get("--tls", "need")
  end

  def server_only
    TestServers.get("--tls", "none")
  end

  def sasl_server
    TestServers.get("--sasl", "bob:bobpw")
  end

  def locks(c)
    lock = c.mutex(path)
    assert lock.acquire(timeout: 10)
    assert lock.held?
    lock.release
    refute lock.held?
    c.close
  end

  def refused(hosts, **options)
    started = monotonic
    e = assert_raises(ZkLock::AuthFailed) do
      ZkLock::Client.new(hosts, connect_timeout: CONNECT, **options)
    end
    assert_operator monotonic - started, :<, CONNECT + 3
    assert_equal 12, e.status
    assert_equal "ZKL_AUTH_FAILED", e.name
    refute_match(/::/, e.message, "a Rust name in the message")
    e
  end

  def test_mutual_tls_with_ca_cert_and_key_files_locks
    f = mutual.files
    locks(client(hosts: mutual.hosts, ca_file: f["ca"], cert_file: f["cert"], key_file: f["key"]))
    # A bare host list and tls: true.
    locks(client(hosts: mutual.address, tls: true, ca_file: f["ca"], cert_file: f["cert"],
                 key_file: f["key"]))
  end

  def test_a_cert_file_holding_the_key_too_needs_no_key_file
    f = mutual.files
    Dir.mktmpdir do |dir|
      both = File.join(dir, "client-and-key.pem")
      File.write(both, File.read(f["cert"]) + File.read(f["key"]))
      locks(client(hosts: mutual.hosts, ca_file: f["ca"], cert_file: Pathname(both)))
    end
  end

  def test_an_encrypted_key_takes_key_password
    skip "needs the openssl command" unless system("command -v openssl >/dev/null")
    f = mutual.files
    Dir.mktmpdir do |dir|
      encrypted = File.join(dir, "client.p8")
      assert system("openssl", "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", f["key"],
                    "-out", encrypted, "-passout", "pass:keypw")
      locks(client(hosts: mutual.hosts, ca_file: f["ca"], cert_file: f["cert"],
                   key_file: encrypted, key_password: "keypw"))
      [[nil, "key_password:"], ["wrong", "cannot be decrypted"]].each do |password, words|
        e = assert_raises(ZkLock::InvalidArgument) do
          ZkLock::Client.new(mutual.hosts, connect_timeout: CONNECT, ca_file: f["ca"],
                             cert_file: f["cert"], key_file: encrypted, key_password: password)
        end
        assert_includes e.message, words
        assert_includes e.message, encrypted
        refute_match(/::/, e.message)
      end
    end
  end

  def test_mutual_tls_without_a_client_certificate_is_auth_failed_naming_cert_file
    e = refused(mutual.hosts, ca_file: mutual.files["ca"])
    assert_includes e.message, "client certificate"
    assert_includes e.message, "cert_file:"
  end

  def test_server_only_tls_needs_only_the_ca
    locks(client(hosts: server_only.hosts, ca_file: server_only.files["ca"]))
  end

  def test_tls_without_the_servers_ca_is_auth_failed_naming_ca_file
    e = refused(server_only.address, tls: true)
    assert_includes e.message, "not signed by a CA this client trusts"
    assert_includes e.message, "ca_file:"
  end

  def test_a_server_certificate_for_another_name_is_refused_unless_verify_hostname_false
    # The server's certificate names 127.0.0.1 and localhost; through a relay on 127.0.0.2 the
    # client connects to a name the certificate does not carry.
    relay = Relay.new(server_only.address, "127.0.0.2")
    e = refused("tcp+tls://#{relay.hosts}", ca_file: server_only.files["ca"])
    assert_includes e.message, "not issued for"
    assert_includes e.message, "127.0.0.2"
    locks(client(hosts: "tcp+tls://#{relay.hosts}", ca_file: server_only.files["ca"],
                 verify_hostname: false))
    # The CA is still checked: without it the same connect is refused.
    e = refused(relay.hosts, tls: true, verify_hostname: false)
    assert_includes e.message, "not signed by a CA this client trusts"
  ensure
    relay&.cut
  end

  def test_sasl_digest_md5_locks
    locks(client(hosts: sasl_server.hosts, sasl: { username: "bob", password: "bobpw" }))
    locks(client(hosts: sasl_server.hosts,
                 sasl: { mechanism: "DIGEST-MD5", username: "bob", password: "bobpw" }))
  end

  def test_sasl_with_a_wrong_password_is_auth_failed_naming_the_user
    e = refused(sasl_server.hosts, sasl: { username: "bob", password: "wrong" })
    assert_includes e.message, "bob"
  end

  def test_a_sasl_server_without_credentials_is_auth_failed_pointing_at_sasl
    e = refused(sasl_server.hosts)
    assert_includes e.message, "sasl:"
  end

  def test_auth_digest_and_a_creator_only_acl
    # Its own root: missing parents are made creator-only too.
    @path = "/rbtest-acl-#{SecureRandom.hex(8)}"
    c = client(auth: [%w[digest alice:alicepw]], acl: :creator_all)
    locks(c)
    e = assert_raises(ZkLock::InvalidArgument) { client(acl: :creator_all).mutex(path) }
    refute_match(/::/, e.message)
  end

  def test_settings_are_checked_before_connecting
    [
      [{ sasl: { mechanism: "PLAIN", username: "a", password: "b" } }, /digest_md5 and :gssapi/],
      [{ sasl: { username: "a" } }, /needs password/],
      [{ sasl: { username: "a", password: "b", realm: "x" } }, /unknown key/],
      [{ tls: false, ca_file: "/x" }, /TLS settings need TLS/],
      [{ key_file: "/x" }, /without cert_file/],
      [{ session_timeout: 0.01 }, /out of range/],
      [{ session_timeout: 7200 }, /out of range/],
      [{ protocol: :zookeeper }, /:curator, :kazoo/],
      [{ acl: :everyone }, /:open/],
    ].each do |options, words|
      e = assert_raises(ZkLock::InvalidArgument, options.inspect) do
        ZkLock::Client.new("127.0.0.1:1", **options)
      end
      assert_match words, e.message
    end
    assert_raises(TypeError) { ZkLock::Client.new("127.0.0.1:1", sasl: "bob:pw") }
    assert_raises(TypeError) { ZkLock::Client.new("127.0.0.1:1", auth: "digest") }
    assert_raises(TypeError) { ZkLock::Client.new("127.0.0.1:1", session_timeout: "10") }
  end

  def test_an_unreadable_ca_file_is_invalid_argument_naming_it
    e = assert_raises(ZkLock::InvalidArgument) do
      ZkLock::Client.new(server_only.hosts, connect_timeout: CONNECT, ca_file: "/nonexistent/ca.pem")
    end
    assert_includes e.message, "/nonexistent/ca.pem"
  end
end

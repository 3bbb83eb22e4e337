# frozen_string_literal: true

require_relative "test_helper"

# Kerberos (SASL GSSAPI, sasl: { mechanism: :gssapi }) against a real MIT KDC and a server that
# requires it (tools/testing_server.rs --kerberos). Kerberos credentials are the process's
# (KRB5_CONFIG, KRB5_CLIENT_KTNAME, KRB5CCNAME), so each client is a Ruby process of its own.
# Needs a C library built with the sasl-gssapi feature: ZKL_GSSAPI_LIBRARY names one (else
# ZKLOCK_LIBRARY's is tried); skipped when the library has no GSSAPI.
class TestKerberos < Minitest::Test
  include ZkTest

  CLIENT = <<~'RUBY'
    require "zklock"
    hosts, path, principal = ARGV
    sasl = { mechanism: :gssapi }
    sasl[:principal] = principal unless principal.empty?
    begin
      zk = ZkLock::Client.new(hosts, session_timeout: 6, connect_timeout: 6, sasl: sasl,
                              acl: :creator_all)
    rescue ZkLock::Error => e
      puts "error=#{e.class.name}", "message=#{e.message}"
      exit
    end
    begin
      lock = zk.mutex(path)
      puts "token=#{lock.synchronize(timeout: 10) { lock.fencing_token }}"
    rescue ZkLock::Error => e
      puts "lock_error=#{e.class.name}", "lock_message=#{e.message}"
    end
  RUBY

  def kerberos
    TestServers.get("--kerberos", "alice", "--kerberos", "bob")
  end

  def env(server, keytab)
    library = ENV["ZKL_GSSAPI_LIBRARY"] || ENV["ZKLOCK_LIBRARY"]
    ENV.keys.grep(/\AKRB5/).to_h { |k| [k, nil] }.merge(
      "ZKLOCK_LIBRARY" => library, "KRB5_CONFIG" => server.files["krb5_conf"],
      "KRB5_CLIENT_KTNAME" => keytab, "KRB5CCNAME" => "MEMORY:zklock"
    )
  end

  def run_client(server, keytab, principal = "")
    out, err, status = Open3.capture3(env(server, keytab), RbConfig.ruby, "-I", GEM_LIB, "-e",
                                      CLIENT, server.hosts, path, principal)
    assert status.success?, out + err
    result = out.lines.to_h { |l| l.chomp.split("=", 2) }
    skip "the C library has no GSSAPI (build it with --features capi,sasl-gssapi)" if
      result["message"].to_s.include?("sasl-gssapi")
    result
  end

  def setup
    @path = "/rbtest-krb-#{SecureRandom.hex(8)}" # its own root: creator-only parents
  end

  def test_a_keytab_locks_under_a_creator_only_acl_and_another_principal_is_refused
    alice = run_client(kerberos, kerberos.files["keytab.alice"])
    assert_match(/\A\d+\z/, alice["token"].to_s, alice.inspect)
    bob = run_client(kerberos, kerberos.files["keytab.bob"])
    assert_includes bob["lock_message"].to_s, "sasl:bob@ZKLOCK.TEST", bob.inspect
  end

  def test_credentials_for_another_principal_than_asked_are_auth_failed
    result = run_client(kerberos, kerberos.files["keytab.bob"], "alice@ZKLOCK.TEST")
    assert_equal "ZkLock::AuthFailed", result["error"], result.inspect
    assert_includes result["message"], "for bob@ZKLOCK.TEST, not alice@ZKLOCK.TEST"
    refute_match(/::/, result["message"])
  end
end

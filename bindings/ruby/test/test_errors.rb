# frozen_string_literal: true

require_relative "test_helper"

# Errors: every failure a ZkLock::Error subclass carrying its status and the library's words;
# arguments checked before they reach C; and the README's example, run as written.
class TestErrors < Minitest::Test
  include ZkTest

  def test_an_unreachable_server_is_connection_loss_in_time
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] } # free, and nobody listens now
    started = monotonic
    e = assert_raises(ZkLock::ConnectionLoss) do
      ZkLock::Client.new("127.0.0.1:#{port}", connect_timeout: 2)
    end
    assert_operator monotonic - started, :<, 5
    assert_equal ZkLock::Native::CONNECTION_LOSS, e.status
    assert_equal "ZKL_CONNECTION_LOSS", e.name
    assert_includes e.message, port.to_s
    assert_kind_of StandardError, e
  end

  def test_bad_paths_are_invalid_argument
    c = client
    e = assert_raises(ZkLock::InvalidArgument) { c.mutex("no-slash") }
    assert_includes e.message, "no-slash"
    e = assert_raises(ZkLock::InvalidArgument) { c.mutex("/a\0b") }
    assert_match(/NUL/, e.message)
    assert_raises(TypeError) { c.mutex(nil) }
    assert_raises(ZkLock::InvalidArgument) { c.mutex("/bad\xff".b.force_encoding("UTF-8")) }
  end

  def test_timeouts_are_checked
    lock = client.mutex(path)
    assert_raises(ZkLock::InvalidArgument) { lock.acquire(timeout: -1) }
    assert_raises(ZkLock::InvalidArgument) { lock.acquire(timeout: Float::NAN) }
    assert_raises(TypeError) { lock.acquire(timeout: "1") }
    assert_raises(TypeError) { lock.acquire(timeout: true) }
    refute lock.held?
    assert lock.acquire(timeout: Float::INFINITY), "an infinite timeout waits forever"
    assert lock.acquire(timeout: 0.0001), "a reentrant acquire"
  end

  def test_errors_carry_status_and_message
    e = ZkLock::LockLost.new("the hold was lost")
    assert_equal 9, e.status
    assert_equal "ZKL_LOCK_LOST", e.name
    assert_equal "the hold was lost", e.message
    assert_equal ZkLock::Error, ZkLock::Error.for_status(99)
    assert_equal "ZKL_UNKNOWN_STATUS", ZkLock::Error.new("x", 99).name
  end

  def test_the_readme_example_runs
    readme = File.read(File.expand_path("../README.md", __dir__))
    example = readme[/## Example\n\n```ruby\n(.*?)```/m, 1]
    refute_nil example
    reports = []
    runner = Object.new
    runner.define_singleton_method(:write_report) { |fence:| reports << fence }
    runner.define_singleton_method(:puts) { |*| nil }
    code = example.sub('"127.0.0.1:2181"', hosts.inspect).sub('"/locks/nightly-report"', path.inspect)
    runner.instance_eval(code, "README.md")
    assert_equal 1, reports.size
    assert_kind_of Integer, reports.first
  end
end

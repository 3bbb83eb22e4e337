# frozen_string_literal: true

require_relative "test_helper"

# Each recipe the C API offers, through two clients of one server.
class TestRecipes < Minitest::Test
  include ZkTest

  def test_mutex_excludes_and_tokens_increase
    a = client.mutex(path)
    b = client.mutex(path)
    assert a.acquire(timeout: 5)
    assert a.held?
    assert_equal :held, a.hold_state
    first = a.fencing_token
    refute b.acquire(timeout: 0), "a second handle took a held mutex"
    refute b.acquire(timeout: 0.2)
    refute b.held?
    a.release
    second = b.synchronize(timeout: 5) { b.fencing_token }
    assert_operator second, :>, first
    assert_equal :none, b.hold_state
    assert_raises(ZkLock::NotHeld) { b.fencing_token }
    assert_raises(ZkLock::NotHeld) { b.release }
  end

  def test_synchronize_returns_the_block_value_and_releases_when_it_raises
    lock = client.mutex(path)
    assert_equal 42, lock.synchronize { 42 }
    refute lock.held?
    assert_raises(RuntimeError) { lock.synchronize { raise "boom" } }
    refute lock.held?
    assert_empty lock.participants
  end

  def test_synchronize_with_a_timeout_raises_timeout_error
    client.mutex(path).acquire
    other = client.mutex(path)
    e = assert_raises(ZkLock::TimeoutError) { other.synchronize(timeout: 0.2) { flunk } }
    assert_equal ZkLock::Native::TIMEOUT, e.status
    assert_equal "ZKL_TIMEOUT", e.name
    assert_kind_of ZkLock::Error, e
  end

  def test_mutex_is_reentrant_per_handle
    a = client.mutex(path)
    b = client.mutex(path)
    a.synchronize do
      a.synchronize { assert a.held? }
      assert a.held?, "the outer hold ended with the inner one"
      refute b.try_acquire
    end
    assert b.try_acquire
  end

  def test_semaphore_mutex_is_not_reentrant
    a = client.semaphore_mutex(path)
    b = client.semaphore_mutex(path)
    a.synchronize do
      e = assert_raises(ZkLock::WouldDeadlock) { a.acquire(timeout: 1) }
      assert_match(/not reentrant/, e.message)
      refute b.acquire(timeout: 0)
    end
    assert b.acquire(timeout: 1)
  end

  def test_read_write_lock
    r1 = client.read_lock(path)
    r2 = client.read_lock(path)
    w = client.write_lock(path)
    assert r1.acquire(timeout: 1)
    assert r2.acquire(timeout: 1), "two readers share the lock"
    refute w.acquire(timeout: 0.1), "a writer got in beside readers"
    r1.release
    r2.release
    assert w.acquire(timeout: 1)
    refute r1.acquire(timeout: 0.1), "a reader got in beside the writer"
    w.release
  end

  def test_rwlock_halves_downgrade_but_never_upgrade
    read, write = client.rwlock(path)
    assert_equal %w[read_lock write_lock], [read.kind, write.kind]
    write.synchronize do
      assert read.acquire(timeout: 1), "the write holder could not take the read half"
    end
    assert read.held?
    assert_raises(ZkLock::WouldDeadlock) { write.acquire(timeout: 1) }
    read.release
  end

  def test_semaphore_leases
    sem = Array.new(3) { client.semaphore(path, 2) }
    assert sem[0].acquire(timeout: 1)
    assert sem[1].acquire(timeout: 1)
    refute sem[2].acquire(timeout: 0.2), "a third lease of two"
    assert_equal 2, sem[2].participants.count(&:holder?)
    sem[0].release
    assert sem[2].acquire(timeout: 1)
    assert_raises(ZkLock::InvalidArgument) { client.semaphore(path, 0) }
  end

  def test_semaphore_a_handle_filling_it_would_deadlock
    sem = client.semaphore(path, 1)
    sem.acquire
    assert_raises(ZkLock::WouldDeadlock) { sem.acquire(timeout: 1) }
  end

  def test_simple_lock
    a = client.simple_lock(path)
    b = client.simple_lock(path)
    a.synchronize do
      refute b.acquire(timeout: 0.1)
      assert_equal [path], a.participants.map(&:node).map { |n| n.start_with?("/") ? n : path }
    end
    assert b.acquire(timeout: 1)
  end

  def test_kazoo_protocol_and_holder_id
    c = client(protocol: :kazoo, holder_id: "ruby-test")
    assert_equal "ruby-test", c.holder_id
    lock = c.mutex(path)
    lock.synchronize do
      p = lock.participants.first
      assert_equal "ruby-test", p.holder_id
      refute p.node.start_with?("_c_"), "a kazoo lock node named as Curator names it: #{p.node}"
    end
  end

  def test_cancel_from_another_thread
    client.mutex(path).acquire
    lock = client.mutex(path)
    waiter = Thread.new do
      lock.acquire
    rescue ZkLock::Cancelled => e
      e
    end
    wait_for("the waiter's node") { lock.participants.size == 2 }
    lock.cancel
    assert_kind_of ZkLock::Cancelled, waiter.value
    assert_equal 1, lock.participants.size, "the cancelled acquire left its node"
  end

  def test_on_lost_runs_when_the_session_ends
    c = client
    lock = c.mutex(path)
    lost = Queue.new
    lock.acquire
    watcher = lock.on_lost { |l| lost << l }
    # The session ends under the hold (as if it expired): zkl_client_close without the gem's
    # Client#close, which would release the lock first.
    c.instance_variable_get(:@handle).use { |ptr| ZkLock::Native.zkl_client_close(ptr) }
    assert_same lock, Timeout.timeout(10) { lost.pop }
    refute lock.held?
    assert_includes %i[lost uncertain], lock.hold_state
    assert_raises(ZkLock::LockLost) { lock.release }
    assert watcher.join(5)
  end

  def test_on_lost_runs_when_the_server_goes_silent
    # The connection is cut: the hold stays believed while its lease runs (a tenth short of
    # the session timeout), then on_lost runs, before the server could hand the lock on.
    relay = Relay.new(hosts)
    c = client(hosts: relay.hosts, session_timeout: 2)
    lock = c.mutex(path)
    lost = Queue.new
    assert lock.acquire(timeout: 5)
    lock.on_lost { |l| lost << [l.hold_state, monotonic] }
    cut_at = monotonic
    relay.cut
    state, at = Timeout.timeout(10) { lost.pop }
    assert_includes %i[uncertain lost], state
    assert_operator at - cut_at, :<, 2.0, "on_lost ran after the session could have expired"
    refute lock.held?
  ensure
    relay&.cut
  end

  def test_on_lost_watch_ends_quietly_on_release
    lock = client.mutex(path)
    lock.acquire
    called = false
    watcher = lock.on_lost { called = true }
    lock.release
    assert watcher.join(5), "the watch did not end with the release"
    refute called
  end

  def test_closed_lock_and_client
    c = client
    lock = c.mutex(path)
    lock.acquire
    other = client.mutex(path)
    c.close
    assert c.closed?
    assert lock.closed?
    refute lock.held?
    e = assert_raises(ZkLock::Closed) { lock.acquire }
    assert_match(/closed/, e.message)
    assert_raises(ZkLock::Closed) { c.mutex(path) }
    assert other.acquire(timeout: 5), "the closed client's node stayed"
    c.close # idempotent
  end

  def test_client_open_with_a_block_closes_it
    held = nil
    ZkLock::Client.open(hosts) do |zk|
      held = zk.mutex(path)
      held.acquire
      assert_equal :connected, zk.session_state
    end
    assert held.closed?
    assert client.mutex(path).acquire(timeout: 5)
  end
end

# frozen_string_literal: true

require_relative "test_helper"

# A blocking acquire ends at once when the waiting thread is interrupted (Ctrl-C, Thread#raise,
# Thread#kill, Timeout.timeout), leaving no node; other threads run while it waits.
class TestInterrupts < Minitest::Test
  include ZkTest

  # A lock at +path+ held by another client, and a second handle that will wait for it.
  def held_and_waiter
    holder = client.mutex(path)
    assert holder.acquire(timeout: 5)
    [holder, client.mutex(path)]
  end

  def wait_until_queued(lock, n = 2)
    wait_for("#{n} nodes at #{path}") { lock.participants.size == n }
  end

  def test_other_threads_run_while_an_acquire_blocks
    _holder, waiter = held_and_waiter
    ticks = 0
    ticker = Thread.new do
      loop do
        ticks += 1
        sleep 0.01
      end
    end
    started = monotonic
    refute waiter.acquire(timeout: 1.0)
    elapsed = monotonic - started
    ticker.kill
    figure("ticker ticks while acquire(timeout: 1.0) blocked #{format('%.2f', elapsed)} s: " \
           "#{ticks} (100 if nothing stalled it)")
    assert_operator elapsed, :>=, 1.0
    # A ticker that the GVL stalled would tick once; a busy machine (2 shared cores) may delay
    # some of its wakeups, so the bound is loose: the figure above is the measurement.
    assert_operator ticks, :>=, 20, "the ticker stalled while the acquire blocked"
  end

  def test_thread_raise_ends_a_blocking_acquire_at_once
    holder, waiter = held_and_waiter
    interrupted = Queue.new
    t = Thread.new do
      waiter.acquire
      :acquired
    rescue Interrupt
      interrupted << monotonic
      :interrupted
    end
    wait_until_queued(waiter)
    sent = monotonic
    t.raise(Interrupt)
    assert_equal :interrupted, t.value
    took = interrupted.pop - sent
    figure("Thread#raise(Interrupt) -> acquire raised in #{format('%.1f', took * 1000)} ms")
    assert_operator took, :<, 0.5
    assert_equal 1, holder.participants.size, "the interrupted acquire left its node"
    refute waiter.held?
    holder.release
    assert waiter.acquire(timeout: 5), "the handle is unusable after an interrupted acquire"
  end

  def test_timeout_timeout_ends_a_blocking_acquire_at_once
    holder, waiter = held_and_waiter
    started = monotonic
    assert_raises(Timeout::Error) { Timeout.timeout(0.3) { waiter.acquire } }
    took = monotonic - started
    figure("Timeout.timeout(0.3) { acquire } raised after #{format('%.1f', took * 1000)} ms")
    assert_operator took, :<, 0.8
    assert_equal 1, holder.participants.size, "the timed-out acquire left its node"
  end

  def test_timeout_timeout_inside_synchronize_releases_both
    a = client.mutex(path)
    b = client.mutex(path)
    assert_raises(Timeout::Error) { Timeout.timeout(0.3) { a.synchronize { b.acquire } } }
    refute a.held?
    refute b.held?
    assert_empty a.participants
  end

  def test_thread_kill_ends_a_blocking_acquire
    holder, waiter = held_and_waiter
    t = Thread.new { waiter.acquire }
    wait_until_queued(waiter)
    sent = monotonic
    t.kill
    assert t.join(2), "Thread#kill did not end the acquire"
    figure("Thread#kill -> thread ended in #{format('%.1f', (monotonic - sent) * 1000)} ms")
    assert_equal 1, holder.participants.size
  end

  def test_an_interrupt_as_the_lock_arrives_gives_it_back
    # The holder lets go as the waiter is interrupted: whichever wins, nothing stays held.
    10.times do
      holder, waiter = held_and_waiter
      t = Thread.new do
        waiter.acquire
      rescue Interrupt
        nil
      end
      wait_until_queued(waiter)
      holder.release
      t.raise(Interrupt)
      t.join
      wait_for("the lock free or held by the waiter") do
        ps = holder.participants
        ps.empty? || (ps.size == 1 && waiter.held?)
      end
      waiter.release if waiter.held?
      assert_empty holder.participants
      @path = nil
    end
  end

  def test_timeouts_landing_anywhere_in_synchronize_leave_nothing_held
    # Timeout.timeout fires at random moments: before the acquire, while it waits, as the
    # holder lets go, inside the block. Whatever the moment, nothing stays held.
    holder = client.mutex(path)
    waiter = client.mutex(path)
    rng = Random.new(40)
    40.times do
      holder.acquire
      letting_go = Thread.new do
        sleep rng.rand(0.02)
        holder.release
      end
      begin
        Timeout.timeout(rng.rand(0.03)) { waiter.synchronize { sleep rng.rand(0.01) } }
      rescue Timeout::Error
        nil
      end
      letting_go.join
      refute waiter.held?, "the interrupted synchronize left its hold"
      assert_empty waiter.participants
    end
  end

  def test_ctrl_c_ends_a_blocking_acquire_in_the_main_thread_and_leaves_no_node
    holder = client.mutex(path)
    assert holder.acquire(timeout: 5)
    script = <<~RUBY
      require "zklock"
      $stdout.sync = true
      client = ZkLock::Client.new(ARGV.fetch(0, #{hosts.inspect}), session_timeout: 30)
      lock = client.mutex(#{path.inspect})
      ticks = 0
      Thread.new { loop { ticks += 1; sleep 0.01 } }
      puts "waiting"
      begin
        lock.acquire
        puts "acquired"
      rescue Interrupt
        puts "interrupted \#{Process.clock_gettime(Process::CLOCK_MONOTONIC)} \#{ticks}"
        raise
      end
    RUBY
    child(script) do |_stdin, stdout, waiter, err|
      assert_equal "waiting", line_of(stdout)
      wait_until_queued(holder)
      blocked_since = monotonic
      wait_for("the child to block a while") { monotonic - blocked_since > 0.5 }
      sent = monotonic
      Process.kill(:INT, waiter.pid)
      word, at, ticks = line_of(stdout).split
      assert_equal "interrupted", word
      took = Float(at) - sent
      assert TestServers.wait_pid(waiter, 10), "the child did not exit after Ctrl-C"
      exited = monotonic - sent
      figure("Ctrl-C -> Interrupt raised from acquire in #{format('%.1f', took * 1000)} ms, " \
             "process gone in #{format('%.1f', exited * 1000)} ms; the child's ticker ticked " \
             "#{ticks} times while it blocked #{format('%.2f', sent - blocked_since)}+ s")
      assert_operator took, :<, 0.5
      refute waiter.value.success?
      assert_match(/Interrupt/, err.value)
      assert_operator Integer(ticks), :>=, 10, "the child's ticker stalled while it blocked"
    end
    assert_equal 1, holder.participants.size, "the interrupted child's node is left"
  end
end

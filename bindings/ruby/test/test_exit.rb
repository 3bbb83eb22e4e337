# frozen_string_literal: true

require_relative "test_helper"

# A process that ends holding a lock (its end, exit, Ctrl-C, SIGTERM, an uncaught exception)
# leaves no node: its clients are closed at exit, so the lock is free at once, not a session
# timeout (30 s here) later. The checks run right as the child is gone.
class TestExit < Minitest::Test
  include ZkTest

  def run_child(ending, extra = "")
    observer = client.mutex(path)
    script = <<~RUBY
      require "zklock"
      $stdout.sync = true
      client = ZkLock::Client.new(#{hosts.inspect}, session_timeout: 30)
      lock = client.mutex(#{path.inspect})
      lock.acquire
      #{extra}
      puts "held \#{lock.fencing_token}"
      #{ending}
    RUBY
    started = nil
    child(script) do |stdin, stdout, waiter, err|
      assert_match(/\Aheld \d+\z/, line_of(stdout))
      started = monotonic
      yield waiter, stdin if block_given?
      assert TestServers.wait_pid(waiter, 15), "the child did not exit (#{ending})"
      refute_match(/Error|warning|\[BUG\]/i, err.value.to_s.lines.grep_v(/Interrupt|SignalException|boom|from /).join)
    end
    gone = monotonic - started
    assert_empty observer.participants, "the child's node outlived it (#{ending})"
    # The lock is free for another at once.
    assert observer.acquire(timeout: 0), "the lock was not free after the child's end"
    gone
  end

  def test_normal_end_holding
    run_child("")
  end

  def test_exit_holding_with_a_thread_waiting_in_acquire
    # Another thread of the child waits on a second handle: the exit cancels it, and the
    # process ends at once, not when that acquire would have ended.
    took = run_child("exit 0", 'Thread.new { client.mutex(lock.path).acquire }; ' \
                               'sleep 0.01 until lock.participants.size == 2')
    assert_operator took, :<, 10
  end

  def test_normal_end_holding_after_clients_were_closed_or_dropped_and_collected
    # The exit hook once crashed the interpreter ("[BUG] Segmentation fault" in Client#close):
    # Ruby 3.1's ObjectSpace::WeakMap#keys handed it a client already collected. It now closes
    # the library handles still open, never their owners.
    run_child("", "40.times { |i| c = ZkLock::Client.new(#{hosts.inspect}); " \
                  "c.mutex(#{path.inspect} + '-' + i.to_s); c.close if i.even? }; " \
                  "GC.start; 2000.times { Object.new }")
  end

  def test_uncaught_exception_holding
    run_child('raise "boom"')
  end

  def test_ctrl_c_holding
    took = run_child("sleep") { |waiter, _| Process.kill(:INT, waiter.pid) }
    figure("Ctrl-C while holding: the child gone, its node deleted, in #{format('%.1f', took * 1000)} ms")
  end

  def test_sigterm_holding
    run_child("sleep") { |waiter, _| Process.kill(:TERM, waiter.pid) }
  end

  def test_ctrl_c_inside_synchronize
    observer = client.mutex(path)
    script = <<~RUBY
      require "zklock"
      $stdout.sync = true
      ZkLock::Client.open(#{hosts.inspect}, session_timeout: 30) do |zk|
        zk.mutex(#{path.inspect}).synchronize do
          puts "held"
          sleep
        end
      end
    RUBY
    child(script) do |_stdin, stdout, waiter, _err|
      assert_equal "held", line_of(stdout)
      Process.kill(:INT, waiter.pid)
      assert TestServers.wait_pid(waiter, 15)
    end
    assert_empty observer.participants
  end
end

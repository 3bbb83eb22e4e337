# frozen_string_literal: true

require_relative "test_helper"

# fork: a child inherits the parent's clients and locks inert (their calls raise Closed) and its
# exit releases nothing of the parent's, even while parent threads were inside the library as
# it forked (an on_lost watch, a waiting acquire).
class TestFork < Minitest::Test
  include ZkTest

  def test_a_forked_child_leaves_the_parents_hold_alone
    skip "no fork here" unless Process.respond_to?(:fork)
    lock = client.mutex(path)
    lock.acquire
    lock.on_lost { nil } # a watcher thread inside the library as the child is made
    waiting = client.mutex(path)
    waiter = Thread.new do
      waiting.acquire
    rescue ZkLock::Cancelled
      nil
    end
    wait_for("the waiter's node") { lock.participants.size == 2 }
    token = lock.fencing_token
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      out = []
      begin
        lock.acquire(timeout: 0)
        out << "acquired"
      rescue ZkLock::Closed => e
        out << (e.message.include?("fork") ? "closed-fork" : "closed:#{e.message}")
      end
      out << (lock.held? ? "held" : "not-held")
      begin
        ZkLock::Client.new(hosts, connect_timeout: 2)
        out << "connected"
      rescue ZkLock::Error => e
        out << e.class.name
      end
      writer.puts(out.join(" "))
      writer.close
      # The child ends as a program does: its at_exit hooks run (the gem's closes every client).
      exit(0)
    end
    writer.close
    waited = Process.detach(pid)
    assert waited.join(20), "the forked child did not exit (its at_exit waited for the parent's threads?)"
    assert waited.value.success?
    assert_equal "closed-fork not-held ZkLock::Closed", reader.read.strip
    assert lock.held?, "the child's exit released the parent's hold"
    assert_equal token, lock.fencing_token
    assert_equal 2, lock.participants.size
    waiting.cancel
    waiter.join
  ensure
    reader&.close
  end
end

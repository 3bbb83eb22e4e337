# frozen_string_literal: true

# zklock: distributed locks on Apache ZooKeeper (fair mutex, read-write lock, semaphore,
# simple lock), compatible with Apache Curator's and kazoo's lock nodes, over the zklock C
# library (libzklock) through Fiddle.
#
#   require "zklock"
#
#   ZkLock::Client.open("127.0.0.1:2181") do |zk|
#     lock = zk.mutex("/locks/nightly-report")
#     lock.synchronize(timeout: 10) do
#       write_report(fence: lock.fencing_token)
#     end
#   end
module ZkLock
  # Every library handle not freed yet (Handle#file_in): what the exit hook closes.
  @open_handles = {}
  @at_exit_mu = Mutex.new
  @at_exit = false

  class << self
    # Connects: Client.open(hosts, **options), with or without a block.
    def connect(hosts, **options, &block)
      Client.open(hosts, **options, &block)
    end

    # @api private
    attr_reader :open_handles

    # @api private: a client opened, closed at exit unless closed before. The exit hook is
    # registered with the first client (again for the first one after it ran): an at_exit
    # registered at require time would run before those of code that requires the gem later,
    # or that makes its clients in an at_exit of its own (minitest runs its tests in one).
    def opened(_client)
      @at_exit_mu.synchronize do
        unless @at_exit
          @at_exit = true
          at_exit { close_all_at_exit }
        end
      end
    end

    # @api private
    # At exit (a normal end, exit, an uncaught exception, Ctrl-C), while the process's threads
    # still run: every lock and client still open is closed, so its holds are released and its
    # nodes deleted at once rather than a session timeout later, and acquires still waiting in
    # other threads are cancelled (Ruby waits for its threads before the process ends, and a
    # thread in a native call cannot be killed). The locks go first: a client's session ends
    # once it and its locks are freed.
    def close_all_at_exit
      @at_exit_mu.synchronize { @at_exit = false }
      @open_handles.keys.partition(&:lock?).flatten.each do |handle|
        handle.close
      rescue StandardError
        nil
      end
    end
  end
end

require_relative "zklock/version"
require_relative "zklock/native"
require_relative "zklock/errors"
require_relative "zklock/args"
require_relative "zklock/handle"
require_relative "zklock/attempt"
require_relative "zklock/lock"
require_relative "zklock/client"


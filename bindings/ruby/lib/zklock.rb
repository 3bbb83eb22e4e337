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
  @clients = ObjectSpace::WeakMap.new
  @clients_mu = Mutex.new
  @exiting = false

  class << self
    # Connects: Client.open(hosts, **options), with or without a block.
    def connect(hosts, **options, &block)
      Client.open(hosts, **options, &block)
    end

    # @api private
    def exiting?
      @exiting
    end

    # @api private: the clients still open, closed at exit.
    def opened(client)
      @clients_mu.synchronize { @clients[client] = true }
    end

    # @api private
    def closed(client)
      @clients_mu.synchronize { @clients.delete(client) if @clients.respond_to?(:delete) }
    end

    # @api private
    # At exit (a normal end, exit, an uncaught exception, Ctrl-C), while the process's threads
    # still run: every client still open is closed, so its holds are released and its nodes
    # deleted at once rather than a session timeout later, and acquires still waiting in other
    # threads are cancelled (Ruby waits for its threads before the process ends, and a thread
    # in a native call cannot be killed).
    def close_all_at_exit
      @exiting = true
      clients = @clients_mu.synchronize { @clients.keys }
      clients.each do |client|
        client.close
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

at_exit { ZkLock.close_all_at_exit }

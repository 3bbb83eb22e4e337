# frozen_string_literal: true

# The gem's tests run against real ZooKeeper servers, never a mock: each is started by the
# project's own starter, tools/testing_server.rs (ZKL_TESTING_SERVER_BIN, else its debug build
# in the checkout's target/, built with cargo if missing), once per test process, and stopped
# when the tests end: closing its standard input ends it (and its server), so a test process
# that dies any way at all leaves no server behind. ZKLOCK_TEST_SERVER=127.0.0.1:PORT names a
# server to use instead for the plain tests.
#
# The C library: ZKLOCK_LIBRARY (scripts/test-ruby.sh sets it), else target/release/libzklock.so.

require "minitest/autorun"
require "open3"
require "rbconfig"
require "securerandom"
require "socket"
require "timeout"

CHECKOUT = File.expand_path("../../..", __dir__)
GEM_LIB = File.expand_path("../lib", __dir__)
ENV["ZKLOCK_LIBRARY"] ||= File.join(ENV.fetch("CARGO_TARGET_DIR", File.join(CHECKOUT, "target")),
                                    "release", "libzklock.so")
$LOAD_PATH.unshift(GEM_LIB)
require "zklock"

module TestServers
  # One server started by tools/testing_server.rs with +args+: +hosts+ is its connect string
  # (tcp+tls://127.0.0.1:PORT for TLS), +files+ what else it printed (ca, cert, key: PEM files).
  class Server
    attr_reader :hosts, :files

    def initialize(args)
      @args = args
      @stdin, @stdout, @stderr, @wait = Open3.popen3(TestServers.binary, *args)
      @stderr_lines = []
      @drain = Thread.new { @stderr.each_line { |l| @stderr_lines << l } }
      lines = []
      # Certificates are made and a JVM started: two minutes is plenty, even on a busy machine.
      deadline = now + 120
      while (line = read_line(deadline))
        break if line.empty?

        lines << line
      end
      if lines.empty?
        stop
        raise "testing_server #{args.join(' ')} did not start: #{@stderr_lines.last(20).join}"
      end
      @hosts = lines.first
      @files = lines.drop(1).to_h { |l| l.split("=", 2) }
    end

    def address
      @hosts.split("://", 2).last
    end

    # Closing its stdin ends it (it stops its server); killed if it lingers.
    def stop
      @stdin.close unless @stdin.closed?
      unless TestServers.wait_pid(@wait, 30)
        Process.kill(:KILL, @wait.pid)
        @wait.join
      end
      @drain.join(5)
    rescue Errno::ESRCH
      nil
    end

    private

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def read_line(deadline)
      buf = +""
      loop do
        left = deadline - now
        return nil if left <= 0 || !IO.select([@stdout], nil, nil, left)

        c = @stdout.read_nonblock(1, exception: false)
        return nil if c.nil?
        next if c == :wait_readable
        return buf if c == "\n"

        buf << c
      end
    end
  end

  @servers = {}
  @mu = Mutex.new

  class << self
    def binary
      explicit = ENV["ZKL_TESTING_SERVER_BIN"]
      return explicit if explicit && !explicit.empty?

      target = ENV.fetch("CARGO_TARGET_DIR", File.join(CHECKOUT, "target"))
      bin = File.join(target, "debug", "examples", "testing_server")
      return bin if File.executable?(bin)

      features = ENV.fetch("ZKL_FEATURES", "testing,cli,header")
      out, status = Open3.capture2e("nice", "cargo", "build", "--quiet", "--features", features,
                                    "--example", "testing_server", chdir: CHECKOUT)
      raise "cargo build --example testing_server failed:\n#{out}" unless status.success?

      bin
    end

    # A server started with +args+, once per test process.
    def get(*args)
      @mu.synchronize { @servers[args] ||= Server.new(args) }
    end

    # The plain server: ZKLOCK_TEST_SERVER, else one of ours.
    def plain
      shared = ENV["ZKLOCK_TEST_SERVER"]
      return shared if shared && !shared.empty?

      get.hosts
    end

    def stop_all
      @mu.synchronize { @servers.each_value(&:stop) }
    end

    # Waits up to +seconds+ for a process (a Process::Waiter); true if it ended.
    def wait_pid(waiter, seconds)
      !waiter.join(seconds).nil?
    end
  end
end

Minitest.after_run { TestServers.stop_all }

module ZkTest
  def hosts
    TestServers.plain
  end

  # A lock path of this test alone.
  def path
    @path ||= "/rbtest/#{SecureRandom.hex(8)}"
  end

  def client(**options)
    c = ZkLock::Client.new(options.delete(:hosts) || hosts, **options)
    (@clients ||= []) << c
    c
  end

  def teardown
    (@clients || []).each(&:close)
    super
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Waits for the block to be truthy (polling, not a fixed sleep), failing after +seconds+.
  def wait_for(what, seconds: 10)
    deadline = monotonic + seconds
    loop do
      value = yield
      return value if value
      flunk "timed out after #{seconds} s waiting for #{what}" if monotonic > deadline

      sleep 0.01
    end
  end

  # The sequences of the nodes at the lock path, seen through +lock+ (any lock on the path).
  def nodes(lock)
    lock.participants.map(&:node)
  end

  # A figure worth reading in the test output (the interrupt latencies, the ticks).
  def figure(text)
    puts "\n  figure: #{text}"
  end

  # A Ruby child process running +script+ with the gem; yields [stdin, stdout, waiter] and kills
  # it at the end if it is still there. SIGINT is at Ruby's default in the child (Interrupt), as
  # in a terminal's program: a shell's background job (scripts/test.sh runs these tests in one)
  # ignores SIGINT, and Ruby started with SIGINT ignored keeps ignoring it.
  def child(script, env: {})
    cmd = [RbConfig.ruby, "-I", GEM_LIB, "-e", 'Signal.trap("INT", "DEFAULT")', "-e", script]
    Open3.popen3(env, *cmd) do |stdin, stdout, stderr, waiter|
      err = Thread.new { stderr.read }
      begin
        yield stdin, stdout, waiter, err
      ensure
        if waiter.alive?
          Process.kill(:KILL, waiter.pid)
          waiter.join
        end
      end
    end
  end

  # The next line of a child's stdout within +seconds+.
  def line_of(io, seconds: 30)
    deadline = monotonic + seconds
    buf = +""
    loop do
      left = deadline - monotonic
      flunk "no line from the child within #{seconds} s (got #{buf.inspect})" if left <= 0
      next unless IO.select([io], nil, nil, left)

      c = io.read_nonblock(1, exception: false)
      flunk "the child closed its stdout (got #{buf.inspect})" if c.nil?
      next if c == :wait_readable
      return buf if c == "\n"

      buf << c
    end
  end
end

# A TCP relay to a real server that a test can cut, as if the server stopped: every relayed
# connection is closed and new ones are refused. +bind+: the loopback address it listens on
# (127.0.0.2 reaches the server by a name its certificate does not carry).
class Relay
  attr_reader :hosts

  def initialize(target, bind = "127.0.0.1")
    host, port = target.split("://", 2).last.split(":")
    @target = [host, Integer(port)]
    @listener = TCPServer.new(bind, 0)
    @hosts = "#{bind}:#{@listener.addr[1]}"
    @mu = Mutex.new
    @socks = []
    @cut = false
    @acceptor = Thread.new { accept_loop }
    @acceptor.report_on_exception = false
  end

  def cut
    socks = @mu.synchronize do
      @cut = true
      s = @socks
      @socks = []
      s
    end
    @listener.close unless @listener.closed?
    socks.each do |s|
      s.close
    rescue IOError
      nil
    end
    @acceptor.join(5)
  end

  private

  def accept_loop
    loop do
      client = @listener.accept
      server = TCPSocket.new(*@target)
      keep = @mu.synchronize { @socks.push(client, server) unless @cut }
      unless keep
        [client, server].each(&:close)
        return
      end
      [[client, server], [server, client]].each do |a, b|
        t = Thread.new { pump(a, b) }
        t.report_on_exception = false
      end
    end
  rescue IOError, SystemCallError
    nil
  end

  def pump(from, to)
    loop { to.write(from.readpartial(65_536)) }
  rescue IOError, SystemCallError
    [from, to].each do |s|
      s.close
    rescue IOError
      nil
    end
  end
end

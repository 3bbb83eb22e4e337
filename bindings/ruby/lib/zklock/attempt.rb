# frozen_string_literal: true

module ZkLock
  # @api private
  # One blocking C acquire, run on a Ruby thread of its own (Fiddle lets go of the GVL during
  # the call) while the caller waits on Thread#join, which Ctrl-C (Interrupt), Thread#raise,
  # Thread#kill and Timeout.timeout all interrupt at once. A native call cannot be interrupted
  # (Ruby defers the exception until it returns), so the caller gives the attempt up instead:
  # before the acquire begins (it then never begins), while it waits (its own cancel scope ends
  # it, zkl_lock_acquire_in, and no other acquire of the handle), or as it returns. Whoever owns
  # the outcome gives back a hold it got: the attempt's thread, once given up; else the caller.
  class Attempt
    attr_reader :status

    def initialize(lock, handle, millis)
      @lock = lock
      @handle = handle
      @millis = millis
      @mu = Mutex.new
      @begun = false     # the C acquire may be under way
      @over = false      # its outcome is known (or it never began)
      @given_up = false
      @given_back = false
      @status = nil
      @error = nil
      out = Native.out_pointer
      ZkLock.check(Native.call(:zkl_cancel_scope_new, out))
      @scope = Native.read_pointer(out)
      @thread = Thread.new { run }
      @thread.name = "zklock-acquire"
      @thread.report_on_exception = false
    end

    # Waits for the outcome: the acquire's status, or the exception its call raised. Anything
    # that unwinds the waiting thread meanwhile (Interrupt, Thread#raise, Thread#kill, the throw
    # of Timeout.timeout: an ensure sees them all, a rescue not the last two) gives the acquire
    # up, waits for it to end and for what it got to be given back (further interruptions are
    # held back until then), and goes on.
    def wait
      waited = false
      @thread.join
      waited = true
      raise @error if @error

      @status
    ensure
      unless waited
        Thread.handle_interrupt(Object => :never) do
          mine = give_up
          @thread.join
          give_back if mine
        end
      end
    end

    private

    def run
      Thread.handle_interrupt(Object => :never) do
        status = nil
        error = nil
        start = @mu.synchronize do
          if @given_up
            @status = Native::Failure.new(Native::CANCELLED, "cancelled before the acquire began")
            @over = true
            false
          else
            @begun = true
          end
        end
        if start
          # From here a cancel of the scope ends this acquire, and this one alone (sticky: one
          # sent before the library sees the acquire begin ends it at once).
          begin
            status = @handle.use do |ptr|
              Native.call(:zkl_lock_acquire_in, ptr, @millis, @scope)
            end
          rescue Exception => e # rubocop:disable Lint/RescueException -- for the waiter
            error = e
          end
          unwanted = @mu.synchronize do
            @status = status
            @error = error
            @over = true
            @given_up
          end
          give_back if unwanted
        end
      ensure
        scope = @mu.synchronize do
          @over = true # give_up no longer touches the scope
          s = @scope
          @scope = nil
          s
        end
        Native.zkl_cancel_scope_free(scope) if scope
      end
    end

    # The outcome is no longer wanted: the acquire is cancelled (or never begins), and its
    # thread gives back what it gets; false then. True if the acquire was over before: the
    # outcome is the caller's, who gives it back.
    def give_up
      @mu.synchronize do
        return !@given_up if @over

        @given_up = true
        Native.zkl_cancel_scope_cancel(@scope) if @begun
        false
      end
    end

    # Releases the hold the acquire got, if it got one (errors of that release, say a hold lost
    # meanwhile, are dropped: nobody wants this hold).
    def give_back
      return unless @status == Native::OK && !@given_back

      @given_back = true
      begin
        @lock.release
      rescue Error
        nil
      end
    end
  end
end

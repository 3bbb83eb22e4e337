# frozen_string_literal: true

module ZkLock
  # @api private
  # One C acquire of a lock. A blocking one runs on a Ruby thread of its own (Fiddle lets go of
  # the GVL during the call) while the caller waits in Thread#join, which Ctrl-C (Interrupt),
  # Thread#raise, Thread#kill and Timeout.timeout all interrupt at once. A native call cannot
  # be interrupted (Ruby holds the exception back until it returns), so the caller gives the
  # attempt up instead (#finish): before the acquire begins (it then never begins), while it
  # waits (its own cancel scope ends it, zkl_lock_acquire_in, and no other acquire of the
  # handle), or as it returns; and a hold it got that the caller has not claimed is given back.
  #
  #   attempt = Attempt.new(lock, handle, millis)
  #   begin
  #     attempt.start
  #     status = attempt.wait          # interruptible
  #     ... attempt.claim              # the hold is the caller's from here
  #   ensure
  #     attempt.finish                 # however the caller got here
  #   end
  class Attempt
    def initialize(lock, handle, millis)
      @lock = lock
      @handle = handle
      @millis = millis
      @mu = Mutex.new
      @thread = nil
      @scope = nil
      @begun = false     # the C acquire may be under way
      @over = false      # its outcome is known (or it never began)
      @given_up = false
      @claimed = false
      @given_back = false
      @status = nil
      @error = nil
    end

    # Starts the acquire: a try (0 ms) at once on this thread, a wait on a thread of its own.
    def start
      Thread.handle_interrupt(Object => :never) do
        if @millis.zero?
          # Returns at once: nothing to interrupt; recorded before an interruption can land.
          @status = @handle.use { |ptr| Native.call(:zkl_lock_acquire, ptr, 0) }
          @over = true
        else
          out = Native.out_pointer
          ZkLock.check(Native.call(:zkl_cancel_scope_new, out))
          @scope = Native.read_pointer(out)
          @thread = Thread.new { run }
          @thread.name = "zklock-acquire"
          @thread.report_on_exception = false
        end
      end
      nil
    end

    # Waits for the acquire's status (OK or a Native::Failure), in the caller's interrupt mode;
    # raises what the acquire's call raised.
    def wait
      @thread&.join
      raise @error if @error

      @status
    end

    # The hold the acquire got is the caller's: #finish leaves it.
    def claim
      @claimed = true
    end

    # Ends the attempt, however the caller got here (normal end, exception, Thread#kill,
    # Timeout's throw: call it from an ensure): gives the acquire up if it is still under way,
    # waits for it, and gives back a hold it got that was not claimed. Interruptions meanwhile
    # are held back until it is done. +raise_release+: raise the release's error (LockLost).
    def finish(raise_release: false)
      Thread.handle_interrupt(Object => :never) do
        give_up
        @thread&.join
        give_back(raise_release)
      end
    end

    private

    def run
      Thread.handle_interrupt(Object => :never) do
        begin
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
            status = error = nil
            begin
              status = @handle.use { |ptr| Native.call(:zkl_lock_acquire_in, ptr, @millis, @scope) }
            rescue Exception => e # rubocop:disable Lint/RescueException -- for the waiter
              error = e
            end
            @mu.synchronize do
              @status = status
              @error = error
              @over = true
            end
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
    end

    # The outcome is no longer awaited: an acquire under way is cancelled (or never begins).
    def give_up
      @mu.synchronize do
        return if @over || @given_up

        @given_up = true
        Native.zkl_cancel_scope_cancel(@scope) if @begun
      end
    end

    # Releases the hold the acquire got, if it got one and nobody claimed it (errors of that
    # release, say a hold lost meanwhile, are dropped unless +raise_release+).
    def give_back(raise_release)
      return unless @status == Native::OK && !@claimed && !@given_back

      @given_back = true
      begin
        @lock.release
      rescue Error
        raise if raise_release
      end
    end
  end
end

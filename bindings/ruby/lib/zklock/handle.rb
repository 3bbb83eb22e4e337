# frozen_string_literal: true

module ZkLock
  # @api private
  # A library handle owned by one Ruby object: freed once, by #close or by the garbage
  # collector, and never under a call that uses it. Every call into the library on the handle
  # is counted while it runs; #close refuses new calls (Closed), makes those under way return
  # (the interrupt it was made with: a lock's waiting acquire is cancelled), waits for them,
  # and only then frees the handle.
  class Handle
    # +interrupt+ (given the pointer) makes the calls under way return, for #close.
    def initialize(ptr, free, what, interrupt = nil)
      @ptr = ptr
      @free = free
      @what = what
      @interrupt = interrupt
      @mu = Mutex.new
      @idle = ConditionVariable.new
      @calls = 0
      @pid = Process.pid
      # The sets (Hashes) this handle is filed in while it is not freed: the handles the exit
      # hook closes, a client's locks. They hold handles, never their owners, so an owner
      # dropped unclosed is still collected and its finalizer frees the handle. (Not an
      # ObjectSpace::WeakMap of the owners: Ruby 3.1's WeakMap#keys handed the exit hook a
      # client already collected, and calling it crashed the interpreter.) One Hash operation
      # runs whole under the interpreter lock, so a finalizer may take the handle out of a set
      # without a mutex (it may not lock one a thread holds).
      @sets = []
      file_in(ZkLock.open_handles)
    end

    # Files this handle in +set+ until it is freed.
    def file_in(set)
      set[self] = true
      @sets << set
      self
    end

    def closed?
      @ptr.nil?
    end

    # Yields the pointer, which stays valid until the block returns.
    def use
      ptr = Thread.handle_interrupt(Object => :never) do
        @mu.synchronize do
          raise Closed.new("#{@what} is closed", Native::CLOSED) if @ptr.nil?

          @calls += 1
          @ptr
        end
      end
      begin
        yield ptr
      ensure
        Thread.handle_interrupt(Object => :never) do
          @mu.synchronize do
            @calls -= 1
            @idle.broadcast if @calls.zero?
          end
        end
      end
    end

    # Frees the handle once the calls under way have returned; the interrupt (given the
    # pointer) is called until they have, every 50 ms. Idempotent.
    def close
      interrupt = @interrupt
      Thread.handle_interrupt(Object => :never) do
        ptr = @mu.synchronize do
          ptr, @ptr = @ptr, nil
          return if ptr.nil?

          # In a forked child the calls counted are the parent's threads', which the child does
          # not have: nothing to wait for (the library frees the child's memory only).
          until @calls.zero? || Process.pid != @pid
            interrupt&.call(ptr)
            @idle.wait(@mu, 0.05)
          end
          ptr
        end
        unfile
        @free.call(ptr)
      end
      nil
    end

    # A finalizer for the owner (it must not hold the owner itself).
    def finalizer
      handle = self
      proc { handle.finalize }
    end

    def finalize
      ptr, @ptr = @ptr, nil
      return unless ptr

      unfile
      @free.call(ptr)
    end

    # Whether this is a lock's handle (the exit hook closes those before the clients').
    def lock?
      @free == Native::F_zkl_lock_free
    end

    private

    def unfile
      @sets.each { |set| set.delete(self) }
    end
  end
end

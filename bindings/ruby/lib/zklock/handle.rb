# frozen_string_literal: true

module ZkLock
  # @api private
  # A library handle owned by one Ruby object: freed once, by #close or by the garbage
  # collector, and never under a call that uses it. Every call into the library on the handle
  # is counted while it runs; #close refuses new calls (Closed), makes those under way return
  # (the block given: a lock's waiting acquire is cancelled), waits for them, and only then
  # frees the handle.
  class Handle
    def initialize(ptr, free, what)
      @ptr = ptr
      @free = free
      @what = what
      @mu = Mutex.new
      @idle = ConditionVariable.new
      @calls = 0
      @pid = Process.pid
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

    # Frees the handle once the calls under way have returned; +interrupt+ (given the
    # pointer) is called until they have, every 50 ms. Idempotent.
    def close(&interrupt)
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
      @free.call(ptr) if ptr
    end
  end
end

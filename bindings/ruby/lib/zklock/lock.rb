# frozen_string_literal: true

module ZkLock
  # One participant in one lock recipe, made by a Client (Client#mutex, #semaphore_mutex,
  # #read_lock, #write_lock, #rwlock, #semaphore, #simple_lock).
  #
  #   lock.synchronize { ... }               # waits as long as it takes
  #   lock.synchronize(timeout: 2) { ... }   # ZkLock::TimeoutError if not held within 2 s
  #   if lock.acquire(timeout: 2)            # true / false
  #     begin ... ensure lock.release end
  #   end
  #
  # The handle is the participant: its holds belong to it, not to the thread that acquired,
  # so any thread may release what another acquired through it. Use it from one thread at a
  # time, except #cancel, #held?, #hold_state and #fencing_token, which any thread may call.
  # Reentrant per handle where the recipe is (the mutex, the read-write halves: n acquires
  # need n releases).
  class Lock
    # One participant of the lock (#participants): holders first.
    Participant = Struct.new(:node, :holder_id, :sequence, :holder?, :reader?)

    HOLD_STATES = %i[none held uncertain lost].freeze

    attr_reader :path, :kind, :client

    # @api private: Client makes locks.
    def initialize(ptr, kind, path, client)
      @handle = Handle.new(ptr, Native::F_zkl_lock_free, "the #{kind} #{path}",
                           ->(p) { Native.zkl_lock_cancel(p) })
      @kind = kind
      @path = path
      @client = client
      ObjectSpace.define_finalizer(self, @handle.finalizer)
    end

    def inspect
      state = closed? ? :closed : hold_state
      "#<#{self.class.name} #{@kind} #{@path} #{state}>"
    end

    # Waits for the lock: forever (timeout: nil, the default), at most +timeout+ seconds, or
    # tries once (0). True when held (and held as it returns: #held? is true then); false when
    # not acquired in time. Raises ZkLock::Error otherwise (Cancelled when #cancel, #close or
    # the client's close ended it).
    #
    # Interruptible: Ctrl-C (Interrupt), Thread#raise, Thread#kill and Timeout.timeout end the
    # wait at once: the acquire is cancelled, its node deleted, a hold that came meanwhile
    # given back, and the exception goes on. Other Ruby threads run while it waits.
    def acquire(timeout: nil)
      attempt = Attempt.new(self, @handle, Args.millis(timeout))
      begin
        attempt.start
        status = attempt.wait
        # An interruption that came with the hold: the hold is given back (by finish) and the
        # interruption goes on, rather than a true nobody receives.
        Thread.handle_interrupt(Object => :never) do
          attempt.claim if status == Native::OK && !Thread.pending_interrupt?
        end
        outcome(status, false)
      ensure
        attempt.finish
      end
    end

    # acquire(timeout: 0).
    def try_acquire
      acquire(timeout: 0)
    end

    # Releases one hold (NotHeld if none; LockLost if it was lost meanwhile: whatever it
    # guarded may have been changed by another holder).
    def release
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_lock_release, ptr) })
    end

    # Holds the lock for the block and returns the block's value: waits as long as it takes,
    # or +timeout+ seconds (TimeoutError then). The release runs whatever the block does, and
    # its LockLost (the hold was lost during the block) is raised unless the block raised.
    def synchronize(timeout: nil)
      attempt = Attempt.new(self, @handle, Args.millis(timeout))
      done = false
      begin
        attempt.start
        outcome(attempt.wait, true)
        value = yield self
        done = true
      ensure
        # However the block ended (Thread#kill and Timeout.timeout's throw unwind through an
        # ensure, not a rescue), the hold is released; its error (LockLost: the hold was lost
        # during the block) is raised only if nothing else is.
        attempt.finish(raise_release: done)
      end
      value
    end

    # Held, and the session provably alive (false once closed).
    def held?
      @handle.use { |ptr| Native.zkl_lock_is_held(ptr) == 1 }
    rescue Closed
      false
    end

    # :none, :held, :uncertain (cut off long enough that the server may have freed it: stop
    # acting) or :lost.
    def hold_state
      out = Native.out_int64
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_lock_hold_state, ptr, out) })
      HOLD_STATES.fetch(Native.read_uint32(out))
    end

    # The current hold's fencing token (Integer), strictly increasing from one holder to the
    # next: attach it to the writes the lock guards. NotHeld if not held.
    def fencing_token
      out = Native.out_int64
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_lock_fencing_token, ptr, out) })
      Native.read_int64(out)
    end

    # Ends the acquire under way on this lock (in another thread), which raises Cancelled; with
    # none under way the next acquire raises it at once (one cancel ends one acquire). Any
    # thread, any time.
    def cancel
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_lock_cancel, ptr) })
    end

    # Calls the block (with the lock) once, on a thread of its own, when the current hold
    # stops being believed: its lease ran out or its session ended; stop acting on it. The
    # watch ends without a call when the hold is released or the lock closed. Returns the
    # watching Thread.
    def on_lost(&block)
      raise ArgumentError, "on_lost needs a block" unless block

      lock = self
      thread = Thread.new do
        loop do
          status = begin
            @handle.use { |ptr| Native.call(:zkl_lock_wait_lost, ptr, 200) }
          rescue Closed
            break
          end
          next if status.is_a?(Native::Failure) && status.status == Native::TIMEOUT

          if status == Native::OK
            begin
              block.call(lock)
            rescue StandardError => e
              warn "zklock: an on_lost block of #{lock.inspect} raised #{e.class}: #{e.message}"
            end
          end
          break
        end
      end
      thread.name = "zklock-on-lost"
      thread.report_on_exception = false
      thread
    end

    # Who holds (first) and who waits: an Array of Participant.
    def participants
      out = Native.out_pointer
      ZkLock.check(@handle.use { |ptr| Native.call(:zkl_lock_participants, ptr, out) })
      snapshot = Native.read_pointer(out)
      begin
        buf = Fiddle::Pointer.malloc(32, Fiddle::RUBY_FREE)
        Array.new(Native.zkl_participants_count(snapshot)) do |i|
          ZkLock.check(Native.call(:zkl_participants_get, snapshot, i, buf))
          node, holder, sequence, holder_p, reader_p = buf[0, 32].unpack("JJqll")
          Participant.new(Fiddle::Pointer.new(node).to_s.force_encoding(Encoding::UTF_8),
                          Fiddle::Pointer.new(holder).to_s.force_encoding(Encoding::UTF_8),
                          sequence, holder_p == 1, reader_p == 1)
        end
      ensure
        Native.zkl_participants_free(snapshot)
      end
    end

    # Frees the handle: a hold is released (its node goes at once), an acquire under way in
    # another thread raises Cancelled. Later calls raise Closed. Idempotent.
    def close
      @handle.close
    end

    # @api private: files the lock's handle in +set+ (its client's) until it is freed.
    def file_in(set)
      @handle.file_in(set)
    end

    def closed?
      @handle.closed?
    end

    private

    def outcome(status, timeout_raises)
      return true if status == Native::OK
      return false if status.status == Native::TIMEOUT && !timeout_raises

      if status.status == Native::CANCELLED && closed?
        raise Cancelled.new("cancelled: the lock was closed during the acquire",
                            Native::CANCELLED)
      end
      raise ZkLock.error(status)
    end
  end
end

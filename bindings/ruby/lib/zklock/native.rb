# frozen_string_literal: true

require "fiddle"

module ZkLock
  # The C library: finding and loading it, the Fiddle declaration of every zklock.h function
  # the gem calls, and the call that reads a failure's message on the thread that made it.
  #
  # Fiddle (Ruby's standard FFI) releases the GVL during every call (Fiddle >= 1.0.1, unless a
  # function is made with need_gvl: true), so a call that blocks in the library lets the
  # process's other Ruby threads run.
  module Native
    OK = 0
    TIMEOUT = 1
    INVALID_ARGUMENT = 2
    NOT_HELD = 3
    CONNECTION_LOSS = 4
    SESSION_EXPIRED = 5
    ZOOKEEPER_ERROR = 6
    INTERNAL_ERROR = 7
    CANCELLED = 8
    LOCK_LOST = 9
    CLOSED = 10
    WOULD_DEADLOCK = 11
    AUTH_FAILED = 12

    P = Fiddle::TYPE_VOIDP
    S = Fiddle::TYPE_CONST_STRING # a Ruby String (or nil: NULL) in, a String out
    I = Fiddle::TYPE_INT
    U32 = -Fiddle::TYPE_INT32_T
    I64 = Fiddle::TYPE_INT64_T
    SIZE = Fiddle::TYPE_SIZE_T
    VOID = Fiddle::TYPE_VOID

    # Every function of zklock.h the gem calls: name => [argument types, result type].
    # test/test_header.rb checks this table against include/zklock.h.
    SIGNATURES = {
      zkl_options_new: [[P], I],
      zkl_options_free: [[P], VOID],
      zkl_options_set_session_timeout: [[P, U32], I],
      zkl_options_set_connect_timeout: [[P, U32], I],
      zkl_options_set_holder_id: [[P, S], I],
      zkl_options_set_server_tick: [[P, U32], I],
      zkl_options_set_protocol: [[P, U32], I],
      zkl_options_set_acl: [[P, U32], I],
      zkl_options_add_auth: [[P, S, S], I],
      zkl_options_use_tls: [[P], I],
      zkl_options_set_tls_ca_file: [[P, S], I],
      zkl_options_set_tls_identity_files: [[P, S, S], I],
      zkl_options_set_tls_key_password: [[P, S], I],
      zkl_options_tls_danger_accept_any_server_name: [[P], I],
      zkl_options_set_sasl_digest_md5: [[P, S, S], I],
      zkl_options_set_sasl_gssapi: [[P, S, S, S], I],
      zkl_client_connect_with_options: [[S, P, P], I],
      zkl_client_holder_id: [[P, P], I],
      zkl_client_session_state: [[P, P], I],
      zkl_client_close: [[P], I],
      zkl_client_free: [[P], VOID],
      zkl_mutex_new: [[P, S, P], I],
      zkl_semaphore_mutex_new: [[P, S, P], I],
      zkl_read_lock_new: [[P, S, P], I],
      zkl_write_lock_new: [[P, S, P], I],
      zkl_rwlock_new: [[P, S, P, P], I],
      zkl_semaphore_new: [[P, S, U32, P], I],
      zkl_simple_lock_new: [[P, S, P], I],
      zkl_lock_acquire: [[P, I64], I],
      zkl_lock_acquire_in: [[P, I64, P], I],
      zkl_cancel_scope_new: [[P], I],
      zkl_cancel_scope_cancel: [[P], I],
      zkl_cancel_scope_free: [[P], VOID],
      zkl_lock_release: [[P], I],
      zkl_lock_cancel: [[P], I],
      zkl_lock_is_held: [[P], I],
      zkl_lock_hold_state: [[P, P], I],
      zkl_lock_fencing_token: [[P, P], I],
      zkl_lock_wait_lost: [[P, I64], I],
      zkl_lock_participants: [[P, P], I],
      zkl_participants_count: [[P], SIZE],
      zkl_participants_get: [[P, SIZE, P], I],
      zkl_participants_free: [[P], VOID],
      zkl_lock_free: [[P], VOID],
      zkl_last_error_message: [[], S],
      zkl_last_error_hint: [[], U32],
      zkl_last_error_reason: [[], S],
      zkl_status_name: [[U32], S],
      zkl_version: [[], S],
    }.freeze

    class << self
      # Where the library was loaded from (the path or name given to dlopen).
      attr_reader :library_path

      # The library: $ZKLOCK_LIBRARY if set; else one installed beside this file (a gem built
      # with the library in it: lib/zklock/libzklock.so); else the system's (the dynamic
      # linker's search: ldconfig's directories, LD_LIBRARY_PATH).
      def candidates
        explicit = ENV["ZKLOCK_LIBRARY"]
        return [explicit] if explicit && !explicit.empty?

        here = Dir.glob(File.join(__dir__, "libzklock*.{so,dylib}*")).sort
        return here.first(1) unless here.empty?

        # The unversioned name (a development install), then the SONAMEs of 0.x releases.
        ["libzklock.so", "libzklock.so.0.#{VERSION.split('.')[1]}", "libzklock.dylib"]
      end

      def load
        errors = []
        candidates.each do |path|
          handle = Fiddle.dlopen(path)
          @library_path = path
          return handle
        rescue Fiddle::DLError => e
          errors << e.message
        end
        raise LoadError, "zklock: cannot load the C library (#{errors.join('; ')}): set " \
                         "ZKLOCK_LIBRARY to the path of libzklock.so, or install it " \
                         "(cargo build --release --features capi --lib; scripts/install.sh)"
      end
    end

    LIB = load

    SIGNATURES.each do |name, (args, ret)|
      fn = Fiddle::Function.new(LIB[name.to_s], args, ret, name: name.to_s)
      const_set(:"F_#{name}", fn)
      define_singleton_method(name) { |*a| fn.call(*a) }
    end

    # A status other than OK carries the message the library gave it, read right after the
    # call on the thread that made it (the library keeps one last error per thread).
    # A failed call: its status, its message, the setting that would fix it (a zkl_hint) and
    # the message's words before the setting's C name.
    Failure = Struct.new(:status, :message, :hint, :reason)

    module_function

    # fn(*args) for a function that returns a status: OK, or a Failure with its message.
    def call(name, *args)
      status = const_get(:"F_#{name}").call(*args)
      return OK if status == OK

      reason = zkl_last_error_reason
      Failure.new(status, message, zkl_last_error_hint,
                  reason ? reason.dup.force_encoding(Encoding::UTF_8).scrub : "")
    end

    def message
      m = zkl_last_error_message
      m ? m.dup.force_encoding(Encoding::UTF_8).scrub : ""
    end

    # A pointer-sized out-parameter (freed with its Ruby object).
    def out_pointer
      Fiddle::Pointer.malloc(Fiddle::SIZEOF_VOIDP, Fiddle::RUBY_FREE)
    end

    def read_pointer(buf)
      buf[0, Fiddle::SIZEOF_VOIDP].unpack1("J")
    end

    def out_int64
      Fiddle::Pointer.malloc(8, Fiddle::RUBY_FREE)
    end

    def read_int64(buf)
      buf[0, 8].unpack1("q")
    end

    def read_uint32(buf)
      buf[0, 4].unpack1("L")
    end

    # A C string argument: UTF-8 text without NUL (which would end it early).
    def text(value, what)
      unless value.is_a?(String) || value.is_a?(Symbol)
        raise TypeError, "#{what} must be a String, not #{value.class}"
      end

      s = value.to_s.encode(Encoding::UTF_8)
      if (at = s.index("\0"))
        raise InvalidArgument.new("#{what} #{value.inspect} contains a NUL character (at #{at}), " \
                                  "which no C string can carry", INVALID_ARGUMENT)
      end
      s
    rescue EncodingError => e
      raise InvalidArgument.new("#{what} is not valid text: #{e.message}", INVALID_ARGUMENT)
    end

    def file(value, what)
      value = value.to_path if value.respond_to?(:to_path)
      text(value, what)
    end
  end
end

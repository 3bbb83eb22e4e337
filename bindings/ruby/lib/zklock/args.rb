# frozen_string_literal: true

module ZkLock
  # @api private
  # Ruby arguments as the C library's: seconds as milliseconds, checked before Fiddle (which
  # would wrap an out-of-range integer).
  module Args
    U32_MAX = 2**32 - 1

    module_function

    def seconds(value, what)
      unless value.is_a?(Numeric) && value.real?
        raise TypeError, "#{what} must be a number of seconds, not #{value.class}"
      end
      raise InvalidArgument.new("#{what} is NaN", Native::INVALID_ARGUMENT) if value.to_f.nan?

      value.to_f
    end

    # nil -> -1 (forever); 0 -> try once; seconds -> whole milliseconds, rounded up.
    def millis(timeout)
      return -1 if timeout.nil?

      t = seconds(timeout, "timeout")
      if t.negative?
        raise InvalidArgument.new("timeout #{timeout} is negative: give nil to wait forever",
                                  Native::INVALID_ARGUMENT)
      end
      return 0 if t.zero?
      return -1 if t * 1000 >= 2**62 # longer than the clock counts

      [1, (t * 1000).ceil].max
    end

    # Seconds as whole milliseconds for a uint32_t argument, low_ms to high_ms.
    def millis_u32(value, what, low_ms, high_ms = U32_MAX)
      t = seconds(value, what)
      ms = t.positive? ? (t * 1000).ceil : 0
      unless ms.between?(low_ms, high_ms)
        raise InvalidArgument.new("#{what} of #{value} s is out of range (#{low_ms / 1000.0} to " \
                                  "#{high_ms / 1000.0} s)", Native::INVALID_ARGUMENT)
      end
      ms
    end

    def u32(value, what, low = 0)
      raise TypeError, "#{what} must be an Integer, not #{value.class}" unless value.is_a?(Integer)
      unless value.between?(low, U32_MAX)
        raise InvalidArgument.new("#{what} #{value} is out of range (#{low} to #{U32_MAX})",
                                  Native::INVALID_ARGUMENT)
      end
      value
    end

    # A Symbol of +choices+ (name => C value), or the C value itself.
    def choice(value, choices, what)
      return choices.fetch(value.to_sym) if (value.is_a?(Symbol) || value.is_a?(String)) &&
                                            choices.key?(value.to_sym)
      return value if value.is_a?(Integer) && choices.value?(value)

      raise InvalidArgument.new("#{what} #{value.inspect} is not one of " \
                                "#{choices.keys.map(&:inspect).join(', ')}",
                                Native::INVALID_ARGUMENT)
    end
  end
end

# frozen_string_literal: true

module ZkLock
  # A call into the library failed: +status+ is the zkl_status number, +name+ its C name
  # ("ZKL_TIMEOUT"), +message+ the library's words. Each status has its own subclass; rescue
  # ZkLock::Error for all of them.
  class Error < StandardError
    STATUS = -1

    attr_reader :status

    def initialize(message = nil, status = nil)
      @status = status.nil? ? self.class::STATUS : Integer(status)
      super(message || self.class.name)
    end

    # The C name of the status, e.g. "ZKL_TIMEOUT".
    def name
      ZkLock.status_name(status)
    end

    # Maps a status to its exception class.
    def self.for_status(status)
      STATUSES.fetch(status, Error)
    end
  end

  # Not acquired before the timeout (timeout 0: the lock was busy). acquire returns false
  # instead; synchronize(timeout:) raises it.
  class TimeoutError < Error; STATUS = Native::TIMEOUT; end
  # A malformed path or host list, a value out of range, a setting that needs another one.
  class InvalidArgument < Error; STATUS = Native::INVALID_ARGUMENT; end
  # Release (or fencing token) of a lock this handle does not hold.
  class NotHeld < Error; STATUS = Native::NOT_HELD; end
  # ZooKeeper not reachable in time; nothing of the call is left on the server.
  class ConnectionLoss < Error; STATUS = Native::CONNECTION_LOSS; end
  # The session expired: every lock it held is lost.
  class SessionExpired < Error; STATUS = Native::SESSION_EXPIRED; end
  # Any other error the server returned (no auth, ACL, ...).
  class ZooKeeperError < Error; STATUS = Native::ZOOKEEPER_ERROR; end
  # A bug caught at the library's boundary; the handle is unusable.
  class InternalError < Error; STATUS = Native::INTERNAL_ERROR; end
  # An acquire ended by Lock#cancel, or by closing the lock or its client meanwhile.
  class Cancelled < Error; STATUS = Native::CANCELLED; end
  # The hold was lost before its release (its session ended, or its node was removed).
  class LockLost < Error; STATUS = Native::LOCK_LOST; end
  # The client (or this lock) was closed.
  class Closed < Error; STATUS = Native::CLOSED; end
  # The acquire could only wait for this handle's own hold: a semaphore mutex or simple lock
  # this handle holds, a read -> write upgrade, a semaphore whose leases this handle fills.
  class WouldDeadlock < Error; STATUS = Native::WOULD_DEADLOCK; end
  # The servers refused this client's credentials, or the client refused the servers': a wrong
  # SASL password, a missing or refused client certificate (cert_file:), a server certificate
  # not signed by the CA given (ca_file:) or not issued for the host. The message says which;
  # retrying with the same settings will not help.
  class AuthFailed < Error; STATUS = Native::AUTH_FAILED; end

  class Error
    STATUSES = [TimeoutError, InvalidArgument, NotHeld, ConnectionLoss, SessionExpired,
                ZooKeeperError, InternalError, Cancelled, LockLost, Closed, WouldDeadlock,
                AuthFailed].to_h { |c| [c::STATUS, c] }.freeze
  end

  # The setting that fixes an error (the library's zkl_hint values), as a Ruby caller gives it:
  # the message is the library's reason, then this in parentheses.
  HINTS = {
    1 => "ca_file:",
    2 => "cert_file: and key_file:",
    3 => "key_password:",
    4 => "tls: true",
    5 => "sasl:",
    6 => "auth:",
    7 => "connect_timeout:",
  }.freeze

  class << self
    # The C name of a status value, e.g. "ZKL_TIMEOUT" ("ZKL_UNKNOWN_STATUS" otherwise).
    def status_name(status)
      Native.zkl_status_name(status & 0xFFFFFFFF).to_s
    end

    # The loaded C library's version, e.g. "0.3.0".
    def library_version
      Native.zkl_version.to_s
    end

    # @api private
    def error(failure, hints: false)
      message = failure.message
      keyword = HINTS[failure.hint.to_i]
      message = "#{failure.reason} (#{keyword})" if hints && keyword
      Error.for_status(failure.status).new(message, failure.status)
    end

    # @api private: raises unless +result+ is OK.
    def check(result, hints: false)
      raise error(result, hints: hints) unless result == Native::OK

      nil
    end
  end
end

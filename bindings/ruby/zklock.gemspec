# frozen_string_literal: true

require_relative "lib/zklock/version"

# The gem is Ruby over the zklock C library (Fiddle, Ruby's standard FFI: no compile step).
# scripts/test-ruby.sh builds it with the library bundled (lib/zklock/libzklock.so), which
# makes it a gem for this platform; without one it is a plain Ruby gem that loads
# $ZKLOCK_LIBRARY or the system's libzklock.
Gem::Specification.new do |s|
  s.name = "zklock"
  s.version = ZkLock::VERSION
  s.summary = "Distributed locks on Apache ZooKeeper (fair mutex, read-write lock, semaphore, " \
              "simple lock), compatible with Curator's and kazoo's lock nodes"
  s.description = "Ruby bindings of the zklock C library through Fiddle: lock.synchronize { }, " \
                  "acquire(timeout:), fencing tokens, TLS and SASL; a blocking acquire that " \
                  "Ctrl-C, Thread#raise and Timeout.timeout end at once."
  s.authors = ["The zklock developers"]
  s.licenses = ["MIT", "Apache-2.0"] # either, at your option (as the crate)
  s.required_ruby_version = ">= 3.0" # Fiddle >= 1.0.1: TYPE_CONST_STRING; the GVL let go in calls
  s.files = Dir.glob("lib/**/*.rb") + %w[README.md LICENSE-MIT LICENSE-APACHE]
  bundled = Dir.glob("lib/zklock/libzklock*.{so,dylib}*")
  unless bundled.empty?
    s.files += bundled
    s.platform = Gem::Platform.local
  end
  s.require_paths = ["lib"]
  s.metadata["rubygems_mfa_required"] = "true"
end

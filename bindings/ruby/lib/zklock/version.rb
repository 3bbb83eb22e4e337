# frozen_string_literal: true

module ZkLock
  # The gem's version: the C library's it was made with (ZkLock.library_version is the
  # loaded library's).
  VERSION = "0.3.0"
end

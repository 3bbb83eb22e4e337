# frozen_string_literal: true

# scripts/test-ruby.sh runs this with the built gem installed into a fresh GEM_HOME (and no
# ZKLOCK_LIBRARY): the gem loads from there, with the library bundled in it, and locks against
# the real server named by ARGV[0].
require "zklock"

spec = Gem.loaded_specs.fetch("zklock") { abort "gem_check: zklock was not loaded as a gem" }
gem_home = ENV.fetch("GEM_HOME")
abort "gem_check: zklock loaded from #{spec.gem_dir}, not #{gem_home}" unless
  spec.gem_dir.start_with?(gem_home)
unless ZkLock::Native.library_path.start_with?(spec.gem_dir)
  abort "gem_check: the library came from #{ZkLock::Native.library_path}, not the gem"
end

path = "/gem-check/#{Process.pid}"
ZkLock::Client.open(ARGV.fetch(0)) do |zk|
  a = zk.mutex(path)
  b = zk.mutex(path)
  token = a.synchronize(timeout: 10) do
    abort "gem_check: a second handle took a held lock" if b.acquire(timeout: 0)
    a.fencing_token
  end
  abort "gem_check: the lock was not free after synchronize" unless b.acquire(timeout: 10)
  abort "gem_check: fencing tokens did not increase" unless b.fencing_token > token
  b.release
end
puts "gem_check: zklock #{spec.version} (#{spec.platform}) from #{spec.gem_dir} locked " \
     "against #{ARGV[0]}; library #{ZkLock.library_version}"

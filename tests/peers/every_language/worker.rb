# A holder of tests/it/every_language.rs, in Ruby: the mutex at PATH, HOLDS times, from when HISTORY.go exists.
#
# Usage: ruby -I bindings/ruby/lib worker.rb HOSTS PATH curator|kazoo HOLDS HISTORY WHO
# Each hold appends "enter W WHO TOKEN" after its acquire and "exit W WHO" before its release
# to HISTORY, one write per line on an append-mode file.
require "zklock"

hosts, path, protocol, holds, history, who = ARGV
log = File.open(history, File::WRONLY | File::APPEND)
log.sync = true
ZkLock::Client.open(hosts, protocol: protocol.to_sym) do |zk|
  lock = zk.mutex(path)
  $stdout.puts "READY"
  $stdout.flush
  sleep 0.005 until File.exist?("#{history}.go") # all holders start at once
  Integer(holds).times do
    lock.synchronize do
      log.syswrite("enter W #{who} #{lock.fencing_token}\n")
      sleep 0.005
      log.syswrite("exit W #{who}\n")
    end
  end
end
puts "DONE #{holds}"

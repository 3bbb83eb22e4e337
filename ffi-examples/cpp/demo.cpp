// The C++ RAII layer (zklock.hpp) against a real server; exit code 0 when every check passed.
// Environment: ZKL_HOSTS (default 127.0.0.1:2181), ZKL_PATH (lock path prefix).
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "checks.hpp"

using namespace std::chrono_literals;

int main() {
  const std::string hosts = env_or("ZKL_HOSTS", "127.0.0.1:2181");
  const std::string base = env_or("ZKL_PATH", "/zklock-examples") + "/cpp";
  std::cout << "demo.cpp: zklock " << zklock::version() << ", ZooKeeper at " << hosts << "\n";
  try {
    zklock::Client a(hosts, 5000ms), b(hosts, 5000ms);
    zklock::Lock ma = a.mutex(base + "/mutex"), mb = b.mutex(base + "/mutex");

    int64_t first = 0;
    {
      zklock::Guard g(ma);
      first = g.fencing_token();
      EXPECT_TRUE(g.is_held());
      zklock::Guard again(ma);  // reentrant on this thread
      EXPECT_TRUE(!zklock::try_lock_for(mb, 0ms));
      EXPECT_TRUE(!mb.try_acquire_for(200ms));
    }
    EXPECT_TRUE(!ma.is_held());
    if (auto g = zklock::try_lock_for(mb, 2s)) {
      EXPECT_TRUE(g->fencing_token() > first);
    } else {
      EXPECT_TRUE(false && "b did not get the free lock");
    }
    std::cout << "ok   guards, reentrancy, try_lock_for, fencing tokens\n";

    // Errors carry the status and the message.
    EXPECT_TRUE(throws_status([&] { a.mutex("relative/path"); }, ZKL_INVALID_ARGUMENT));
    EXPECT_TRUE(throws_status([&] { ma.release(); }, ZKL_NOT_HELD));
    try {
      a.semaphore(base + "/sem", 0);
    } catch (const zklock::Error& e) {
      EXPECT_TRUE(std::strstr(e.what(), "ZKL_INVALID_ARGUMENT: invalid argument") == e.what());
    }
    std::cout << "ok   exceptions with status and message\n";

    // Cancel a waiting acquire from another thread.
    {
      zklock::Guard g(ma);
      std::atomic<bool> cancelled{false};
      std::thread waiter([&] { cancelled = throws_status([&] { mb.acquire(); }, ZKL_CANCELLED); });
      std::this_thread::sleep_for(200ms);
      mb.cancel();
      waiter.join();
      EXPECT_TRUE(cancelled);
    }
    std::cout << "ok   cancel from another thread\n";

    // A cancel with no acquire under way is remembered: the next acquire throws at once (a
    // cancel just before an acquire begins is not lost), and only that one.
    {
      zklock::Guard g(ma);
      mb.cancel();
      mb.cancel();  // twice with no acquire between is once
      const auto started = std::chrono::steady_clock::now();
      EXPECT_TRUE(throws_status([&] { mb.try_acquire_for(10s); }, ZKL_CANCELLED));
      EXPECT_TRUE(std::chrono::steady_clock::now() - started < 3s);
      EXPECT_TRUE(!mb.try_acquire_for(100ms));
      EXPECT_TRUE(!mb.reset_cancel());
      mb.cancel();
      EXPECT_TRUE(mb.reset_cancel());
      EXPECT_TRUE(!mb.try_acquire_for(100ms));
    }
    std::cout << "ok   a cancel before the acquire begins ends it at once\n";

    // Read-write lock, semaphore, multi-lock.
    zklock::Lock r1 = a.read_lock(base + "/rw"), r2 = b.read_lock(base + "/rw"), w = b.write_lock(base + "/rw");
    {
      zklock::Guard g1(r1), g2(r2);
      EXPECT_TRUE(!w.try_acquire());
    }
    { zklock::Guard gw(w, 2s); }
    zklock::Lock s1 = a.semaphore(base + "/sem", 1), s2 = b.semaphore(base + "/sem", 1);
    {
      zklock::Guard g(s1);
      EXPECT_TRUE(throws_status([&] { zklock::Guard g2(s2, 100ms); }, ZKL_TIMEOUT));
    }
    std::vector<zklock::Lock> parts;
    parts.push_back(a.mutex(base + "/multi/x"));
    parts.push_back(a.write_lock(base + "/multi/y"));
    zklock::Lock all = zklock::Lock::multi(parts);
    EXPECT_TRUE(parts.empty());
    {
      zklock::Guard g(all, 2s);
      EXPECT_TRUE(all.is_held());
      zklock::Lock other = b.mutex(base + "/multi/x");
      EXPECT_TRUE(!other.try_acquire());
    }
    std::cout << "ok   read-write lock, semaphore, multi-lock\n";

    // One read-write participant: downgrade keeps the token; the handle is the participant,
    // so another thread releases what this one acquired.
    {
      auto [read, write] = a.rwlock(base + "/pair");
      EXPECT_TRUE(write.hold_state() == zklock::HoldState::none);
      write.acquire();
      read.acquire();  // downgrade
      EXPECT_TRUE(read.fencing_token() == write.fencing_token());
      EXPECT_TRUE(read.hold_state() == zklock::HoldState::held);
      EXPECT_TRUE(read.lease_remaining() > 0ms && read.lease_remaining() <= 5000ms);
      std::thread([&] { write.release(); }).join();
      EXPECT_TRUE(!write.is_held() && read.is_held());
      EXPECT_TRUE(throws_status([&] { write.acquire(); }, ZKL_WOULD_DEADLOCK));  // no upgrade
      read.release();
      EXPECT_TRUE(throws_status([&] { read.lease_remaining(); }, ZKL_NOT_HELD));
    }
    // Semaphore leases: a handle may hold several.
    {
      zklock::Lock pool = a.semaphore(base + "/pool", 2), other = b.semaphore(base + "/pool", 2);
      pool.acquire();
      pool.acquire();
      EXPECT_TRUE(!other.try_acquire());
      pool.release();
      EXPECT_TRUE(other.try_acquire_for(10s));
      pool.release();
      other.release();
    }
    // A creator-only ACL needs authentication first.
    EXPECT_TRUE(throws_status([&] { b.set_acl(zklock::Acl::creator_all); }, ZKL_INVALID_ARGUMENT));
    b.add_auth("digest", "cpp:secret");
    b.set_acl(zklock::Acl::creator_all_read_all);
    {
      zklock::Lock protected_lock = b.mutex(base + "/acl");
      zklock::Guard g(protected_lock, 2s);
      EXPECT_TRUE(g.is_held());
    }
    std::cout << "ok   read-write pair, downgrade, leases, hold state, lease, ACL\n";
  } catch (const zklock::Error& e) {
    std::cerr << "unexpected zklock::Error: " << e.what() << "\n";
    return 1;
  }
  if (failures) {
    std::cout << "demo.cpp: " << failures << " checks FAILED\n";
    return 1;
  }
  std::cout << "demo.cpp: all checks passed\n";
  return 0;
}

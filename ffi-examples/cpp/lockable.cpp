// zklock.hpp as C++ users hold locks: std::lock_guard, std::unique_lock and std::scoped_lock over
// zklock::Lock; a Guard that outlives a move of its Lock; a Guard asked for its token after
// unlock(); and the listeners, statistics and revocation. Against a real server; exit code 0
// when every check passed. Environment: ZKL_HOSTS (default 127.0.0.1:2181), ZKL_PATH.
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "checks.hpp"

using namespace std::chrono_literals;

int main() {
  const std::string hosts = env_or("ZKL_HOSTS", "127.0.0.1:2181");
  const std::string base = env_or("ZKL_PATH", "/zklock-examples") + "/cpp-lockable";
  std::cout << "lockable.cpp: zklock " << zklock::version() << ", ZooKeeper at " << hosts << "\n";
  try {
    zklock::Client a(hosts, 5000ms, 2000ms, "cpp-a"), b(hosts, 5000ms);
    EXPECT_TRUE(a.holder_id() == "cpp-a");
    EXPECT_TRUE(a.session_state() == zklock::SessionState::connected);
    zklock::Lock ma = a.mutex(base + "/m"), mb = b.mutex(base + "/m");

    // std::lock_guard: held in scope, another handle refused, released at scope exit.
    {
      std::lock_guard<zklock::Lock> g(ma);
      EXPECT_TRUE(ma.is_held());
      EXPECT_TRUE(!mb.try_lock());
    }
    EXPECT_TRUE(!ma.is_held());

    // std::unique_lock: try_to_lock, a timed constructor, unlock/lock again.
    {
      std::unique_lock<zklock::Lock> u(ma, std::try_to_lock);
      EXPECT_TRUE(u.owns_lock());
      std::unique_lock<zklock::Lock> v(mb, 200ms);  // try_lock_for
      EXPECT_TRUE(!v.owns_lock());
      u.unlock();
      EXPECT_TRUE(!ma.is_held());
      std::unique_lock<zklock::Lock> w(mb, std::chrono::steady_clock::now() + 2s);  // try_lock_until
      EXPECT_TRUE(w.owns_lock());
      EXPECT_TRUE(!ma.try_lock());
    }
    EXPECT_TRUE(!mb.is_held());

    // A negative timeout waits forever, as zkl_lock_acquire(l, -1) does (one meaning in C,
    // C++ and Python); a deadline that has passed tries once.
    {
      zklock::Guard g(ma);
      EXPECT_TRUE(!mb.try_lock_until(std::chrono::steady_clock::now() - 1s));
      std::atomic<int> got{-1};
      std::thread waiter([&] { got = mb.try_acquire_for(-1ms) ? 1 : 0; });
      std::this_thread::sleep_for(700ms);
      EXPECT_TRUE(got == -1);  // still waiting: not a try-once that returned false
      g.unlock();
      waiter.join();
      EXPECT_TRUE(got == 1);
      mb.release();
    }

    // std::scoped_lock over two zklock locks (std::lock's deadlock avoidance over try_lock).
    zklock::Lock m2a = a.mutex(base + "/m2"), m2b = b.mutex(base + "/m2");
    {
      std::scoped_lock both(ma, m2a);
      EXPECT_TRUE(ma.is_held() && m2a.is_held());
      EXPECT_TRUE(!mb.try_lock() && !m2b.try_lock());
    }
    EXPECT_TRUE(!ma.is_held() && !m2a.is_held());

    // A Guard follows its lock's handle: moving the Lock does not strand the hold.
    {
      zklock::Lock moving = a.semaphore_mutex(base + "/moved");
      zklock::Lock other = b.semaphore_mutex(base + "/moved");
      zklock::Guard g(moving);
      zklock::Lock moved = std::move(moving);
      EXPECT_TRUE(g.is_held() && moved.is_held());
      EXPECT_TRUE(!other.try_lock());
      g.unlock();  // releases the hold, through the handle the Lock now lives in
      EXPECT_TRUE(!moved.is_held());
      EXPECT_TRUE(other.try_lock());
      other.unlock();
      // After unlock(), the guard answers with an error, not a crash.
      EXPECT_TRUE(throws_status([&] { (void)g.fencing_token(); }, ZKL_NOT_HELD));
      EXPECT_TRUE(throws_status([&] { g.unlock(); }, ZKL_NOT_HELD));
      EXPECT_TRUE(!g.is_held());
      zklock::Guard from(moved);
      zklock::Guard to(std::move(from));
      EXPECT_TRUE(throws_status([&] { (void)from.fencing_token(); }, ZKL_NOT_HELD));
      EXPECT_TRUE(to.fencing_token() > 0);
    }

    // Participants with holder ids, statistics, the lost watcher, revocation.
    {
      zklock::Guard g(ma);
      std::atomic<bool> queued{false};
      std::thread waiter([&] {
        queued = true;
        EXPECT_TRUE(mb.try_lock_for(10s));
        mb.unlock();
      });
      std::vector<zklock::Participant> ps;
      for (int i = 0; i < 200 && ps.size() < 2; ++i) {
        std::this_thread::sleep_for(20ms);
        ps = ma.participants();
      }
      EXPECT_TRUE(ps.size() == 2);
      if (ps.size() == 2) {
        EXPECT_TRUE(ps[0].is_holder && ps[0].holder_id == "cpp-a" && !ps[1].is_holder);
        EXPECT_TRUE(ps[0].created_ms > 0 && ps[0].sequence < ps[1].sequence);
      }
      EXPECT_TRUE(!ma.wait_lost(100ms));
      ma.make_revocable();
      EXPECT_TRUE(!ma.wait_revoke_request(100ms));
      EXPECT_TRUE(mb.revoke_holders() == 1);
      EXPECT_TRUE(ma.wait_revoke_request(5s));
      EXPECT_TRUE(ma.is_held());  // asked, not forced
      g.unlock();
      waiter.join();
    }
    zkl_stats s = ma.stats();
    // Through ma: lock_guard, unique_lock, two Guards, scoped_lock; one busy try_lock.
    EXPECT_TRUE(s.acquisitions == 5 && s.releases == 5 && s.losses == 0 && s.cancels == 0);
    EXPECT_TRUE(s.timeouts == 1 && s.wait.count == 5 && s.hold.count == 5 && s.hold.max_us > 0);

    // The session listener hears the close; the lost watcher wakes; statuses of their own.
    {
      zklock::Lock held = a.simple_lock(base + "/simple");
      held.lock();
      std::thread listener([&] {
        uint64_t after = 0;
        uint32_t last = 99;
        while (auto e = a.next_session_event(after, 10s)) {
          after = e->seq;
          last = e->state;
        }
        EXPECT_TRUE(last == ZKL_SESSION_STATE_CLOSED);
      });
      std::this_thread::sleep_for(100ms);
      a.close();
      listener.join();
      EXPECT_TRUE(held.wait_lost(5s));
      EXPECT_TRUE(held.hold_state() == zklock::HoldState::lost);
      EXPECT_TRUE(throws_status([&] { held.unlock(); }, ZKL_LOCK_LOST));
      EXPECT_TRUE(throws_status([&] { held.lock(); }, ZKL_CLOSED));
      zklock::Lock sem = b.semaphore(base + "/sem", 1);
      sem.lock();
      EXPECT_TRUE(throws_status([&] { sem.lock(); }, ZKL_WOULD_DEADLOCK));  // its own lease fills it
      sem.unlock();
    }
  } catch (const zklock::Error& e) {
    std::cerr << "unexpected: " << e.what() << "\n";
    ++failures;
  }
  if (failures) {
    std::cout << "lockable.cpp: " << failures << " checks FAILED\n";
    return 1;
  }
  std::cout << "lockable.cpp: all checks passed\n";
  return 0;
}

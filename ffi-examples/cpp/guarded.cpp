// zklock.hpp's guarded writes (docs/guarded-writes.md) and a semaphore's several leases at once,
// against a real server; exit code 0 when every check passed. Environment: ZKL_HOSTS (default
// 127.0.0.1:2181), ZKL_PATH.
#include <iostream>

#include "checks.hpp"

using namespace std::chrono_literals;

int main() {
  const std::string hosts = env_or("ZKL_HOSTS", "127.0.0.1:2181");
  const std::string base = env_or("ZKL_PATH", "/zklock-examples") + "/cpp-guarded";
  try {
    zklock::Client a(hosts, 5000ms), b(hosts, 5000ms);

    // Guarded writes: only while held; all of a multi or none.
    zklock::Lock m = a.mutex(base + "/m");
    const std::string x = base + "/x", y = base + "/y";
    EXPECT_TRUE(throws_status([&] { m.set_data(x, "0"); }, ZKL_NOT_HELD));
    m.acquire();
    m.create(x, "x0");
    m.set_data(x, "x1");
    std::vector<zkl_op> ops = {
        {ZKL_OP_CREATE, y.c_str(), nullptr, 0, -1, ZKL_NODE_PERSISTENT},
        {ZKL_OP_CHECK, x.c_str(), nullptr, 0, 7, 0},  // x is at version 1: fails, nothing written
    };
    EXPECT_TRUE(throws_status([&] { m.multi(ops); }, ZKL_ZOOKEEPER_ERROR));
    ops[1].version = 1;
    m.multi(ops);
    m.erase(y);
    m.erase(x);
    m.release();
    EXPECT_TRUE(throws_status([&] { m.create(x, "late"); }, ZKL_NOT_HELD));

    // n leases or none.
    zklock::Lock sa = a.semaphore(base + "/sem", 3), sb = b.semaphore(base + "/sem", 3);
    auto two = sa.acquire_many(2, 5s);
    EXPECT_TRUE(two && two->size() == 2 && (*two)[0] != (*two)[1]);
    EXPECT_TRUE(!sb.acquire_many(2, 0ms));
    EXPECT_TRUE(sb.try_lock());
    sb.unlock();
    if (two) sa.release_many(*two);
    EXPECT_TRUE(!sa.is_held());
    auto three = sb.acquire_many(3, 0ms);
    EXPECT_TRUE(three && three->size() == 3);
    if (three) sb.release_many(*three);
  } catch (const zklock::Error& e) {
    std::cerr << "unexpected: " << e.what() << "\n";
    ++failures;
  }
  if (failures) {
    std::cout << "guarded.cpp: " << failures << " checks FAILED\n";
    return 1;
  }
  std::cout << "guarded.cpp: all checks passed\n";
  return 0;
}

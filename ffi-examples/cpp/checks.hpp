// What the C++ example programs share: the environment they run in and their checks.
// Environment: ZKL_HOSTS (default 127.0.0.1:2181), ZKL_PATH (lock path prefix).
#ifndef ZKLOCK_EXAMPLES_CHECKS_HPP
#define ZKLOCK_EXAMPLES_CHECKS_HPP

#include <cstdlib>
#include <iostream>
#include <string>

#include "zklock.hpp"

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

inline int failures = 0;

#define EXPECT_TRUE(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::cerr << __FILE__ << ":" << __LINE__ << ": failed: " #cond "\n";    \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

// Runs f, expecting it to throw zklock::Error with `want`.
template <class F>
bool throws_status(F f, zkl_status want) {
  try {
    f();
  } catch (const zklock::Error& e) {
    if (e.status() == want) return true;
    std::cerr << "threw " << e.what() << ", expected " << zkl_status_name(want) << "\n";
    return false;
  }
  std::cerr << "did not throw, expected " << zkl_status_name(want) << "\n";
  return false;
}

#endif  // ZKLOCK_EXAMPLES_CHECKS_HPP

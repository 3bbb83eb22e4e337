/*
 * Shared helpers of the C examples: connection settings from the environment, checks that
 * print the status name and the library's message, a tiny test runner (exit code = verdict),
 * and the two-process contention loop.
 *
 * Environment: ZKL_HOSTS (default "127.0.0.1:2181"), ZKL_PATH (a lock path prefix, default
 * "/zklock-examples"), ZKL_CONNECT_TIMEOUT_MS (how long a connect may wait; default: each
 * example's own; the tests set a longer one under valgrind, where everything is slower).
 */
#ifndef ZKL_EXAMPLES_COMMON_H
#define ZKL_EXAMPLES_COMMON_H

#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zklock.h"

/* Fails the current test (returns false) unless `call` returns ZKL_OK. */
#define CHECK(call)                                                                        \
  do {                                                                                     \
    zkl_status check_s_ = (call);                                                          \
    if (check_s_ != ZKL_OK) {                                                              \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,                  \
              zkl_status_name((uint32_t)check_s_), zkl_last_error_message());              \
      return false;                                                                        \
    }                                                                                      \
  } while (0)

/* Fails the current test unless `call` returns the status `want`. */
#define EXPECT(call, want)                                                                 \
  do {                                                                                     \
    zkl_status expect_s_ = (call);                                                         \
    if (expect_s_ != (want)) {                                                             \
      fprintf(stderr, "%s:%d: %s -> %s (%s), expected %s\n", __FILE__, __LINE__, #call,    \
              zkl_status_name((uint32_t)expect_s_), zkl_last_error_message(),              \
              zkl_status_name((uint32_t)(want)));                                          \
      return false;                                                                        \
    }                                                                                      \
  } while (0)

/* Fails the current test unless `cond` holds. */
#define ASSERT(cond)                                                                       \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);         \
      return false;                                                                        \
    }                                                                                      \
  } while (0)

struct test {
  const char *name;
  bool (*run)(void);
};

static inline const char *zkl_example_hosts(void) {
  const char *h = getenv("ZKL_HOSTS");
  return h && *h ? h : "127.0.0.1:2181";
}

/* How long a connect may wait, in ms: ZKL_CONNECT_TIMEOUT_MS if set, else `dflt`. */
static inline uint32_t zkl_example_connect_timeout_ms(uint32_t dflt) {
  const char *v = getenv("ZKL_CONNECT_TIMEOUT_MS");
  long ms = v && *v ? strtol(v, NULL, 10) : 0;
  return ms > 0 ? (uint32_t)ms : dflt;
}

/* "<ZKL_PATH>/<name>" in buf. */
static inline const char *lock_path(char *buf, size_t len, const char *name) {
  const char *base = getenv("ZKL_PATH");
  snprintf(buf, len, "%s/%s", base && *base ? base : "/zklock-examples", name);
  return buf;
}

/* A new session, or NULL after printing why. zkl_client_connect waits for the connection as
 * long as the session timeout; with ZKL_CONNECT_TIMEOUT_MS, zkl_client_connect_with as long as
 * that. */
static inline zkl_client *connect_client(void) {
  zkl_client *client = NULL;
  uint32_t connect_ms = zkl_example_connect_timeout_ms(0);
  zkl_status s = connect_ms
                     ? zkl_client_connect_with(zkl_example_hosts(), 5000, connect_ms, NULL, &client)
                     : zkl_client_connect(zkl_example_hosts(), 5000, &client);
  if (s != ZKL_OK) {
    fprintf(stderr, "connect to %s: %s: %s\n", zkl_example_hosts(), zkl_status_name((uint32_t)s),
            zkl_last_error_message());
    return NULL;
  }
  return client;
}

static inline void sleep_ms(long ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

static inline long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Runs every test; the process's exit code is the verdict. */
static inline int run_tests(const char *program, const struct test *tests, size_t n) {
  size_t failed = 0, i;
  printf("%s: zklock %s, ZooKeeper at %s\n", program, zkl_version(), zkl_example_hosts());
  for (i = 0; i < n; i++) {
    bool ok = tests[i].run();
    printf("%s %s\n", ok ? "ok  " : "FAIL", tests[i].name);
    if (!ok) failed++;
  }
  if (failed) {
    printf("%s: %lu of %lu tests FAILED\n", program, (unsigned long)failed, (unsigned long)n);
    return 1;
  }
  printf("%s: all %lu tests passed\n", program, (unsigned long)n);
  return 0;
}

typedef zkl_status (*lock_ctor)(zkl_client *client, const char *path, zkl_lock **out_lock);

/*
 * The contention mode: `rounds` times, take the lock, read the number in `counter_file`, wait
 * a little, write it back plus one, release. Run by two processes at once, the file ends at
 * twice `rounds` only if the lock really excluded. Returns the exit code.
 */
static inline int contend(lock_ctor ctor, const char *path, const char *counter_file, int rounds) {
  zkl_client *client = connect_client();
  zkl_lock *lock = NULL;
  int i, rc = 1;
  int64_t last_token = 0;
  if (!client) return 1;
  if (ctor(client, path, &lock) != ZKL_OK) {
    fprintf(stderr, "new lock at %s: %s\n", path, zkl_last_error_message());
    goto out;
  }
  for (i = 0; i < rounds; i++) {
    long value = 0;
    int64_t token = 0;
    FILE *f;
    zkl_status s = zkl_lock_acquire(lock, 30000);
    if (s != ZKL_OK) {
      fprintf(stderr, "acquire: %s: %s\n", zkl_status_name((uint32_t)s), zkl_last_error_message());
      goto out;
    }
    s = zkl_lock_fencing_token(lock, &token);
    if (s == ZKL_OK) {
      if (token <= last_token) {
        fprintf(stderr, "fencing token %lld after %lld\n", (long long)token, (long long)last_token);
        goto out;
      }
      last_token = token;
    } else {
      fprintf(stderr, "fencing token: %s\n", zkl_last_error_message());
      goto out;
    }
    f = fopen(counter_file, "r");
    if (f) {
      if (fscanf(f, "%ld", &value) != 1) value = 0;
      fclose(f);
    }
    sleep_ms(2);
    f = fopen(counter_file, "w");
    if (!f) {
      perror(counter_file);
      goto out;
    }
    fprintf(f, "%ld\n", value + 1);
    fclose(f);
    s = zkl_lock_release(lock);
    if (s != ZKL_OK) {
      fprintf(stderr, "release: %s: %s\n", zkl_status_name((uint32_t)s), zkl_last_error_message());
      goto out;
    }
  }
  rc = 0;
out:
  zkl_lock_free(lock);
  zkl_client_free(client);
  return rc;
}

#endif /* ZKL_EXAMPLES_COMMON_H */

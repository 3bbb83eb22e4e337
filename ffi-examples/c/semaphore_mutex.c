/*
 * The non-reentrant mutex that any thread may release (zkl_semaphore_mutex_new) from C.
 *
 *   semaphore_mutex                      run the tests below (exit code 0: all passed)
 *   semaphore_mutex contend FILE ROUNDS  the two-process contention loop of common.h
 */
#include "common.h"

#include <pthread.h>

static char path[256];

static void *release_it(void *arg) {
  static zkl_status status;
  status = zkl_lock_release((zkl_lock *)arg);
  return &status;
}

static bool test_release_from_another_thread(void) {
  zkl_client *c = connect_client();
  zkl_lock *l = NULL;
  pthread_t t;
  void *result = NULL;
  ASSERT(c);
  CHECK(zkl_semaphore_mutex_new(c, lock_path(path, sizeof path, "semmutex/threads"), &l));
  CHECK(zkl_lock_acquire(l, 10000));
  EXPECT(zkl_lock_acquire(l, 0), ZKL_WOULD_DEADLOCK); /* not reentrant: refused, no self-deadlock */
  ASSERT(pthread_create(&t, NULL, release_it, l) == 0);
  ASSERT(pthread_join(t, &result) == 0);
  ASSERT(*(zkl_status *)result == ZKL_OK);
  ASSERT(zkl_lock_is_held(l) == 0);
  zkl_lock_free(l);
  zkl_client_free(c);
  return true;
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"release_from_another_thread", test_release_from_another_thread},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(zkl_semaphore_mutex_new, lock_path(path, sizeof path, "semmutex/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("semaphore_mutex", tests, sizeof tests / sizeof tests[0]);
}

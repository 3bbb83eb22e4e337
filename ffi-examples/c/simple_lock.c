/*
 * The simple lock (one ephemeral node at the path itself) from C.
 *
 *   simple_lock                      run the tests below (exit code 0: all passed)
 *   simple_lock contend FILE ROUNDS  the two-process contention loop of common.h
 */
#include "common.h"

static char path[256];

static bool test_acquire_release(void) {
  zkl_client *c = connect_client();
  zkl_lock *l = NULL;
  int64_t token = 0;
  ASSERT(c);
  CHECK(zkl_simple_lock_new(c, lock_path(path, sizeof path, "simple/basic"), &l));
  EXPECT(zkl_lock_release(l), ZKL_NOT_HELD);
  CHECK(zkl_lock_acquire(l, 0));
  ASSERT(zkl_lock_is_held(l) == 1);
  CHECK(zkl_lock_fencing_token(l, &token));
  ASSERT(token > 0);
  EXPECT(zkl_lock_acquire(l, 0), ZKL_WOULD_DEADLOCK); /* not reentrant */
  CHECK(zkl_lock_release(l));
  ASSERT(zkl_lock_is_held(l) == 0);
  zkl_lock_free(l);
  zkl_client_free(c);
  return true;
}

static bool test_busy_and_wait(void) {
  zkl_client *c1 = connect_client(), *c2 = connect_client();
  zkl_lock *a = NULL, *b = NULL;
  ASSERT(c1 && c2);
  lock_path(path, sizeof path, "simple/busy");
  CHECK(zkl_simple_lock_new(c1, path, &a));
  CHECK(zkl_simple_lock_new(c2, path, &b));
  CHECK(zkl_lock_acquire(a, 0));
  EXPECT(zkl_lock_acquire(b, 0), ZKL_TIMEOUT);
  EXPECT(zkl_lock_acquire(b, 200), ZKL_TIMEOUT);
  zkl_lock_free(a); /* freeing a held lock releases it */
  CHECK(zkl_lock_acquire(b, 5000));
  zkl_lock_free(b);
  zkl_client_free(c1);
  zkl_client_free(c2);
  return true;
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"acquire_release", test_acquire_release},
      {"busy_and_wait", test_busy_and_wait},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(zkl_simple_lock_new, lock_path(path, sizeof path, "simple/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("simple_lock", tests, sizeof tests / sizeof tests[0]);
}

/*
 * The all-or-nothing multi-lock (zkl_multi_lock_new) from C.
 *
 *   multi_lock                          run the tests below (exit code 0: all passed)
 *   multi_lock contend FILE ROUNDS      the two-process contention loop of common.h
 */
#include "common.h"

static char path[256];

static bool test_all_or_nothing(void) {
  zkl_client *c1 = connect_client(), *c2 = connect_client();
  zkl_lock *parts[3] = {NULL, NULL, NULL};
  zkl_lock *multi = NULL, *other = NULL;
  char p1[256], p2[256], p3[256];
  ASSERT(c1 && c2);
  CHECK(zkl_mutex_new(c1, lock_path(p1, sizeof p1, "multi/orders"), &parts[0]));
  CHECK(zkl_write_lock_new(c1, lock_path(p2, sizeof p2, "multi/catalog"), &parts[1]));
  CHECK(zkl_semaphore_new(c1, lock_path(p3, sizeof p3, "multi/pool"), 2, &parts[2]));
  EXPECT(zkl_multi_lock_new(parts, 0, &multi), ZKL_INVALID_ARGUMENT);
  ASSERT(multi == NULL);
  CHECK(zkl_multi_lock_new(parts, 3, &multi)); /* takes ownership of parts[0..3) */

  CHECK(zkl_mutex_new(c2, p1, &other));
  CHECK(zkl_lock_acquire(other, 0));
  EXPECT(zkl_lock_acquire(multi, 300), ZKL_TIMEOUT); /* one busy: holds none of them */
  ASSERT(zkl_lock_is_held(multi) == 0);
  CHECK(zkl_lock_release(other));

  CHECK(zkl_lock_acquire(multi, 10000));
  ASSERT(zkl_lock_is_held(multi) == 1);
  EXPECT(zkl_lock_acquire(other, 0), ZKL_TIMEOUT);
  CHECK(zkl_lock_release(multi));
  CHECK(zkl_lock_acquire(other, 0));
  zkl_lock_free(other);
  zkl_lock_free(multi); /* frees parts[0..3) too */
  zkl_client_free(c1);
  zkl_client_free(c2);
  return true;
}

/* The contention mode's lock: a multi-lock over two mutexes. */
static zkl_status two_mutexes(zkl_client *client, const char *p, zkl_lock **out) {
  char a[300], b[300];
  zkl_lock *parts[2] = {NULL, NULL};
  zkl_status s;
  snprintf(a, sizeof a, "%s/a", p);
  snprintf(b, sizeof b, "%s/b", p);
  if ((s = zkl_mutex_new(client, a, &parts[0])) != ZKL_OK) return s;
  if ((s = zkl_mutex_new(client, b, &parts[1])) != ZKL_OK) {
    zkl_lock_free(parts[0]);
    return s;
  }
  s = zkl_multi_lock_new(parts, 2, out);
  if (s != ZKL_OK) { /* ownership moves on ZKL_OK only */
    zkl_lock_free(parts[0]);
    zkl_lock_free(parts[1]);
  }
  return s;
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"all_or_nothing", test_all_or_nothing},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(two_mutexes, lock_path(path, sizeof path, "multi/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("multi_lock", tests, sizeof tests / sizeof tests[0]);
}

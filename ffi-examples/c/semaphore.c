/*
 * The counting semaphore (zkl_semaphore_new) from C.
 *
 *   semaphore                          run the tests below (exit code 0: all passed)
 *   semaphore contend FILE ROUNDS      the two-process contention loop of common.h (1 lease)
 */
#include "common.h"

static char path[256];

static bool test_at_most_n_leases(void) {
  zkl_client *c1 = connect_client(), *c2 = connect_client();
  zkl_lock *a = NULL, *b = NULL, *bad = NULL;
  ASSERT(c1 && c2);
  lock_path(path, sizeof path, "semaphore/three");
  EXPECT(zkl_semaphore_new(c1, path, 0, &bad), ZKL_INVALID_ARGUMENT);
  ASSERT(bad == NULL);
  CHECK(zkl_semaphore_new(c1, path, 3, &a));
  CHECK(zkl_semaphore_new(c2, path, 3, &b));
  CHECK(zkl_lock_acquire(a, 10000));
  CHECK(zkl_lock_acquire(a, 10000)); /* a handle may hold several leases */
  CHECK(zkl_lock_acquire(b, 10000));
  EXPECT(zkl_lock_acquire(b, 0), ZKL_TIMEOUT); /* all 3 taken */
  EXPECT(zkl_lock_acquire(b, 300), ZKL_TIMEOUT);
  CHECK(zkl_lock_release(a)); /* returns a's most recent lease */
  CHECK(zkl_lock_acquire(b, 10000));
  CHECK(zkl_lock_release(b));
  CHECK(zkl_lock_release(b));
  EXPECT(zkl_lock_release(b), ZKL_NOT_HELD);
  zkl_lock_free(a); /* returns a's last lease */
  zkl_lock_free(b);
  zkl_client_free(c1);
  zkl_client_free(c2);
  return true;
}

static zkl_status one_lease(zkl_client *client, const char *p, zkl_lock **out) {
  return zkl_semaphore_new(client, p, 1, out);
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"at_most_n_leases", test_at_most_n_leases},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(one_lease, lock_path(path, sizeof path, "semaphore/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("semaphore", tests, sizeof tests / sizeof tests[0]);
}

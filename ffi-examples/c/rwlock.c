/*
 * The read-write lock (zkl_read_lock_new / zkl_write_lock_new) from C.
 *
 *   rwlock                          run the tests below (exit code 0: all passed)
 *   rwlock contend FILE ROUNDS      the two-process contention loop of common.h (write half)
 */
#include "common.h"

static char path[256];

static bool test_readers_share_writers_exclude(void) {
  zkl_client *c1 = connect_client(), *c2 = connect_client();
  zkl_lock *r1 = NULL, *r2 = NULL, *w = NULL;
  int64_t tr = 0, tw = 0;
  ASSERT(c1 && c2);
  lock_path(path, sizeof path, "rwlock/share");
  CHECK(zkl_read_lock_new(c1, path, &r1));
  CHECK(zkl_read_lock_new(c2, path, &r2));
  CHECK(zkl_write_lock_new(c2, path, &w));
  CHECK(zkl_lock_acquire(r1, 10000));
  CHECK(zkl_lock_acquire(r2, 10000)); /* readers share */
  CHECK(zkl_lock_fencing_token(r1, &tr));
  EXPECT(zkl_lock_acquire(w, 0), ZKL_TIMEOUT); /* a writer waits for every reader */
  CHECK(zkl_lock_release(r1));
  EXPECT(zkl_lock_acquire(w, 200), ZKL_TIMEOUT);
  CHECK(zkl_lock_release(r2));
  CHECK(zkl_lock_acquire(w, 10000));
  CHECK(zkl_lock_fencing_token(w, &tw));
  ASSERT(tw > tr);
  EXPECT(zkl_lock_acquire(r1, 0), ZKL_TIMEOUT); /* readers wait for the writer */
  CHECK(zkl_lock_release(w));
  CHECK(zkl_lock_acquire(r1, 10000));
  zkl_lock_free(r1);
  zkl_lock_free(r2);
  zkl_lock_free(w);
  zkl_client_free(c1);
  zkl_client_free(c2);
  return true;
}

static bool test_reentrant_read(void) {
  zkl_client *c = connect_client();
  zkl_lock *r = NULL;
  ASSERT(c);
  CHECK(zkl_read_lock_new(c, lock_path(path, sizeof path, "rwlock/reentrant"), &r));
  CHECK(zkl_lock_acquire(r, 0));
  CHECK(zkl_lock_acquire(r, 0));
  CHECK(zkl_lock_release(r));
  ASSERT(zkl_lock_is_held(r) == 1);
  CHECK(zkl_lock_release(r));
  EXPECT(zkl_lock_release(r), ZKL_NOT_HELD);
  zkl_lock_free(r);
  zkl_client_free(c);
  return true;
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"readers_share_writers_exclude", test_readers_share_writers_exclude},
      {"reentrant_read", test_reentrant_read},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(zkl_write_lock_new, lock_path(path, sizeof path, "rwlock/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("rwlock", tests, sizeof tests / sizeof tests[0]);
}

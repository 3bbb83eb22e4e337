/*
 * The fair, reentrant mutex from C.
 *
 *   mutex                          run the tests below (exit code 0: all passed)
 *   mutex contend FILE ROUNDS      the two-process contention loop of common.h
 */
#include "common.h"

#include <pthread.h>

static char path[256];

static bool test_acquire_release(void) {
  zkl_client *c = connect_client();
  zkl_lock *m = NULL;
  int64_t token = 0;
  ASSERT(c);
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "mutex/basic"), &m));
  ASSERT(zkl_lock_is_held(m) == 0);
  CHECK(zkl_lock_acquire(m, -1));
  ASSERT(zkl_lock_is_held(m) == 1);
  CHECK(zkl_lock_fencing_token(m, &token));
  ASSERT(token > 0);
  CHECK(zkl_lock_release(m));
  ASSERT(zkl_lock_is_held(m) == 0);
  EXPECT(zkl_lock_release(m), ZKL_NOT_HELD);
  EXPECT(zkl_lock_fencing_token(m, &token), ZKL_NOT_HELD);
  zkl_lock_free(m);
  zkl_client_free(c);
  return true;
}

static bool test_busy_timeout_and_handover(void) {
  zkl_client *c1 = connect_client(), *c2 = connect_client();
  zkl_lock *a = NULL, *b = NULL;
  int64_t ta = 0, tb = 0;
  long long t0;
  ASSERT(c1 && c2);
  lock_path(path, sizeof path, "mutex/busy");
  CHECK(zkl_mutex_new(c1, path, &a));
  CHECK(zkl_mutex_new(c2, path, &b));
  CHECK(zkl_lock_acquire(a, 0));
  CHECK(zkl_lock_fencing_token(a, &ta));
  EXPECT(zkl_lock_acquire(b, 0), ZKL_TIMEOUT); /* busy: try once */
  t0 = now_ms();
  EXPECT(zkl_lock_acquire(b, 300), ZKL_TIMEOUT);
  ASSERT(now_ms() - t0 >= 300);
  CHECK(zkl_lock_release(a));
  CHECK(zkl_lock_acquire(b, 5000));
  CHECK(zkl_lock_fencing_token(b, &tb));
  ASSERT(tb > ta); /* fencing tokens increase from holder to holder */
  zkl_lock_free(b); /* releases */
  CHECK(zkl_lock_acquire(a, 5000));
  zkl_lock_free(a);
  zkl_client_free(c1);
  zkl_client_free(c2);
  return true;
}

static bool test_reentrant(void) {
  zkl_client *c = connect_client();
  zkl_lock *m = NULL;
  ASSERT(c);
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "mutex/reentrant"), &m));
  CHECK(zkl_lock_acquire(m, 0));
  CHECK(zkl_lock_acquire(m, 0)); /* the same thread again: n acquires need n releases */
  CHECK(zkl_lock_release(m));
  ASSERT(zkl_lock_is_held(m) == 1);
  CHECK(zkl_lock_release(m));
  ASSERT(zkl_lock_is_held(m) == 0);
  zkl_lock_free(m);
  zkl_client_free(c);
  return true;
}

struct waiter {
  zkl_lock *lock;
  zkl_status status;
};

static void *wait_forever(void *arg) {
  struct waiter *w = arg;
  w->status = zkl_lock_acquire(w->lock, -1);
  return NULL;
}

static bool test_cancel_from_another_thread(void) {
  zkl_client *c1 = connect_client(), *c2 = connect_client();
  zkl_lock *a = NULL, *b = NULL;
  struct waiter w;
  pthread_t t;
  ASSERT(c1 && c2);
  lock_path(path, sizeof path, "mutex/cancel");
  CHECK(zkl_mutex_new(c1, path, &a));
  CHECK(zkl_mutex_new(c2, path, &b));
  CHECK(zkl_lock_acquire(a, 0));
  w.lock = b;
  w.status = ZKL_OK;
  ASSERT(pthread_create(&t, NULL, wait_forever, &w) == 0);
  sleep_ms(200);
  CHECK(zkl_lock_cancel(b)); /* any thread may cancel */
  ASSERT(pthread_join(t, NULL) == 0);
  ASSERT(w.status == ZKL_CANCELLED);
  zkl_lock_free(b); /* only after the acquiring thread returned */
  zkl_lock_free(a);
  zkl_client_free(c1);
  zkl_client_free(c2);
  return true;
}

static bool test_errors(void) {
  zkl_client *c = connect_client();
  zkl_lock *m = NULL;
  ASSERT(c);
  EXPECT(zkl_mutex_new(c, "no-leading-slash", &m), ZKL_INVALID_ARGUMENT);
  ASSERT(m == NULL); /* out-parameters are written only on ZKL_OK */
  ASSERT(strstr(zkl_last_error_message(), "not absolute") != NULL);
  EXPECT(zkl_mutex_new(c, NULL, &m), ZKL_INVALID_ARGUMENT);
  EXPECT(zkl_client_set_protocol(c, 42), ZKL_INVALID_ARGUMENT);
  EXPECT(zkl_lock_acquire(NULL, 0), ZKL_INVALID_ARGUMENT);
  ASSERT(strcmp(zkl_status_name(ZKL_TIMEOUT), "ZKL_TIMEOUT") == 0);
  ASSERT(strcmp(zkl_status_name(1000), "ZKL_UNKNOWN_STATUS") == 0);
  zkl_lock_free(NULL);
  zkl_client_free(c);
  return true;
}

static bool test_kazoo_protocol(void) {
  zkl_client *c = connect_client();
  zkl_lock *m = NULL;
  ASSERT(c);
  CHECK(zkl_client_set_protocol(c, ZKL_PROTOCOL_KAZOO));
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "mutex/kazoo"), &m));
  CHECK(zkl_lock_acquire(m, 10000));
  CHECK(zkl_lock_release(m));
  zkl_lock_free(m);
  zkl_client_free(c);
  return true;
}

/* The library's log lines reach the host on the library's log thread, a moment after they
   are logged: an acquire is logged with its lock path, at DEBUG (INFO is for what an operator
   acts on: losses, background deletes, session changes). Removing the callback (NULL) ends its
   calls. */
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static int log_calls, acquired_lines;

static void on_log(uint32_t level, const char *target, const char *message, void *user) {
  pthread_mutex_lock(&log_mu);
  (*(int *)user)++;
  if (level == ZKL_LOG_DEBUG && strncmp(target, "zklock", 6) == 0 &&
      strstr(message, "acquired ") != NULL && strstr(message, "log/callback") != NULL) {
    acquired_lines++;
  }
  pthread_mutex_unlock(&log_mu);
}

static int log_count(int *n) {
  int v;
  pthread_mutex_lock(&log_mu);
  v = *n;
  pthread_mutex_unlock(&log_mu);
  return v;
}

static bool test_log_callback_hears_an_acquire(void) {
  zkl_client *c = NULL;
  zkl_lock *l = NULL;
  int calls = 0;
  long long t0;
  CHECK(zkl_set_log_callback(NULL, ZKL_LOG_INFO, NULL)); /* none set: nothing to remove */
  EXPECT(zkl_set_log_callback(on_log, 9, &log_calls), ZKL_INVALID_ARGUMENT);
  CHECK(zkl_set_log_callback(on_log, ZKL_LOG_DEBUG, &log_calls));
  /* One at a time. */
  EXPECT(zkl_set_log_callback(on_log, ZKL_LOG_INFO, &log_calls), ZKL_INVALID_ARGUMENT);
  c = connect_client();
  ASSERT(c);
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "log/callback"), &l));
  CHECK(zkl_lock_acquire(l, 10000));
  CHECK(zkl_lock_release(l));
  zkl_lock_free(l);
  zkl_client_free(c);
  /* Delivered by the log thread, a moment later (the connect's lines may come first). */
  for (t0 = now_ms();
       (log_count(&log_calls) < 2 || log_count(&acquired_lines) < 1) && now_ms() - t0 < 5000;) {
    sleep_ms(10);
  }
  ASSERT(log_count(&acquired_lines) == 1);
  ASSERT(log_count(&log_calls) >= 2); /* at least the acquire and the release */
  CHECK(zkl_set_log_callback(NULL, 0, NULL)); /* returns once no call is under way */
  calls = log_count(&log_calls);
  c = connect_client(); /* logs a line */
  ASSERT(c);
  zkl_client_free(c);
  sleep_ms(100);
  ASSERT(log_count(&log_calls) == calls); /* removed: called no more */
  return true;
}

/* The other way to hear the library: lines queued for zkl_log_next, taken on a thread of the
   program's own (as the Python package does). */
static bool test_log_lines_pulled_on_this_thread(void) {
  zkl_client *c = NULL;
  zkl_lock *l = NULL;
  uint32_t level = 0;
  const char *target = NULL, *message = NULL;
  int found = 0;
  zkl_status s;
  EXPECT(zkl_log_next(0, &level, &target, &message), ZKL_CANCELLED); /* not started */
  CHECK(zkl_log_start(ZKL_LOG_DEBUG));
  c = connect_client();
  ASSERT(c);
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "log/pull"), &l));
  CHECK(zkl_lock_acquire(l, 10000));
  CHECK(zkl_lock_release(l));
  zkl_lock_free(l);
  zkl_client_free(c);
  while (!found && (s = zkl_log_next(2000, &level, &target, &message)) == ZKL_OK) {
    found = level == ZKL_LOG_DEBUG && strstr(message, "acquired ") != NULL &&
            strstr(message, "log/pull") != NULL;
  }
  ASSERT(found);
  CHECK(zkl_log_stop());
  EXPECT(zkl_log_next(0, &level, &target, &message), ZKL_CANCELLED);
  return true;
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"acquire_release", test_acquire_release},
      {"busy_timeout_and_handover", test_busy_timeout_and_handover},
      {"reentrant", test_reentrant},
      {"cancel_from_another_thread", test_cancel_from_another_thread},
      {"errors", test_errors},
      {"kazoo_protocol", test_kazoo_protocol},
      {"log_callback_hears_an_acquire", test_log_callback_hears_an_acquire},
      {"log_lines_pulled_on_this_thread", test_log_lines_pulled_on_this_thread},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(zkl_mutex_new, lock_path(path, sizeof path, "mutex/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("mutex", tests, sizeof tests / sizeof tests[0]);
}

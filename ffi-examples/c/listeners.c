/*
 * What Curator's and kazoo's users get from listeners, from C: a thread that learns when the
 * hold stops being believed (zkl_lock_wait_lost), a session-state listener
 * (zkl_client_wait_session_event), who holds and who waits (zkl_lock_participants, with the
 * holder ids of zkl_client_connect_with), and zkl_client_close. Every wait runs on a thread of
 * the program's own: the library never calls into it.
 *
 *   listeners                      run the tests below (exit code 0: all passed)
 *   listeners contend FILE ROUNDS  the two-process contention loop of common.h
 */
#include "common.h"

#include <pthread.h>

static char path[256];

static zkl_client *connect_as(const char *holder_id) {
  zkl_client *c = NULL;
  zkl_status s = zkl_client_connect_with(zkl_example_hosts(), 5000,
                                         zkl_example_connect_timeout_ms(2000), holder_id, &c);
  if (s != ZKL_OK) {
    fprintf(stderr, "connect: %s: %s\n", zkl_status_name((uint32_t)s), zkl_last_error_message());
    return NULL;
  }
  return c;
}

/* The "on lost" watcher: waits in slices so that it can be told to stop. */
struct watcher {
  zkl_lock *lock;
  volatile int stop;
  zkl_status outcome;
  uint32_t state; /* the hold state when it woke */
};

static void *watch_lost(void *arg) {
  struct watcher *w = arg;
  w->outcome = ZKL_TIMEOUT;
  while (!w->stop) {
    zkl_status s = zkl_lock_wait_lost(w->lock, 200);
    if (s == ZKL_TIMEOUT) continue;
    w->outcome = s;
    if (s == ZKL_OK) zkl_lock_hold_state(w->lock, &w->state);
    break;
  }
  return NULL;
}

static bool test_a_lost_watcher_wakes_on_close_and_ends_on_release(void) {
  zkl_client *c = connect_as("watcher-example");
  zkl_lock *l = NULL;
  pthread_t t;
  struct watcher w = {0};
  ASSERT(c);
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "listeners/lost"), &l));
  EXPECT(zkl_lock_wait_lost(l, 0), ZKL_NOT_HELD);

  /* A release ends the watch: nothing was lost. */
  CHECK(zkl_lock_acquire(l, 5000));
  w.lock = l;
  ASSERT(pthread_create(&t, NULL, watch_lost, &w) == 0);
  sleep_ms(100);
  CHECK(zkl_lock_release(l));
  ASSERT(pthread_join(t, NULL) == 0);
  ASSERT(w.outcome == ZKL_NOT_HELD);

  /* The session ends under the hold: the watcher wakes and sees LOST. */
  CHECK(zkl_lock_acquire(l, 5000));
  w.stop = 0;
  ASSERT(pthread_create(&t, NULL, watch_lost, &w) == 0);
  sleep_ms(100);
  CHECK(zkl_client_close(c));
  ASSERT(pthread_join(t, NULL) == 0);
  ASSERT(w.outcome == ZKL_OK);
  ASSERT(w.state == ZKL_HOLD_LOST);
  EXPECT(zkl_lock_release(l), ZKL_LOCK_LOST);
  EXPECT(zkl_lock_acquire(l, 0), ZKL_CLOSED);
  zkl_lock_free(l);
  zkl_client_free(c);
  return true;
}

struct listener {
  zkl_client *client;
  uint32_t states[8];
  int n;
  zkl_status end;
};

static void *listen_session(void *arg) {
  struct listener *li = arg;
  zkl_session_event e = {0};
  for (;;) {
    zkl_status s = zkl_client_wait_session_event(li->client, e.seq, 10000, &e);
    if (s != ZKL_OK) {
      li->end = s;
      return NULL;
    }
    if (li->n < 8) li->states[li->n++] = e.state;
  }
}

static bool test_the_session_listener_hears_the_close_then_ends(void) {
  zkl_client *c = connect_as(NULL);
  pthread_t t;
  struct listener li = {0};
  uint32_t state = 99;
  ASSERT(c);
  CHECK(zkl_client_session_state(c, &state));
  ASSERT(state == ZKL_SESSION_STATE_CONNECTED);
  li.client = c;
  ASSERT(pthread_create(&t, NULL, listen_session, &li) == 0);
  sleep_ms(100);
  CHECK(zkl_client_close(c));
  ASSERT(pthread_join(t, NULL) == 0);
  ASSERT(li.n == 1 && li.states[0] == ZKL_SESSION_STATE_CLOSED);
  ASSERT(li.end == ZKL_CLOSED);
  CHECK(zkl_client_session_state(c, &state));
  ASSERT(state == ZKL_SESSION_STATE_CLOSED);
  zkl_client_free(c);
  return true;
}

static void *acquire_it(void *arg) {
  static zkl_status status;
  status = zkl_lock_acquire((zkl_lock *)arg, 10000);
  return &status;
}

static bool test_participants_name_the_holder_then_the_waiter(void) {
  zkl_client *a = connect_as("orders-a"), *b = connect_as("orders-b");
  zkl_lock *la = NULL, *lb = NULL;
  zkl_participants *ps = NULL;
  zkl_participant p, q;
  const char *id = NULL;
  pthread_t t;
  void *result = NULL;
  long long until;
  ASSERT(a && b);
  CHECK(zkl_client_holder_id(a, &id));
  ASSERT(strcmp(id, "orders-a") == 0);
  lock_path(path, sizeof path, "listeners/participants");
  CHECK(zkl_mutex_new(a, path, &la));
  CHECK(zkl_mutex_new(b, path, &lb));
  CHECK(zkl_lock_acquire(la, 5000));
  ASSERT(pthread_create(&t, NULL, acquire_it, lb) == 0);
  until = now_ms() + 5000;
  for (;;) { /* until b's node is queued */
    CHECK(zkl_lock_participants(la, &ps));
    if (zkl_participants_count(ps) == 2 || now_ms() > until) break;
    zkl_participants_free(ps);
    sleep_ms(20);
  }
  ASSERT(zkl_participants_count(ps) == 2);
  CHECK(zkl_participants_get(ps, 0, &p));
  CHECK(zkl_participants_get(ps, 1, &q));
  ASSERT(p.is_holder == 1 && strcmp(p.holder_id, "orders-a") == 0);
  ASSERT(q.is_holder == 0 && strcmp(q.holder_id, "orders-b") == 0);
  ASSERT(p.sequence < q.sequence);
  EXPECT(zkl_participants_get(ps, 2, &p), ZKL_INVALID_ARGUMENT);
  zkl_participants_free(ps);
  CHECK(zkl_lock_release(la));
  ASSERT(pthread_join(t, &result) == 0);
  ASSERT(*(zkl_status *)result == ZKL_OK);
  CHECK(zkl_lock_release(lb));
  zkl_lock_free(la);
  zkl_lock_free(lb);
  zkl_client_free(a);
  zkl_client_free(b);
  return true;
}

int main(int argc, char **argv) {
  static const struct test tests[] = {
      {"a_lost_watcher_wakes_on_close_and_ends_on_release",
       test_a_lost_watcher_wakes_on_close_and_ends_on_release},
      {"the_session_listener_hears_the_close_then_ends",
       test_the_session_listener_hears_the_close_then_ends},
      {"participants_name_the_holder_then_the_waiter",
       test_participants_name_the_holder_then_the_waiter},
  };
  if (argc == 4 && strcmp(argv[1], "contend") == 0) {
    return contend(zkl_mutex_new, lock_path(path, sizeof path, "listeners/contend"), argv[2], atoi(argv[3]));
  }
  if (argc != 1) {
    fprintf(stderr, "usage: %s [contend COUNTER_FILE ROUNDS]\n", argv[0]);
    return 2;
  }
  return run_tests("listeners", tests, sizeof tests / sizeof tests[0]);
}

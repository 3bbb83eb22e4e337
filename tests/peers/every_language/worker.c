/* A holder of tests/it/every_language.rs, in C: the mutex at PATH, HOLDS times, from when HISTORY.go exists.
 *
 * Usage: worker HOSTS PATH curator|kazoo HOLDS HISTORY WHO
 * Each hold appends "enter W WHO TOKEN" after its acquire and "exit W WHO" before its release
 * to HISTORY, one write(2) per line on an O_APPEND descriptor. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zklock.h>

static int history = -1;

static void append(const char *line) {
  size_t n = strlen(line);
  if (write(history, line, n) != (ssize_t)n) {
    perror("append to the history");
    exit(2);
  }
}

static void check(enum zkl_status s, const char *what) {
  if (s != ZKL_OK) {
    fprintf(stderr, "%s: %s\n", what, zkl_last_error_message());
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: worker HOSTS PATH curator|kazoo HOLDS HISTORY WHO\n");
    return 2;
  }
  const char *who = argv[6];
  int holds = atoi(argv[4]);
  history = open(argv[5], O_WRONLY | O_APPEND);
  if (history < 0) {
    perror(argv[5]);
    return 2;
  }
  struct zkl_options *o = NULL;
  check(zkl_options_new(&o), "zkl_options_new");
  check(zkl_options_set_protocol(o, strcmp(argv[3], "kazoo") == 0 ? ZKL_PROTOCOL_KAZOO
                                                                 : ZKL_PROTOCOL_CURATOR),
        "zkl_options_set_protocol");
  struct zkl_client *c = NULL;
  check(zkl_client_connect_with_options(argv[1], o, &c), "zkl_client_connect_with_options");
  zkl_options_free(o);
  struct zkl_lock *m = NULL;
  check(zkl_mutex_new(c, argv[2], &m), "zkl_mutex_new");
  char line[256];
  const struct timespec hold = {0, 5 * 1000 * 1000};
  /* All holders start at once: from when HISTORY.go exists. */
  printf("READY\n");
  fflush(stdout);
  snprintf(line, sizeof line, "%s.go", argv[5]);
  while (access(line, F_OK) != 0) nanosleep(&hold, NULL);
  for (int i = 0; i < holds; i++) {
    check(zkl_lock_acquire(m, -1), "zkl_lock_acquire");
    int64_t token = 0;
    check(zkl_lock_fencing_token(m, &token), "zkl_lock_fencing_token");
    snprintf(line, sizeof line, "enter W %s %" PRId64 "\n", who, token);
    append(line);
    nanosleep(&hold, NULL);
    snprintf(line, sizeof line, "exit W %s\n", who);
    append(line);
    check(zkl_lock_release(m), "zkl_lock_release");
  }
  zkl_lock_free(m);
  zkl_client_free(c);
  printf("DONE %d\n", holds);
  return 0;
}

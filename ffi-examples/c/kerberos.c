/*
 * Kerberos (SASL GSSAPI) from C: a connect with the process's Kerberos credentials, a mutex
 * whose nodes only this principal may touch (ZKL_ACL_CREATOR_ALL), and what a user sees when
 * the credentials are wrong (ZKL_AUTH_FAILED, and a message that says what to fix).
 *
 *   kerberos lock      connect, take and release <ZKL_PATH>/kerberos; prints the fencing token
 *   kerberos refused   expect the connect to fail with ZKL_AUTH_FAILED; prints the message
 *   kerberos denied    connect, expect <ZKL_PATH>/kerberos to be refused (another principal's
 *                      creator-only nodes); prints the message
 *
 * Environment:
 *   ZKL_HOSTS           a server that requires SASL (enforce.auth.schemes=sasl) with Kerberos,
 *                       named by the host of its principal ("zk1.example.com:2181")
 *   ZKL_PATH            a lock path prefix
 *   ZKL_KRB_PRINCIPAL   the principal the credentials must be for (optional)
 *   KRB5_CONFIG, KRB5CCNAME, KRB5_CLIENT_KTNAME   the credentials, as for every Kerberos program:
 *                       a ticket in the cache (kinit), else the client keytab
 * Exit code 0: it went as the mode says.
 */
#include "common.h"

static char path[256];

#define CONNECT_TIMEOUT_MS 8000

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* Options for Kerberos: the principal from the environment, the servers' default service
 * ("zookeeper") and each server's host from the host list. */
static bool kerberos_options(zkl_options **o) {
  CHECK(zkl_options_new(o));
  CHECK(zkl_options_set_connect_timeout(*o, CONNECT_TIMEOUT_MS));
  CHECK(zkl_options_set_sasl_gssapi(*o, env("ZKL_KRB_PRINCIPAL"), NULL, NULL));
  CHECK(zkl_options_set_acl(*o, ZKL_ACL_CREATOR_ALL));
  return true;
}

static bool lock(void) {
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  zkl_lock *m = NULL;
  int64_t token = 0;
  bool ok = kerberos_options(&o);
  ok = ok && zkl_client_connect_with_options(zkl_example_hosts(), o, &c) == ZKL_OK;
  zkl_options_free(o);
  if (!ok) {
    fprintf(stderr, "connect: %s\n", zkl_last_error_message());
    return false;
  }
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "kerberos"), &m));
  CHECK(zkl_lock_acquire(m, 10000));
  ASSERT(zkl_lock_is_held(m) == 1);
  CHECK(zkl_lock_fencing_token(m, &token));
  printf("held %s, fencing token %lld\n", path, (long long)token);
  CHECK(zkl_lock_release(m));
  zkl_lock_free(m);
  zkl_client_free(c);
  return true;
}

static bool refused(void) {
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  zkl_status s;
  if (!kerberos_options(&o))
    return false;
  s = zkl_client_connect_with_options(zkl_example_hosts(), o, &c);
  zkl_options_free(o);
  printf("%s: %s\n", zkl_status_name((uint32_t)s), zkl_last_error_message());
  zkl_client_free(c);
  return s == ZKL_AUTH_FAILED;
}

static bool denied(void) {
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  zkl_lock *m = NULL;
  zkl_status s;
  bool ok = kerberos_options(&o);
  ok = ok && zkl_client_connect_with_options(zkl_example_hosts(), o, &c) == ZKL_OK;
  zkl_options_free(o);
  if (!ok) {
    fprintf(stderr, "connect: %s\n", zkl_last_error_message());
    return false;
  }
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, "kerberos"), &m));
  s = zkl_lock_acquire(m, 10000);
  printf("%s: %s\n", zkl_status_name((uint32_t)s), zkl_last_error_message());
  zkl_lock_free(m);
  zkl_client_free(c);
  return s != ZKL_OK && strstr(zkl_last_error_message(), "not authorized") != NULL;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  bool ok;
  if (strcmp(mode, "lock") == 0)
    ok = lock();
  else if (strcmp(mode, "refused") == 0)
    ok = refused();
  else if (strcmp(mode, "denied") == 0)
    ok = denied();
  else {
    fprintf(stderr, "usage: kerberos lock|refused|denied\n");
    return 2;
  }
  return ok ? 0 : 1;
}

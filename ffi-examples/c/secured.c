/*
 * Secured ensembles from C: a connect with options (zkl_options), over mutual TLS with the
 * client's certificate and key in files, and with SASL DIGEST-MD5; then what a user sees when
 * the credentials are wrong or missing (ZKL_AUTH_FAILED, and a message that says what to fix).
 *
 *   secured        run the tests below (exit code 0: all passed)
 *
 * Environment (a test whose servers are not given is skipped):
 *   ZKL_TLS_HOSTS   a TLS-only server that requires client certificates (ssl.clientAuth=need),
 *                   e.g. "127.0.0.1:2281": the options turn TLS on for every host
 *   ZKL_TLS_CA      the CA certificate (PEM file) that signed the servers' certificates
 *   ZKL_TLS_CERT    the client's certificate (PEM file), signed by a CA the servers trust
 *   ZKL_TLS_KEY     the client's private key (PEM file)
 *   ZKL_SASL_HOSTS  a server that requires SASL (enforce.auth.schemes=sasl)
 *   ZKL_SASL_USER, ZKL_SASL_PASSWORD   a user of its JAAS Server section
 *   ZKL_PATH        a lock path prefix
 */
#include "common.h"

static char path[256];

/* How long a connect may wait; a refused one must say why within it. */
#define CONNECT_TIMEOUT_MS 8000

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* Takes and releases a mutex at <ZKL_PATH>/<name> through c; prints the fencing token. */
static bool lock_and_print_token(zkl_client *c, const char *what, const char *name) {
  zkl_lock *m = NULL;
  int64_t token = 0;
  CHECK(zkl_mutex_new(c, lock_path(path, sizeof path, name), &m));
  CHECK(zkl_lock_acquire(m, 10000));
  ASSERT(zkl_lock_is_held(m) == 1);
  CHECK(zkl_lock_fencing_token(m, &token));
  ASSERT(token > 0);
  printf("%s: held %s, fencing token %lld\n", what, path, (long long)token);
  CHECK(zkl_lock_release(m));
  zkl_lock_free(m);
  return true;
}

/* Connects with o to hosts, expecting `want`; prints the status and message. On ZKL_OK *out is
   the client. */
static bool connect_expect(const char *what, const char *hosts, const zkl_options *o,
                           zkl_status want, zkl_client **out) {
  zkl_client *c = NULL;
  long long t0 = now_ms(), took;
  zkl_status s = zkl_client_connect_with_options(hosts, o, &c);
  took = now_ms() - t0;
  if (s != ZKL_OK) {
    printf("%s: %s after %lld ms: %s\n", what, zkl_status_name((uint32_t)s), took,
           zkl_last_error_message());
    ASSERT(c == NULL); /* out-parameters are written only on ZKL_OK */
  }
  EXPECT(s, want);
  /* A refusal comes within the connect timeout (plus a little for a busy machine). */
  ASSERT(took < CONNECT_TIMEOUT_MS + 3000);
  *out = c;
  return true;
}

static bool test_mutual_tls_lock(void) {
  const char *hosts = env("ZKL_TLS_HOSTS");
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  bool ok;
  if (!hosts) {
    printf("skip mutual TLS: ZKL_TLS_HOSTS not set\n");
    return true;
  }
  ASSERT(env("ZKL_TLS_CA") && env("ZKL_TLS_CERT") && env("ZKL_TLS_KEY"));
  CHECK(zkl_options_new(&o));
  CHECK(zkl_options_set_connect_timeout(o, CONNECT_TIMEOUT_MS));
  CHECK(zkl_options_set_holder_id(o, "secured.c"));
  /* Each TLS setter turns TLS on: no zkl_options_use_tls needed. */
  CHECK(zkl_options_set_tls_ca_file(o, env("ZKL_TLS_CA")));
  CHECK(zkl_options_set_tls_identity_files(o, env("ZKL_TLS_CERT"), env("ZKL_TLS_KEY")));
  ok = connect_expect("mutual TLS", hosts, o, ZKL_OK, &c);
  zkl_options_free(o); /* the client keeps nothing of it */
  ASSERT(ok);
  ok = lock_and_print_token(c, "mutual TLS", "secured/tls");
  zkl_client_free(c);
  return ok;
}

static bool test_mutual_tls_without_a_certificate(void) {
  const char *hosts = env("ZKL_TLS_HOSTS");
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  bool ok;
  if (!hosts) {
    printf("skip mutual TLS without a certificate: ZKL_TLS_HOSTS not set\n");
    return true;
  }
  CHECK(zkl_options_new(&o));
  CHECK(zkl_options_set_connect_timeout(o, CONNECT_TIMEOUT_MS));
  CHECK(zkl_options_set_tls_ca_file(o, env("ZKL_TLS_CA")));
  ok = connect_expect("mutual TLS without a client certificate", hosts, o, ZKL_AUTH_FAILED, &c);
  zkl_options_free(o);
  ASSERT(ok);
  ASSERT(strstr(zkl_last_error_message(), "client certificate") != NULL);
  /* The setting to give, as a value and in C's words. */
  ASSERT(zkl_last_error_hint() == ZKL_HINT_TLS_IDENTITY);
  ASSERT(strstr(zkl_last_error_message(), "(zkl_options_set_tls_identity_files)") != NULL);
  return true;
}

static bool test_sasl_lock(void) {
  const char *hosts = env("ZKL_SASL_HOSTS");
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  bool ok;
  if (!hosts) {
    printf("skip SASL: ZKL_SASL_HOSTS not set\n");
    return true;
  }
  ASSERT(env("ZKL_SASL_USER") && env("ZKL_SASL_PASSWORD"));
  CHECK(zkl_options_new(&o));
  CHECK(zkl_options_set_connect_timeout(o, CONNECT_TIMEOUT_MS));
  CHECK(zkl_options_set_sasl_digest_md5(o, env("ZKL_SASL_USER"), env("ZKL_SASL_PASSWORD")));
  /* The lock nodes only this user may touch (others may read): SASL is an identity. */
  CHECK(zkl_options_set_acl(o, ZKL_ACL_CREATOR_ALL_READ_ALL));
  ok = connect_expect("SASL DIGEST-MD5", hosts, o, ZKL_OK, &c);
  zkl_options_free(o);
  ASSERT(ok);
  ok = lock_and_print_token(c, "SASL DIGEST-MD5", "secured/sasl");
  zkl_client_free(c);
  return ok;
}

static bool test_sasl_wrong_password(void) {
  const char *hosts = env("ZKL_SASL_HOSTS");
  const char *user = env("ZKL_SASL_USER");
  zkl_options *o = NULL;
  zkl_client *c = NULL;
  bool ok;
  if (!hosts) {
    printf("skip SASL with a wrong password: ZKL_SASL_HOSTS not set\n");
    return true;
  }
  ASSERT(user);
  CHECK(zkl_options_new(&o));
  CHECK(zkl_options_set_connect_timeout(o, CONNECT_TIMEOUT_MS));
  CHECK(zkl_options_set_sasl_digest_md5(o, user, "not-the-password"));
  ok = connect_expect("SASL with a wrong password", hosts, o, ZKL_AUTH_FAILED, &c);
  zkl_options_free(o);
  ASSERT(ok);
  ASSERT(strstr(zkl_last_error_message(), user) != NULL); /* names whom it refused */
  return true;
}

int main(void) {
  static const struct test tests[] = {
      {"mutual_tls_lock", test_mutual_tls_lock},
      {"mutual_tls_without_a_certificate", test_mutual_tls_without_a_certificate},
      {"sasl_lock", test_sasl_lock},
      {"sasl_wrong_password", test_sasl_wrong_password},
  };
  return run_tests("secured", tests, sizeof tests / sizeof tests[0]);
}

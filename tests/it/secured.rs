//! Secured ensembles from Rust: real TLS-only servers (mutual and server-only TLS) and a
//! SASL-required server (DIGEST-MD5), with certificates made at test time. Each door's lock
//! works there; each mistake a user makes gets an error that says what to fix, within the
//! connect timeout; creator-only ACLs name SASL and x509 identities.
#![cfg(feature = "testing")]

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::testing::{ClientAuth, TcpProxy, TestingCerts, TestingServer};
use zklock::{Acl, Client, Error, Lockable, Mutex, Options, Protocol, Sasl, Tls};

/// One TLS server asking for client certificates, one that does not, one SASL server: each
/// started once per test process (JVMs are slow to start on two cores).
fn mutual() -> &'static TestingServer {
    static S: std::sync::OnceLock<TestingServer> = std::sync::OnceLock::new();
    S.get_or_init(|| TestingServer::start_tls(ClientAuth::Need).expect("TLS server"))
}

fn server_only() -> &'static TestingServer {
    static S: std::sync::OnceLock<TestingServer> = std::sync::OnceLock::new();
    S.get_or_init(|| TestingServer::start_tls(ClientAuth::None).expect("TLS server"))
}

fn sasl() -> &'static TestingServer {
    static S: std::sync::OnceLock<TestingServer> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        TestingServer::start_sasl(&[("bob", "bob-secret"), ("alice", "alice-secret")])
            .expect("SASL server")
    })
}

/// The server's CA, and a client certificate for `cn` signed by it.
fn tls_for(server: &TestingServer, cn: &str) -> Tls {
    let certs = server.certs().expect("a TLS server has certificates");
    let client = certs.client(cn).expect("client certificate");
    Tls::new()
        .ca_file(certs.ca_path())
        .identity_files(client.cert_path(), client.key_path())
}

fn ca_only(server: &TestingServer) -> Tls {
    Tls::new().ca_file(server.certs().unwrap().ca_path())
}

const CONNECT: Duration = Duration::from_secs(6);

fn options() -> Options {
    Options::default()
        .session_timeout(Duration::from_secs(6))
        .connect_timeout(CONNECT)
}

/// Connects and expects a failure, which must come within the connect timeout.
fn refused(hosts: &str, options: Options) -> Error {
    let t = Instant::now();
    let e = Client::connect(hosts, options).expect_err("the connect must fail");
    let took = t.elapsed();
    assert!(
        took <= CONNECT + Duration::from_millis(200),
        "the error came after {took:?}, past the connect timeout of {CONNECT:?}: {e}"
    );
    e
}

fn take_and_release(c: &Client, name: &str) -> i64 {
    let m = Mutex::new(c, &unique_path(name)).unwrap();
    let g = m.lock().unwrap();
    assert!(g.is_held());
    let token = g.fencing_token();
    g.unlock().unwrap();
    token
}

#[test]
fn a_mutex_is_taken_and_released_over_mutual_tls_and_the_server_knows_the_certificate() {
    let s = mutual();
    let c = Client::connect(&s.connect_string(), options().tls(tls_for(s, "worker-1"))).unwrap();
    take_and_release(&c, "mtls");
    let ids = c.identities().unwrap();
    assert!(
        ids.iter()
            .any(|i| i.starts_with("x509:") && i.contains("CN=worker-1")),
        "{ids:?}"
    );
}

#[test]
fn server_only_tls_needs_only_the_ca() {
    let s = server_only();
    let c = Client::connect(&s.connect_string(), options().tls(ca_only(s))).unwrap();
    take_and_release(&c, "tls");
}

#[test]
fn a_client_wide_tls_option_serves_hosts_written_without_a_scheme() {
    let s = server_only();
    let c = Client::connect(
        &format!("{}/chrooted", s.address()),
        options().tls(ca_only(s)),
    )
    .unwrap();
    take_and_release(&c, "no-scheme");
    // The chroot after a tcp+tls:// host is a chroot, not a bad host.
    let c = Client::connect(
        &format!("{}/chrooted", s.connect_string()),
        options().tls(ca_only(s)),
    )
    .unwrap();
    take_and_release(&c, "scheme-and-chroot");
}

#[test]
fn sasl_digest_md5_locks_and_the_server_knows_the_user() {
    let s = sasl();
    let c = Client::connect(
        &s.connect_string(),
        options().sasl(Sasl::digest_md5("bob", "bob-secret")),
    )
    .unwrap();
    take_and_release(&c, "sasl");
    let ids = c.identities().unwrap();
    assert!(ids.iter().any(|i| i == "sasl:bob"), "{ids:?}");
}

#[test]
fn a_wrong_sasl_password_is_an_auth_failure_naming_the_user() {
    let e = refused(
        &sasl().connect_string(),
        options().sasl(Sasl::digest_md5("bob", "not-bobs")),
    );
    match &e {
        Error::AuthFailed(m) => assert!(m.contains("user bob"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_credentials_on_a_sasl_server_say_to_give_some() {
    match refused(&sasl().connect_string(), options()) {
        Error::AuthFailed(m) => assert!(m.contains("Options::sasl"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_untrusted_ca_is_an_auth_failure_that_says_so() {
    let other = TestingCerts::generate().unwrap();
    let s = server_only();
    match refused(
        &s.connect_string(),
        options().tls(Tls::new().ca_file(other.ca_path())),
    ) {
        Error::AuthFailed(m) => {
            assert!(m.contains("not signed by a CA this client trusts"), "{m}");
            assert!(m.contains(&other.ca_path().display().to_string()), "{m}");
        }
        other => panic!("{other:?}"),
    }
}

/// Issue 40: a regenerated CA, with the same subject name as the one that signed the servers'
/// certificates, was "the server's certificate was refused (BadSignature)"; it gets the advice
/// of any CA that did not sign them.
#[test]
fn a_regenerated_ca_of_the_same_name_gets_the_advice_of_another_ca() {
    let s = server_only();
    let again = s.certs().unwrap().regenerated_ca().unwrap();
    let e = refused(
        &s.connect_string(),
        options().tls(Tls::new().ca_file(&again)),
    );
    match &e {
        Error::AuthFailed(m) => {
            assert!(m.contains("not signed by a CA this client trusts"), "{m}");
            assert!(m.contains(&again.display().to_string()), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(e.hint(), Some(zklock::Hint::TlsCaFile), "{e}");
}

#[test]
fn a_server_certificate_for_another_name_is_an_auth_failure_naming_the_host() {
    let certs = TestingCerts::generate_for_names(&["wrong.example"]).unwrap();
    let s = TestingServer::start_tls_with(&certs, ClientAuth::None, &[]).unwrap();
    match refused(
        &s.connect_string(),
        options().tls(Tls::new().ca_file(certs.ca_path())),
    ) {
        Error::AuthFailed(m) => assert!(m.contains("not issued for \"127.0.0.1\""), "{m}"),
        other => panic!("{other:?}"),
    }
    // The documented opt-out connects (the CA is still checked).
    let c = Client::connect(
        &s.connect_string(),
        options().tls(
            Tls::new()
                .ca_file(certs.ca_path())
                .danger_accept_any_server_name(),
        ),
    )
    .unwrap();
    take_and_release(&c, "any-name");
}

#[test]
fn a_mutual_tls_server_without_a_client_certificate_says_to_give_one() {
    let s = mutual();
    let e = refused(&s.connect_string(), options().tls(ca_only(s)));
    match &e {
        Error::AuthFailed(m) => assert!(m.contains("requires a client certificate"), "{m}"),
        other => panic!("{other:?}"),
    }
    // The setting to give, as a value, and named in the Rust API's words (issue 40).
    assert_eq!(e.hint(), Some(zklock::Hint::TlsIdentity));
    assert!(
        e.to_string().ends_with("give one (Tls::identity_files)"),
        "{e}"
    );
}

#[test]
fn a_client_certificate_from_another_ca_is_refused_by_the_server() {
    let s = mutual();
    let stranger = TestingCerts::generate().unwrap();
    let id = stranger.client("stranger").unwrap();
    let tls = Tls::new()
        .ca_file(s.certs().unwrap().ca_path())
        .identity_files(id.cert_path(), id.key_path());
    match refused(&s.connect_string(), options().tls(tls)) {
        Error::AuthFailed(m) => assert!(m.contains("refused the client certificate"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_plaintext_client_on_a_tls_port_is_told_it_is_a_tls_port() {
    let s = server_only();
    match refused(&s.address(), options()) {
        Error::ConnectionLoss(m) => assert!(m.contains("is it a TLS port?"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// On a slow link the diagnosis still names the TLS port: the server's answers come 300 ms
/// late (as a busy machine's server answered; the probe had 75 ms at the connect's end, and
/// said only "accepts connections but opened no ZooKeeper session").
#[test]
fn a_plaintext_client_on_a_slow_tls_port_is_still_told_it_is_a_tls_port() {
    let proxy = TcpProxy::start(&server_only().address()).unwrap();
    proxy.set_server_delay(Duration::from_millis(300));
    let options = options().connect_timeout(Duration::from_secs(3));
    match refused(&proxy.connect_string(), options) {
        Error::ConnectionLoss(m) => assert!(m.contains("is it a TLS port?"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_tls_client_on_a_plaintext_port_is_told_it_is_a_plaintext_port() {
    let s = server();
    let e = refused(
        &format!("tcp+tls://{}", s.connect_string()),
        options().tls(ca_only(server_only())),
    );
    assert!(e.to_string().contains("plaintext port"), "{e}");
}

#[test]
fn unreadable_or_malformed_tls_files_are_invalid_arguments_naming_the_file() {
    let s = server_only();
    match Client::connect(
        &s.connect_string(),
        options().tls(Tls::new().ca_file("/nonexistent/ca.pem")),
    ) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("/nonexistent/ca.pem"), "{m}"),
        other => panic!("{other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.pem");
    std::fs::write(&junk, "not a certificate").unwrap();
    match Client::connect(
        &s.connect_string(),
        options().tls(Tls::new().ca_file(&junk)),
    ) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("junk.pem"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// A SASL connect that failed leaves no session on the server: nothing counts against the
/// server's limits, nothing of it expires later.
#[test]
fn a_failed_sasl_connect_leaves_nothing_on_the_server() {
    let s = TestingServer::start_sasl(&[("bob", "bob-secret")]).unwrap();
    let sessions = |s: &TestingServer| -> usize {
        let dump = s.four_letter("cons").unwrap();
        dump.lines().filter(|l| l.contains("sid=0x")).count()
    };
    let before = sessions(&s);
    for _ in 0..3 {
        let _ = refused(
            &s.connect_string(),
            options().sasl(Sasl::digest_md5("bob", "wrong")),
        );
    }
    assert!(
        eventually(Duration::from_secs(10), || sessions(&s) <= before),
        "sessions left: {}",
        s.four_letter("cons").unwrap()
    );
}

/// Item 4: a creator-only ACL made under one identity refuses another, and the refusal says
/// whom the servers take the refused client for.
#[test]
fn creator_only_acls_follow_sasl_identities_and_a_refusal_says_who_asked() {
    let s = sasl();
    let path = unique_root("acl-sasl");
    let bob = Client::connect(
        &s.connect_string(),
        options()
            .sasl(Sasl::digest_md5("bob", "bob-secret"))
            .acl(Acl::CreatorAll),
    )
    .unwrap();
    let mb = Mutex::new(&bob, &path).unwrap();
    let g = mb.lock().unwrap();
    let alice = Client::connect(
        &s.connect_string(),
        options().sasl(Sasl::digest_md5("alice", "alice-secret")),
    )
    .unwrap();
    match Mutex::new(&alice, &path).unwrap().try_lock() {
        Err(Error::ZooKeeper(m)) => {
            assert!(m.contains("not authorized"), "{m}");
            assert!(m.contains("sasl:alice"), "{m}");
        }
        other => panic!("alice got into bob's creator-only lock: {other:?}"),
    }
    // Another of bob's clients queues as usual.
    let bob2 = Client::connect(
        &s.connect_string(),
        options()
            .sasl(Sasl::digest_md5("bob", "bob-secret"))
            .acl(Acl::CreatorAll),
    )
    .unwrap();
    let mb2 = Mutex::new(&bob2, &path).unwrap();
    assert!(mb2.try_lock().unwrap().is_none());
    drop(g);
    assert!(mb2.try_lock_for(Duration::from_secs(10)).unwrap().is_some());
}

#[test]
fn creator_only_acls_follow_x509_identities() {
    let s = mutual();
    let path = unique_root("acl-x509");
    let a = Client::connect(
        &s.connect_string(),
        options().tls(tls_for(s, "owner")).acl(Acl::CreatorAll),
    )
    .unwrap();
    let ma = Mutex::new(&a, &path).unwrap();
    let _g = ma.lock().unwrap();
    let b = Client::connect(&s.connect_string(), options().tls(tls_for(s, "intruder"))).unwrap();
    match Mutex::new(&b, &path).unwrap().try_lock() {
        Err(Error::ZooKeeper(m)) => assert!(m.contains("CN=intruder"), "{m}"),
        other => panic!("another certificate got into a creator-only lock: {other:?}"),
    }
}

/// Item 6: over TLS, replies decrypted and buffered inside rustls are never stranded while
/// their caller sleeps on the socket: many threads pipelining requests on one client, many
/// clients handing one mutex around (every hand-off is a watch firing while its waiter
/// sleeps), all finish.
#[test]
fn no_reply_is_stranded_over_tls_with_pipelined_requests_and_32_contenders() {
    let s = server_only();
    let hosts = s.connect_string();
    let path = unique_path("w2-tls");
    let clients: Vec<Client> = (0..32)
        .map(|_| Client::connect(&hosts, options().tls(ca_only(s))).unwrap())
        .collect();
    let rounds = 5;
    let t = Instant::now();
    std::thread::scope(|sc| {
        for c in &clients {
            let path = &path;
            sc.spawn(move || {
                let m = Mutex::new(c, path).unwrap();
                for _ in 0..rounds {
                    let g = m
                        .try_lock_for(Duration::from_secs(60))
                        .unwrap()
                        .expect("a hand-off over TLS was stranded");
                    drop(g);
                }
            });
        }
        // Pipelined: 16 threads on one client, each with reads in flight at once.
        let one = &clients[0];
        for i in 0..16 {
            let path = format!("{path}-pipelined-{i}");
            sc.spawn(move || {
                let m = Mutex::new(one, &path).unwrap();
                for _ in 0..20 {
                    let _ = m.participants().unwrap();
                }
            });
        }
    });
    log::info!("32 clients x {rounds} rounds over TLS in {:?}", t.elapsed());
}

/// A zklock holder and a kazoo waiter (kazoo's own TLS) share one lock over mutual TLS.
#[test]
fn a_kazoo_waiter_and_a_zklock_holder_share_a_lock_over_tls() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let s = mutual();
    let certs = s.certs().unwrap();
    let kid = certs.client("kazoo").unwrap();
    let path = unique_path("kazoo-tls");
    let c = Client::connect(
        &s.connect_string(),
        options()
            .tls(tls_for(s, "zklock"))
            .protocol(Protocol::Kazoo),
    )
    .unwrap();
    let m = Mutex::new(&c, &path).unwrap();
    let g = m.lock().unwrap();
    let script = format!(
        r#"
import sys
from kazoo.client import KazooClient
zk = KazooClient(hosts={hosts:?}, use_ssl=True, ca={ca:?}, certfile={cert:?}, keyfile={key:?})
zk.start(timeout=30)
lock = zk.Lock({path:?}, "kazoo")
print("waiting", flush=True)
ok = lock.acquire(timeout=60)
print("acquired" if ok else "timeout", flush=True)
lock.release()
zk.stop()
"#,
        hosts = s.address(),
        ca = path_str(certs.ca_path()),
        cert = path_str(kid.cert_path()),
        key = path_str(kid.key_path()),
        path = path,
    );
    let mut py = Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn_guarded();
    let out = py.stdout.take().unwrap();
    let mut lines = BufReader::new(out).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "waiting");
    // kazoo's node joins the queue behind ours, then gets the lock when we let go.
    assert!(
        eventually(Duration::from_secs(30), || m.participants().unwrap().len()
            == 2),
        "kazoo never queued: {:?}",
        m.participants()
    );
    assert!(g.is_held());
    drop(g);
    assert_eq!(lines.next().unwrap().unwrap(), "acquired");
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

/// kazoo's `keyfile_password`: an encrypted PKCS#8 key is decrypted with its password; a
/// wrong or missing password is an invalid argument naming the key file.
#[test]
fn an_encrypted_client_key_is_used_with_its_password() {
    let s = mutual();
    let certs = s.certs().unwrap();
    let id = certs.client("encrypted").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let enc = dir.path().join("client.enc.key");
    let ok = std::process::Command::new("openssl")
        .args([
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:key-secret",
            "-in",
        ])
        .arg(id.key_path())
        .arg("-out")
        .arg(&enc)
        .status()
        .expect("openssl (scripts/install-deps.sh installs it)");
    assert!(ok.success());
    let tls = |pw: Option<&str>| {
        let t = Tls::new()
            .ca_file(certs.ca_path())
            .identity_files(id.cert_path(), &enc);
        match pw {
            Some(pw) => t.key_password(pw),
            None => t,
        }
    };
    let c = Client::connect(&s.connect_string(), options().tls(tls(Some("key-secret")))).unwrap();
    take_and_release(&c, "encrypted-key");
    for pw in [None, Some("wrong")] {
        match Client::connect(&s.connect_string(), options().tls(tls(pw))) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains("client.enc.key"), "{m}");
                assert!(m.contains("password"), "{m}");
            }
            other => panic!("{pw:?}: {other:?}"),
        }
    }
}

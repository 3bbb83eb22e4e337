//! Kerberos (SASL GSSAPI) from Rust, against a real MIT KDC and a ZooKeeper server that
//! requires it (`TestingKdc`, `TestingServer::start_kerberos`): a client connects with a keytab
//! and with a credential cache (`kinit -k -t`), a creator-only ACL names its principal, and a
//! wrong principal, an expired ticket and a missing keytab each get an error that says so.
//!
//! Kerberos credentials are the process's (`KRB5_CONFIG`, `KRB5CCNAME`, `KRB5_CLIENT_KTNAME`),
//! so each client runs in a process of its own: this test binary again, running only
//! [`kerberos_client`] with the scenario in its environment.
#![cfg(all(feature = "testing", feature = "sasl-gssapi"))]

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use zklock::testing::{KerberosPrincipal, TestingKdc, TestingServer};
use zklock::{Acl, Client, Mutex, Options, Sasl};

/// Set in a client process: what it does (`lock`, `hold`, `connect`).
const CLIENT: &str = "ZKL_KERBEROS_CLIENT";

/// A KDC and a server that requires Kerberos, once per test process.
struct Realm {
    kdc: TestingKdc,
    server: TestingServer,
}

fn realm() -> &'static Realm {
    static R: std::sync::OnceLock<Realm> = std::sync::OnceLock::new();
    R.get_or_init(|| {
        let kdc = TestingKdc::start().expect("a test KDC (scripts/install-deps.sh)");
        let server = TestingServer::start_kerberos(&kdc).expect("a Kerberos ZooKeeper server");
        Realm { kdc, server }
    })
}

/// A client process: this binary running [`kerberos_client`] only, with `env` (the Kerberos
/// variables) and `vars` (the scenario).
fn client(env: &[(String, OsString)], vars: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "kerberos::kerberos_client",
        "--exact",
        "--nocapture",
        "--test-threads=1",
    ])
    .env_remove("KRB5CCNAME")
    .env_remove("KRB5_CLIENT_KTNAME")
    .env_remove("KRB5_CONFIG")
    .envs(env.iter().map(|(k, v)| (k, v)))
    .envs(vars.iter().copied())
    .env("ZKL_HOSTS", realm().server.connect_string())
    .stdin(Stdio::null())
    .stderr(Stdio::inherit());
    cmd
}

/// Runs a client process to its end; its `name=value` lines.
fn run(env: &[(String, OsString)], vars: &[(&str, &str)]) -> Vec<(String, String)> {
    let out = client(env, vars).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "the client process failed:\n{text}");
    lines(&text)
}

fn lines(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn value<'a>(lines: &'a [(String, String)], key: &str) -> Option<&'a str> {
    lines
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The client process's side: connects with SASL GSSAPI, then, as `ZKL_KERBEROS_CLIENT`
/// says, takes and releases a mutex (`lock`), takes one and holds it until its standard input
/// closes (`hold`), or only connects (`connect`); prints what happened as `name=value` lines.
/// Run by the other tests in processes of their own; does nothing when run by the harness.
#[test]
fn kerberos_client() {
    let Ok(what) = std::env::var(CLIENT) else {
        return;
    };
    // After the harness's "test kerberos_client ... ", on a line of its own.
    println!();
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut gssapi = Sasl::gssapi();
    if let Some(p) = var("ZKL_PRINCIPAL") {
        gssapi = gssapi.principal(p);
    }
    if let Some(s) = var("ZKL_SERVICE") {
        gssapi = gssapi.service(s);
    }
    if let Some(h) = var("ZKL_SERVER_HOST") {
        gssapi = gssapi.host(h);
    }
    let hosts = var("ZKL_HOSTS").unwrap();
    let opts = Options::default()
        .session_timeout(Duration::from_secs(6))
        .connect_timeout(Duration::from_secs(6))
        .sasl(gssapi)
        .acl(Acl::CreatorAll);
    let started = Instant::now();
    let c = match Client::connect(&hosts, opts) {
        Ok(c) => c,
        Err(e) => {
            println!("error={e}");
            println!("kind={e:?}");
            println!("ms={}", started.elapsed().as_millis());
            return;
        }
    };
    println!("identities={}", c.identities().unwrap().join(","));
    if what == "connect" {
        return;
    }
    // Kerberos is an identity for a creator-only ACL set after the connect too.
    c.set_acl(Acl::CreatorAll).unwrap();
    let m = Mutex::new(&c, &var("ZKL_PATH").unwrap()).unwrap();
    let taken = m.try_lock_for(Duration::from_secs(10));
    match taken {
        Ok(Some(g)) => {
            println!("token={}", g.fencing_token());
            if what == "hold" {
                println!("held=yes");
                std::io::stdout().flush().unwrap();
                let mut line = String::new();
                while std::io::stdin().read_line(&mut line).is_ok_and(|n| n > 0) {}
            }
            g.unlock().unwrap();
            println!("released=yes");
        }
        Ok(None) => println!("lock-error=timed out"),
        Err(e) => println!("lock-error={e}"),
    }
}

/// A client process holding a lock; killed (and waited for) when dropped, also when a test
/// fails while it holds.
struct Holder(Child);

impl Holder {
    /// Closes its standard input: it releases and ends; whether it ended well.
    fn release(mut self) -> bool {
        drop(self.0.stdin.take());
        self.0.wait().is_ok_and(|s| s.success())
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a client that takes `path` and holds it; returns when it holds it.
fn holder(env: &[(String, OsString)], path: &str) -> Holder {
    let mut child = Holder(
        client(env, &[(CLIENT, "hold"), ("ZKL_PATH", path)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(child.0.stdout.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("the holder ended without holding:\n{seen}");
        }
        seen.push_str(&line);
        if line.trim() == "held=yes" {
            // The rest of its output, read to its end (a closed pipe would fail its prints).
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            return child;
        }
    }
}

fn principal(name: &str) -> KerberosPrincipal {
    realm().kdc.add_principal(name).unwrap()
}

#[test]
fn a_client_with_a_keytab_locks_and_the_server_knows_its_principal() {
    let alice = principal("keytab-alice");
    let out = run(
        &alice.keytab_env(),
        &[(CLIENT, "lock"), ("ZKL_PATH", &unique_root("krb-keytab"))],
    );
    assert_eq!(value(&out, "error"), None, "{out:?}");
    let ids = value(&out, "identities").unwrap();
    assert!(ids.contains("sasl:keytab-alice@ZKLOCK.TEST"), "{ids}");
    assert!(value(&out, "token").is_some(), "{out:?}");
    assert_eq!(value(&out, "released"), Some("yes"), "{out:?}");
}

#[test]
fn a_client_with_a_credential_cache_locks_and_the_server_knows_its_principal() {
    let bob = principal("cache-bob");
    let cache = bob.kinit(None).unwrap();
    let out = run(
        &bob.ccache_env(&cache),
        &[
            (CLIENT, "lock"),
            ("ZKL_PATH", &unique_root("krb-cache")),
            ("ZKL_PRINCIPAL", "cache-bob@ZKLOCK.TEST"),
        ],
    );
    assert_eq!(value(&out, "error"), None, "{out:?}");
    let ids = value(&out, "identities").unwrap();
    assert!(ids.contains("sasl:cache-bob@ZKLOCK.TEST"), "{ids}");
    assert_eq!(value(&out, "released"), Some("yes"), "{out:?}");
}

/// A creator-only ACL made under one principal refuses another, naming whom the servers took
/// it for; the same principal from another process (with a cache, not the keytab) queues.
#[test]
fn a_creator_only_acl_names_the_kerberos_principal() {
    let owner = principal("acl-owner");
    let other = principal("acl-other");
    let path = unique_root("krb-acl");
    let holding = holder(&owner.keytab_env(), &path);
    let refused = run(
        &other.keytab_env(),
        &[(CLIENT, "lock"), ("ZKL_PATH", &path)],
    );
    let e = value(&refused, "lock-error").unwrap_or_else(|| panic!("{refused:?}"));
    assert!(e.contains("not authorized"), "{e}");
    assert!(e.contains("sasl:acl-other@ZKLOCK.TEST"), "{e}");
    // The owner again, from a credential cache: the same identity.
    let cache = owner.kinit(None).unwrap();
    let queued = run(&owner.ccache_env(&cache), &[(CLIENT, "connect")]);
    assert!(
        value(&queued, "identities").is_some_and(|i| i.contains("sasl:acl-owner@ZKLOCK.TEST")),
        "{queued:?}"
    );
    assert!(holding.release());
    let after = run(
        &owner.ccache_env(&cache),
        &[(CLIENT, "lock"), ("ZKL_PATH", &path)],
    );
    assert_eq!(value(&after, "released"), Some("yes"), "{after:?}");
}

/// Connects and expects an error; returns its words, checking it came within the connect
/// timeout.
fn connect_error(env: &[(String, OsString)], vars: &[(&str, &str)]) -> String {
    let mut vars = vars.to_vec();
    vars.push((CLIENT, "connect"));
    let out = run(env, &vars);
    let e = value(&out, "error")
        .unwrap_or_else(|| panic!("the connect must fail: {out:?}"))
        .to_string();
    let ms: u64 = value(&out, "ms").unwrap().parse().unwrap();
    assert!(ms < 6_200, "the error came after {ms} ms: {e}");
    eprintln!("{ms} ms: {e}");
    e
}

#[test]
fn credentials_for_another_principal_than_asked_are_refused_naming_both() {
    let carol = principal("carol");
    let e = connect_error(
        &carol.keytab_env(),
        &[("ZKL_PRINCIPAL", "dave@ZKLOCK.TEST")],
    );
    assert!(e.contains("authentication failed"), "{e}");
    assert!(e.contains("carol@ZKLOCK.TEST"), "{e}");
    assert!(e.contains("not dave@ZKLOCK.TEST"), "{e}");
}

#[test]
fn a_keytab_of_a_principal_the_kdc_does_not_know_says_so() {
    let gone = principal("gone");
    realm().kdc.delete_principal(&gone).unwrap();
    let e = connect_error(&gone.keytab_env(), &[]);
    assert!(e.contains("authentication failed"), "{e}");
    assert!(e.contains("gone@ZKLOCK.TEST"), "{e}");
    assert!(e.contains("not found in Kerberos database"), "{e}");
}

#[test]
fn a_server_principal_the_kdc_does_not_know_says_which_was_asked_for() {
    let erin = principal("erin");
    let e = connect_error(&erin.keytab_env(), &[("ZKL_SERVICE", "zk")]);
    assert!(e.contains("authentication failed"), "{e}");
    assert!(e.contains("zk/localhost"), "{e}");
    assert!(e.contains("not found in Kerberos database"), "{e}");
}

#[test]
fn an_expired_ticket_says_to_get_a_new_one() {
    let frank = principal("frank");
    let cache = frank.kinit(Some(Duration::from_secs(2))).unwrap();
    assert!(zklock::testing::eventually(Duration::from_secs(10), || {
        ticket_expired(&cache)
    }));
    let e = connect_error(&frank.ccache_env(&cache), &[]);
    assert!(e.contains("authentication failed"), "{e}");
    assert!(e.contains("expired"), "{e}");
    assert!(e.contains("kinit"), "{e}");
}

#[test]
fn a_missing_keytab_is_named() {
    let gina = principal("gina");
    let env = moved_keytab(&gina);
    let missing = realm().kdc.dir().join("gina@ZKLOCK.TEST-moved.keytab");
    let e = connect_error(&env, &[]);
    assert!(e.contains("authentication failed"), "{e}");
    assert!(
        e.contains(&format!(
            "{} (KRB5_CLIENT_KTNAME) does not exist",
            missing.display()
        )),
        "{e}"
    );
}

/// `ffi-examples/c/kerberos.c`, compiled once per test process against this build's library
/// (as the other C examples are).
fn c_example() -> std::path::PathBuf {
    crate::ffi_examples::compile(
        "cc",
        crate::ffi_examples::C_FLAGS,
        "ffi-examples/c/kerberos.c",
        "kerberos",
    )
}

/// Runs the C example in `mode` with `env` (the Kerberos variables) and `vars`; its exit
/// status and its output (stdout, then stderr).
fn c_run(mode: &str, env: &[(String, OsString)], vars: &[(&str, &str)]) -> (bool, String) {
    let out = Command::new(c_example())
        .arg(mode)
        .env_remove("KRB5CCNAME")
        .env_remove("KRB5_CLIENT_KTNAME")
        .env_remove("KRB5_CONFIG")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .envs(vars.iter().copied())
        .env("ZKL_HOSTS", realm().server.connect_string())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The C door: a keytab and a credential cache lock under a creator-only ACL, another
/// principal is refused the nodes, and the three credential mistakes are ZKL_AUTH_FAILED with
/// words that say which.
#[test]
fn c_locks_with_a_keytab_and_a_cache_and_says_what_is_wrong() {
    let hank = principal("c-hank");
    let ivy = principal("c-ivy");
    let root = unique_root("krb-c");
    let at = [("ZKL_PATH", root.as_str())];
    let (ok, out) = c_run("lock", &hank.keytab_env(), &at);
    assert!(ok && out.contains("fencing token"), "{out}");
    let cache = hank.kinit(None).unwrap();
    let with_principal = [
        ("ZKL_PATH", root.as_str()),
        ("ZKL_KRB_PRINCIPAL", "c-hank@ZKLOCK.TEST"),
    ];
    let (ok, out) = c_run("lock", &hank.ccache_env(&cache), &with_principal);
    assert!(ok && out.contains("fencing token"), "{out}");
    // hank's nodes are his alone.
    let (ok, out) = c_run("denied", &ivy.keytab_env(), &at);
    assert!(ok, "{out}");
    assert!(out.contains("sasl:c-ivy@ZKLOCK.TEST"), "{out}");
    // Credentials for another principal than asked.
    let (ok, out) = c_run("refused", &ivy.keytab_env(), &with_principal);
    assert!(ok, "{out}");
    assert!(out.starts_with("ZKL_AUTH_FAILED"), "{out}");
    assert!(
        out.contains("for c-ivy@ZKLOCK.TEST, not c-hank@ZKLOCK.TEST"),
        "{out}"
    );
    // An expired ticket.
    let short = hank.kinit(Some(Duration::from_secs(1))).unwrap();
    assert!(zklock::testing::eventually(Duration::from_secs(10), || {
        ticket_expired(&short)
    }));
    let (ok, out) = c_run("refused", &hank.ccache_env(&short), &at);
    assert!(
        ok && out.contains("expired") && out.contains("kinit"),
        "{out}"
    );
    // A missing keytab.
    let (ok, out) = c_run("refused", &moved_keytab(&hank), &at);
    assert!(
        ok && out.contains("(KRB5_CLIENT_KTNAME) does not exist"),
        "{out}"
    );
}

/// Whether the ticket in `cache` has expired (`klist -s` fails then).
fn ticket_expired(cache: &std::path::Path) -> bool {
    !Command::new("klist")
        .args(["-s", "-c"])
        .arg(format!("FILE:{}", cache.display()))
        .env("KRB5_CONFIG", realm().kdc.krb5_conf())
        .status()
        .unwrap()
        .success()
}

/// `p`'s keytab environment with the keytab moved away (KRB5_CLIENT_KTNAME names a file that
/// is not there).
fn moved_keytab(p: &KerberosPrincipal) -> Vec<(String, OsString)> {
    let missing = realm().kdc.dir().join(format!("{}-moved.keytab", p.name()));
    p.keytab_env()
        .into_iter()
        .map(|(k, v)| match k.as_str() {
            "KRB5_CLIENT_KTNAME" => (k, missing.clone().into()),
            _ => (k, v),
        })
        .collect()
}

/// `zklock --kerberos ...` with `env` (the Kerberos variables): its exit status and stderr.
#[cfg(feature = "cli")]
fn zklock_run(env: &[(String, OsString)], args: &[&str]) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zklock"));
    for (k, _) in std::env::vars() {
        if k.starts_with("ZKL_") || k.starts_with("KRB5") {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .envs(env.iter().map(|(k, v)| (k, v)))
        .arg("--hosts")
        .arg(realm().server.connect_string())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().expect("zklock exits"),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The command: `--kerberos` with a keytab and with a credential cache runs COMMAND under a
/// creator-only ACL; another principal is refused the nodes (77, naming it); another principal
/// than --kerberos-principal, an expired ticket and a missing keytab exit 77 saying which.
#[cfg(feature = "cli")]
#[test]
fn the_command_locks_with_a_keytab_and_a_cache_and_says_what_is_wrong() {
    let jack = principal("cli-jack");
    let kate = principal("cli-kate");
    let p = unique_root("krb-cli");
    let (code, err) = zklock_run(
        &jack.keytab_env(),
        &["--kerberos", "--acl", "creator", &p, "true"],
    );
    assert_eq!(code, 0, "{err}");
    let cache = jack.kinit(None).unwrap();
    let (code, err) = zklock_run(
        &jack.ccache_env(&cache),
        &["--kerberos-principal", "cli-jack@ZKLOCK.TEST", &p, "true"],
    );
    assert_eq!(code, 0, "{err}");
    let (code, err) = zklock_run(&kate.keytab_env(), &["--kerberos", "-n", &p, "true"]);
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("sasl:cli-kate@ZKLOCK.TEST"), "{err}");
    let (code, err) = zklock_run(
        &kate.keytab_env(),
        &["--kerberos-principal", "cli-jack@ZKLOCK.TEST", &p, "true"],
    );
    assert_eq!(code, 77, "{err}");
    assert!(
        err.contains("for cli-kate@ZKLOCK.TEST, not cli-jack@ZKLOCK.TEST"),
        "{err}"
    );
    let short = jack.kinit(Some(Duration::from_secs(1))).unwrap();
    assert!(zklock::testing::eventually(Duration::from_secs(10), || {
        ticket_expired(&short)
    }));
    let (code, err) = zklock_run(&jack.ccache_env(&short), &["--kerberos", &p, "true"]);
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("expired") && err.contains("kinit"), "{err}");
    let (code, err) = zklock_run(&moved_keytab(&jack), &["--kerberos", &p, "true"]);
    assert_eq!(code, 77, "{err}");
    assert!(err.contains("(KRB5_CLIENT_KTNAME) does not exist"), "{err}");
    let (code, err) = zklock_run(
        &jack.keytab_env(),
        &["--kerberos", "--sasl-user", "bob", &p, "true"],
    );
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("one SASL mechanism or the other"), "{err}");
}

//! Every message of the C library in C's words (issue 40, section 6): no message names a Rust
//! item (`Options::tls`, `Tls::ca_file`), and the setting that fixes an error comes as a value,
//! `zkl_last_error_hint`, which the message names in C's words after `zkl_last_error_reason`.
//! The messages of every status are taken from real calls against real servers; a scan of the
//! library's source finds any text that could reach a message and names a Rust item.
#![cfg(feature = "testing")]
// Every call here is to an `unsafe extern "C"` fn with valid or NULL pointers, which is
// exactly what the contract allows; one SAFETY note per test instead of per call.
#![allow(clippy::undocumented_unsafe_blocks)]

use crate::common::hosts;

use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::ptr::{null, null_mut};

use zklock::testing::ffi::zkl_hint::*;
use zklock::testing::ffi::zkl_status::*;
use zklock::testing::ffi::*;
use zklock::testing::{Admin, ClientAuth, TestingServer};
use zklock::Hint;

/// This thread's last error: message, reason, hint.
fn last() -> (String, String, u32) {
    let text = |p: *const std::ffi::c_char| {
        assert!(!p.is_null());
        unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string()
    };
    (
        text(zkl_last_error_message()),
        text(zkl_last_error_reason()),
        zkl_last_error_hint(),
    )
}

fn cstr(s: &str) -> CString {
    CString::new(s).unwrap()
}

/// The C setting a hint's message names (the header's words, checked against it below).
fn c_setting(hint: u32) -> &'static str {
    match hint {
        h if h == ZKL_HINT_TLS_CA_FILE as u32 => "zkl_options_set_tls_ca_file",
        h if h == ZKL_HINT_TLS_IDENTITY as u32 => "zkl_options_set_tls_identity_files",
        h if h == ZKL_HINT_TLS_KEY_PASSWORD as u32 => "zkl_options_set_tls_key_password",
        h if h == ZKL_HINT_TLS as u32 => "zkl_options_use_tls",
        h if h == ZKL_HINT_SASL as u32 => {
            "zkl_options_set_sasl_digest_md5 or zkl_options_set_sasl_gssapi"
        }
        h if h == ZKL_HINT_IDENTITY as u32 => {
            "zkl_options_set_sasl_digest_md5, zkl_options_set_tls_identity_files or \
             zkl_options_add_auth"
        }
        h if h == ZKL_HINT_CONNECT_TIMEOUT as u32 => "zkl_options_set_connect_timeout",
        other => panic!("hint {other} has no C setting in this test"),
    }
}

/// The messages seen, by status, and the hints seen.
#[derive(Default)]
struct Seen {
    by_status: BTreeMap<u32, Vec<String>>,
    hints: BTreeMap<u32, String>,
}

impl Seen {
    /// Records the last error of a call that returned `s`, expected to be `want`; checks its
    /// words.
    fn record(&mut self, what: &str, s: zkl_status, want: zkl_status) {
        let (message, reason, hint) = last();
        assert_eq!(s, want, "{what}: {message}");
        assert!(
            !message.contains("::"),
            "{what}: names a Rust item: {message}"
        );
        assert!(
            !reason.contains("::"),
            "{what}: names a Rust item: {reason}"
        );
        if hint == ZKL_HINT_NONE as u32 {
            assert_eq!(message, reason, "{what}");
        } else {
            assert_eq!(
                message,
                format!("{reason} ({})", c_setting(hint)),
                "{what}: the message is the reason, then the C setting"
            );
            self.hints.insert(hint, message.clone());
        }
        self.by_status.entry(s as u32).or_default().push(message);
    }
}

fn connect_with(hosts: &str, o: *mut zkl_options) -> (zkl_status, *mut zkl_client) {
    let h = cstr(hosts);
    let mut c = null_mut();
    let s = unsafe { zkl_client_connect_with_options(h.as_ptr(), o, &mut c) };
    unsafe { zkl_options_free(o) };
    (s, c)
}

fn options(connect_timeout_ms: u32) -> *mut zkl_options {
    let mut o = null_mut();
    unsafe {
        assert_eq!(zkl_options_new(&mut o), ZKL_OK);
        assert_eq!(
            zkl_options_set_connect_timeout(o, connect_timeout_ms),
            ZKL_OK
        );
    }
    o
}

fn new_lock(
    ctor: unsafe extern "C" fn(
        *mut zkl_client,
        *const std::ffi::c_char,
        *mut *mut zkl_lock,
    ) -> zkl_status,
    c: *mut zkl_client,
    path: &str,
) -> *mut zkl_lock {
    let p = cstr(path);
    let mut l = null_mut();
    let s = unsafe { ctor(c, p.as_ptr(), &mut l) };
    assert_eq!(s, ZKL_OK, "{}", last().0);
    l
}

fn path(what: &str) -> String {
    format!("/ffi-messages/{what}-{}", std::process::id())
}

/// Every status a C caller can meet, from real calls (all but ZKL_SESSION_EXPIRED, which takes
/// a session timeout to come, and ZKL_INTERNAL_ERROR, a bug's: both fixed words that the scan
/// below reads), and every hint the C library can give; no message names a Rust item, and a
/// message with a hint is its reason followed by the C setting.
#[test]
fn every_status_and_hint_of_the_c_library_is_in_c_words() {
    let mut seen = Seen::default();
    let h = hosts();
    let hc = cstr(&h);
    let mut c = null_mut();
    unsafe {
        assert_eq!(zkl_client_connect(hc.as_ptr(), 10_000, &mut c), ZKL_OK);
        // ZKL_INVALID_ARGUMENT: a NULL, a bad path.
        let s = zkl_mutex_new(c, null(), &mut null_mut());
        seen.record("NULL path", s, ZKL_INVALID_ARGUMENT);
        let bad = cstr("no-slash");
        let s = zkl_mutex_new(c, bad.as_ptr(), &mut null_mut());
        seen.record("relative path", s, ZKL_INVALID_ARGUMENT);
        // ZKL_INVALID_ARGUMENT with a hint: SASL as auth data.
        let s = zkl_client_add_auth(c, c"sasl".as_ptr(), c"bob:pw".as_ptr());
        seen.record("add_auth sasl", s, ZKL_INVALID_ARGUMENT);
        // ... a creator-only ACL without an identity.
        let o = options(5000);
        assert_eq!(
            zkl_options_set_acl(o, zkl_acl::ZKL_ACL_CREATOR_ALL as u32),
            ZKL_OK
        );
        let (s, _) = connect_with(&h, o);
        seen.record("creator ACL without identity", s, ZKL_INVALID_ARGUMENT);
        // ... an encrypted key without its password.
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("client.key");
        std::fs::write(
            &key,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let k = cstr(key.to_str().unwrap());
        let o = options(5000);
        let ca = TestingServer::start_tls(ClientAuth::Need).unwrap();
        let ca_path = cstr(ca.certs().unwrap().ca_path().to_str().unwrap());
        assert_eq!(zkl_options_set_tls_ca_file(o, ca_path.as_ptr()), ZKL_OK);
        assert_eq!(
            zkl_options_set_tls_identity_files(o, k.as_ptr(), k.as_ptr()),
            ZKL_OK
        );
        let (s, _) = connect_with(&ca.connect_string(), o);
        seen.record("encrypted key", s, ZKL_INVALID_ARGUMENT);

        // ZKL_TIMEOUT, ZKL_WOULD_DEADLOCK, ZKL_NOT_HELD, ZKL_CANCELLED.
        let p = path("mutex");
        let (a, b) = (
            new_lock(zkl_semaphore_mutex_new, c, &p),
            new_lock(zkl_semaphore_mutex_new, c, &p),
        );
        assert_eq!(zkl_lock_acquire(a, 5000), ZKL_OK);
        seen.record("busy", zkl_lock_acquire(b, 0), ZKL_TIMEOUT);
        seen.record("busy for 50 ms", zkl_lock_acquire(b, 50), ZKL_TIMEOUT);
        seen.record("again", zkl_lock_acquire(a, 0), ZKL_WOULD_DEADLOCK);
        seen.record("release unheld", zkl_lock_release(b), ZKL_NOT_HELD);
        assert_eq!(zkl_lock_cancel(b), ZKL_OK);
        seen.record("cancelled", zkl_lock_acquire(b, 5000), ZKL_CANCELLED);
        // ZKL_LOCK_LOST: its node deleted by someone else.
        let admin = Admin::connect(&h).unwrap();
        for child in admin.children(&p).unwrap() {
            admin.delete(&format!("{p}/{child}")).unwrap();
        }
        crate::common::eventually(std::time::Duration::from_secs(10), || {
            zkl_lock_is_held(a) == 0
        });
        seen.record("node deleted", zkl_lock_release(a), ZKL_LOCK_LOST);
        zkl_lock_free(a);
        zkl_lock_free(b);

        // ZKL_ZOOKEEPER_ERROR: a mutex under a simple lock's ephemeral node.
        let p = path("simple");
        let simple = new_lock(zkl_simple_lock_new, c, &p);
        assert_eq!(zkl_lock_acquire(simple, 5000), ZKL_OK);
        let m = new_lock(zkl_mutex_new, c, &p);
        seen.record(
            "mutex under a simple lock",
            zkl_lock_acquire(m, 2000),
            ZKL_ZOOKEEPER_ERROR,
        );
        zkl_lock_free(m);
        zkl_lock_free(simple);

        // ZKL_CLOSED.
        let m = new_lock(zkl_mutex_new, c, &path("closed"));
        assert_eq!(zkl_client_close(c), ZKL_OK);
        seen.record("closed", zkl_lock_acquire(m, 1000), ZKL_CLOSED);
        zkl_lock_free(m);
        zkl_client_free(c);

        // ZKL_CONNECTION_LOSS: nothing listens.
        let (s, _) = connect_with("127.0.0.1:1", options(1000));
        seen.record("nothing listens", s, ZKL_CONNECTION_LOSS);
        // ... TLS to a plaintext port.
        let o = options(3000);
        assert_eq!(zkl_options_set_tls_ca_file(o, ca_path.as_ptr()), ZKL_OK);
        let (s, _) = connect_with(&h, o);
        seen.record("TLS to a plaintext port", s, ZKL_CONNECTION_LOSS);
        // ... plaintext to a TLS port.
        let (s, _) = connect_with(&ca.address(), options(3000));
        seen.record("plaintext to a TLS port", s, ZKL_CONNECTION_LOSS);

        // ZKL_AUTH_FAILED: no client certificate; a CA the client does not trust (the system's).
        let o = options(8000);
        assert_eq!(zkl_options_set_tls_ca_file(o, ca_path.as_ptr()), ZKL_OK);
        let (s, _) = connect_with(&ca.connect_string(), o);
        seen.record("no client certificate", s, ZKL_AUTH_FAILED);
        let o = options(8000);
        assert_eq!(zkl_options_use_tls(o), ZKL_OK);
        let (s, _) = connect_with(&ca.connect_string(), o);
        seen.record("the system's CAs", s, ZKL_AUTH_FAILED);
        // ... a SASL server without credentials.
        let sasl = TestingServer::start_sasl(&[("bob", "pw")]).unwrap();
        let (s, _) = connect_with(&sasl.connect_string(), options(8000));
        seen.record("SASL without credentials", s, ZKL_AUTH_FAILED);
    }
    for (status, messages) in &seen.by_status {
        for m in messages {
            println!("{status}: {m}");
        }
    }
    let statuses: Vec<u32> = seen.by_status.keys().copied().collect();
    let want: Vec<u32> = [
        ZKL_TIMEOUT,
        ZKL_INVALID_ARGUMENT,
        ZKL_NOT_HELD,
        ZKL_CONNECTION_LOSS,
        ZKL_ZOOKEEPER_ERROR,
        ZKL_CANCELLED,
        ZKL_LOCK_LOST,
        ZKL_CLOSED,
        ZKL_WOULD_DEADLOCK,
        ZKL_AUTH_FAILED,
    ]
    .map(|s| s as u32)
    .into();
    assert_eq!(statuses, want, "{:#?}", seen.by_status);
    // Every hint a C caller can get (the connect timeout is never zero from C: 0 there means
    // the session timeout).
    let hints: Vec<u32> = seen.hints.keys().copied().collect();
    let want: Vec<u32> = [
        ZKL_HINT_TLS_CA_FILE,
        ZKL_HINT_TLS_IDENTITY,
        ZKL_HINT_TLS_KEY_PASSWORD,
        ZKL_HINT_TLS,
        ZKL_HINT_SASL,
        ZKL_HINT_IDENTITY,
    ]
    .map(|h| h as u32)
    .into();
    assert_eq!(hints, want, "{:#?}", seen.hints);
}

/// Every hint of the library has a C value, and its C setting names functions the header
/// declares.
#[test]
fn every_hint_has_a_c_value_naming_functions_of_the_header() {
    let header =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/include/zklock.h")).unwrap();
    let values: Vec<u32> = (1..=Hint::ALL.len() as u32).collect();
    for (hint, value) in Hint::ALL.iter().zip(&values) {
        let setting = c_setting(*value);
        for name in setting.split([',', ' ']).filter(|w| w.starts_with("zkl_")) {
            assert!(
                header.contains(&format!(" {name}(")),
                "{hint:?}: {name} is not a function of zklock.h"
            );
        }
    }
    assert_eq!(ZKL_HINT_CONNECT_TIMEOUT as u32, Hint::ALL.len() as u32);
}

/// What a program shows its user: the text of each string literal of the library's source
/// outside comments and tests, with the file and line. A rough lexer: enough for this source.
fn literals(src: &str) -> Vec<(usize, String)> {
    let b = src.as_bytes();
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\''
                if b.get(i + 2) == Some(&b'\'')
                    || (b.get(i + 1) == Some(&b'\\') && b.get(i + 3) == Some(&b'\'')) =>
            {
                // A char literal such as '"'.
                i += if b[i + 1] == b'\\' { 4 } else { 3 };
                continue;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let start = i + 2 + hashes;
                let end_mark = format!("\"{}", "#".repeat(hashes));
                let end = start + src[start..].find(&end_mark).unwrap();
                out.push((line, src[start..end].to_string()));
                line += src[start..end].matches('\n').count();
                i = end + end_mark.len();
                continue;
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                out.push((line, src[start..j].to_string()));
                line += src[start..j].matches('\n').count();
                i = j + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The source with its test modules cut (they end the files that have them).
fn without_tests(src: &str) -> &str {
    let cut = ["#[cfg(test)]\nmod ", "#[cfg(all(test"]
        .iter()
        .filter_map(|m| src.find(m))
        .min();
    &src[..cut.unwrap_or(src.len())]
}

/// No text of the library that a door can show names a Rust item (`Type::item`): the Rust
/// names of the settings live in `Hint::rust_name` only, which the C library, the Python
/// package and the command never show.
#[test]
fn no_text_of_the_library_names_a_rust_item() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rust_names: Vec<&str> = Hint::ALL.iter().map(|h| h.rust_name()).collect();
    // Not messages: a log target and a module path compared with one.
    let not_messages = ["zklock::log", "zookeeper_client::session"];
    let mut found = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            // The testing support is the tests', not a door's.
            if p.is_dir() && p != root.join("testing") {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let src = std::fs::read_to_string(&p).unwrap();
                for (line, text) in literals(without_tests(&src)) {
                    let names_item = text
                        .as_bytes()
                        .windows(3)
                        .any(|w| w[0].is_ascii_alphanumeric() && &w[1..] == b"::");
                    if names_item
                        && !rust_names.contains(&text.as_str())
                        && !not_messages.contains(&text.as_str())
                    {
                        found.push(format!("{}:{line}: {text:?}", p.display()));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "texts naming a Rust item:\n{}",
        found.join("\n")
    );
}

//! The header and the library agree: the `zkl_*` symbols exported by `libzklock.so` are
//! exactly the functions declared in `include/zklock.h`, and every name of the C contract
//! (`docs/c-api.md`) is in the header with the contract's values.
#![cfg(feature = "testing")]

use std::collections::BTreeSet;
use std::process::Command;

/// The names of the 0.1 contract (the team's `shared/design/c-api.md`, which `docs/c-api.md`
/// carries on): when that file is beside the checkout, a test checks this is still its list.
const CONTRACT_FUNCTIONS: &[&str] = &[
    "zkl_client_connect",
    "zkl_client_set_protocol",
    "zkl_client_add_auth",
    "zkl_client_set_acl",
    "zkl_client_free",
    "zkl_mutex_new",
    "zkl_read_lock_new",
    "zkl_write_lock_new",
    "zkl_rwlock_new",
    "zkl_semaphore_new",
    "zkl_simple_lock_new",
    "zkl_multi_lock_new",
    "zkl_lock_acquire",
    "zkl_lock_release",
    "zkl_lock_cancel",
    "zkl_lock_is_held",
    "zkl_lock_hold_state",
    "zkl_lock_lease_remaining_ms",
    "zkl_lock_fencing_token",
    "zkl_lock_free",
    "zkl_last_error_message",
    "zkl_status_name",
    "zkl_version",
];

const CONTRACT_VALUES: &[(&str, u32)] = &[
    ("ZKL_OK", 0),
    ("ZKL_TIMEOUT", 1),
    ("ZKL_INVALID_ARGUMENT", 2),
    ("ZKL_NOT_HELD", 3),
    ("ZKL_CONNECTION_LOSS", 4),
    ("ZKL_SESSION_EXPIRED", 5),
    ("ZKL_ZOOKEEPER_ERROR", 6),
    ("ZKL_INTERNAL_ERROR", 7),
    ("ZKL_CANCELLED", 8),
    ("ZKL_PROTOCOL_CURATOR", 0),
    ("ZKL_PROTOCOL_KAZOO", 1),
    ("ZKL_HOLD_NONE", 0),
    ("ZKL_HOLD_HELD", 1),
    ("ZKL_HOLD_UNCERTAIN", 2),
    ("ZKL_HOLD_LOST", 3),
    ("ZKL_ACL_OPEN", 0),
    ("ZKL_ACL_CREATOR_ALL", 1),
    ("ZKL_ACL_CREATOR_ALL_READ_ALL", 2),
];

fn header() -> String {
    std::fs::read_to_string(crate::common::ffi::repo().join("include/zklock.h"))
        .expect("read include/zklock.h")
}

/// The header without its comments.
fn header_code() -> String {
    let h = header();
    let mut out = String::new();
    let mut rest = h.as_str();
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("*/").expect("unterminated comment") + i + 2;
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Identifiers `zkl_...` directly followed by `(`: the declared functions.
fn declared_functions(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    let mut i = 0;
    while let Some(off) = code[i..].find("zkl_") {
        let start = i + off;
        let mut end = start;
        while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_') {
            end += 1;
        }
        let boundary =
            start == 0 || !(b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_');
        if boundary && b.get(end) == Some(&b'(') {
            out.insert(code[start..end].to_string());
        }
        i = end.max(start + 1);
    }
    out
}

#[test]
fn exported_symbols_equal_header_prototypes() {
    let so = crate::common::ffi::cdylib();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&so)
        .output()
        .expect("run nm (binutils)");
    assert!(
        out.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exported: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("zkl_"))
        .map(str::to_string)
        .collect();
    let declared = declared_functions(&header_code());
    assert!(!declared.is_empty());
    assert_eq!(
        exported,
        declared,
        "exported but not declared: {:?}; declared but not exported: {:?}",
        exported.difference(&declared).collect::<Vec<_>>(),
        declared.difference(&exported).collect::<Vec<_>>()
    );
}

#[test]
fn header_has_every_name_of_the_contract() {
    let code = header_code();
    let declared = declared_functions(&code);
    let missing: Vec<_> = CONTRACT_FUNCTIONS
        .iter()
        .filter(|f| !declared.contains(**f))
        .collect();
    assert!(
        missing.is_empty(),
        "contract functions missing from the header: {missing:?}"
    );
    for (name, value) in CONTRACT_VALUES {
        let decl = format!("{name} = {value},");
        assert!(code.contains(&decl), "header lacks `{decl}`");
    }
    for t in [
        "typedef struct zkl_client zkl_client;",
        "typedef struct zkl_lock zkl_lock;",
        "typedef enum zkl_status {",
        "} zkl_status;",
        "typedef enum zkl_protocol {",
        "} zkl_protocol;",
    ] {
        assert!(code.contains(t), "header lacks `{t}`");
    }
    // Enum values from C are uint32_t (style.md 8.3); the rest as in the contract.
    let flat = code.split_whitespace().collect::<Vec<_>>().join(" ");
    for proto in [
        "zkl_client_connect(const char *hosts, uint32_t session_timeout_ms, struct zkl_client **out_client)",
        "zkl_client_set_protocol(struct zkl_client *client, uint32_t protocol)",
        "const char *zkl_status_name(uint32_t status)",
        "zkl_lock_acquire(struct zkl_lock *lock, int64_t timeout_ms)",
        "int zkl_lock_is_held(const struct zkl_lock *lock)",
        "zkl_lock_fencing_token(const struct zkl_lock *lock, int64_t *out_token)",
        "zkl_semaphore_new(struct zkl_client *client, const char *path, uint32_t max_leases, struct zkl_lock **out_lock)",
        "zkl_multi_lock_new(struct zkl_lock *const *locks, size_t count, struct zkl_lock **out_lock)",
        "const char *zkl_last_error_message(void)",
        "const char *zkl_version(void)",
    ] {
        assert!(flat.contains(proto), "header lacks the prototype `{proto}`");
    }
    // The options of a connect (issue 27), as the team's spec spells them: the Python and C++
    // layers call them by these shapes.
    assert!(
        code.contains("typedef struct zkl_options zkl_options;"),
        "header lacks the zkl_options type"
    );
    assert!(
        code.contains("ZKL_AUTH_FAILED = 12,"),
        "header lacks ZKL_AUTH_FAILED = 12"
    );
    for proto in [
        "enum zkl_status zkl_options_new(struct zkl_options **out)",
        "void zkl_options_free(struct zkl_options *o)",
        "enum zkl_status zkl_options_set_session_timeout(struct zkl_options *o, uint32_t ms)",
        "enum zkl_status zkl_options_set_connect_timeout(struct zkl_options *o, uint32_t ms)",
        "enum zkl_status zkl_options_set_holder_id(struct zkl_options *o, const char *id)",
        "enum zkl_status zkl_options_set_server_tick(struct zkl_options *o, uint32_t ms)",
        "enum zkl_status zkl_options_set_protocol(struct zkl_options *o, uint32_t protocol)",
        "enum zkl_status zkl_options_set_acl(struct zkl_options *o, uint32_t acl)",
        "enum zkl_status zkl_options_add_auth(struct zkl_options *o, const char *scheme, const char *auth)",
        "enum zkl_status zkl_options_use_tls(struct zkl_options *o)",
        "enum zkl_status zkl_options_set_tls_ca_file(struct zkl_options *o, const char *path)",
        "enum zkl_status zkl_options_set_tls_ca_pem(struct zkl_options *o, const char *pem)",
        "enum zkl_status zkl_options_set_tls_identity_files(struct zkl_options *o, const char *cert, const char *key)",
        "enum zkl_status zkl_options_set_tls_identity_pem(struct zkl_options *o, const char *cert_pem, const char *key_pem)",
        "enum zkl_status zkl_options_set_tls_key_password(struct zkl_options *o, const char *password)",
        "enum zkl_status zkl_options_tls_danger_accept_any_server_name(struct zkl_options *o)",
        "enum zkl_status zkl_options_set_sasl_digest_md5(struct zkl_options *o, const char *user, const char *password)",
        "enum zkl_status zkl_client_connect_with_options(const char *hosts, const struct zkl_options *o, struct zkl_client **out)",
    ] {
        assert!(flat.contains(proto), "header lacks the prototype `{proto}`");
    }
    for m in [
        "ZKL_VERSION_MAJOR",
        "ZKL_VERSION_MINOR",
        "ZKL_VERSION_PATCH",
        "ZKL_VERSION_STRING",
    ] {
        assert!(code.contains(&format!("#define {m} ")), "header lacks {m}");
    }
    assert!(
        header().starts_with("/* Generated by build.rs"),
        "header banner missing"
    );
}

/// The repository's own contract, `docs/c-api.md`: it names exactly the functions of the header,
/// and every enum value it lists is the header's.
#[test]
fn the_repository_contract_names_every_header_function_with_its_values() {
    let text = std::fs::read_to_string(crate::common::ffi::repo().join("docs/c-api.md"))
        .expect("read docs/c-api.md");
    let in_doc = declared_functions(&text);
    let in_header = declared_functions(&header_code());
    assert_eq!(
        in_doc,
        in_header,
        "in docs/c-api.md only: {:?}; in the header only: {:?}",
        in_doc.difference(&in_header).collect::<Vec<_>>(),
        in_header.difference(&in_doc).collect::<Vec<_>>()
    );
    let code = header_code();
    let mut values = 0;
    for line in text.lines() {
        let l = line.trim();
        for part in l.split(',') {
            let part = part.trim();
            let Some((name, value)) = part.split_once(" = ") else {
                continue;
            };
            let name = name.trim();
            if !name.starts_with("ZKL_") {
                continue;
            }
            let value = value.split_whitespace().next().unwrap();
            let decl = format!("{name} = {value},");
            assert!(
                code.contains(&decl),
                "the header lacks `{decl}` of docs/c-api.md"
            );
            values += 1;
        }
    }
    assert!(
        values >= 30,
        "only {values} enum values found in docs/c-api.md"
    );
    for (name, value) in CONTRACT_VALUES {
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(&format!("{name} = {value},")),
            "docs/c-api.md no longer says {name} = {value}"
        );
    }
}

/// The team's design contract, where it is beside the checkout (it is not part of the
/// repository): every name of it is in the repository's contract.
#[test]
fn the_design_contract_is_within_the_repository_contract() {
    let doc = crate::common::ffi::repo().join("../shared/design/c-api.md");
    let Ok(text) = std::fs::read_to_string(&doc) else {
        eprintln!("{} not found: docs/c-api.md is the contract", doc.display());
        return;
    };
    let in_design = declared_functions(&text);
    let ours: BTreeSet<String> = CONTRACT_FUNCTIONS.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        in_design, ours,
        "c-api.md changed: update CONTRACT_FUNCTIONS"
    );
    let repo = declared_functions(
        &std::fs::read_to_string(crate::common::ffi::repo().join("docs/c-api.md")).unwrap(),
    );
    assert!(in_design.is_subset(&repo));
}

#[path = "../../src/ffi/header.rs"]
mod header;

/// The committed header is what cbindgen makes of `src/ffi` now (as rustls-ffi and hyper check
/// theirs): a change to the C API without its header fails here, whether or not the build
/// regenerated it (feature `header`).
#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let root = crate::common::ffi::repo();
    let generated = header::generate(
        root,
        (
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR"),
            env!("CARGO_PKG_VERSION_PATCH"),
            env!("CARGO_PKG_VERSION"),
        ),
    )
    .expect("cbindgen")
    .expect("cbindgen parses the crate");
    let committed = std::fs::read(root.join("include/zklock.h")).expect("read include/zklock.h");
    assert!(
        generated == committed,
        "include/zklock.h is not what cbindgen generates from src/ffi: run `cargo build --features header` and commit it"
    );
}

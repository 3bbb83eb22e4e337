//! The command's exit statuses (sysexits.h's where one fits, the shells' for COMMAND), and
//! the status and message of a usage error or of an error of the library.

use std::process::ExitCode;

/// Not acquired before the timeout (EX_TEMPFAIL from sysexits.h; change with --conflict-exit-code).
pub(crate) const EXIT_NOT_ACQUIRED: u8 = 75;
/// Bad command line, or a lock path that is not one (EX_USAGE).
pub(crate) const EXIT_USAGE: u8 = 64;
/// `holders`/`revoke`: the path holds no lock layout zklock knows; or a lock of another kind
/// than asked for is there (a simple lock's node) (EX_DATAERR).
pub(crate) const EXIT_UNKNOWN_LAYOUT: u8 = 65;
/// ZooKeeper unreachable, session lost while acquiring, or another ZooKeeper error
/// (EX_UNAVAILABLE).
pub(crate) const EXIT_UNAVAILABLE: u8 = 69;
/// Authentication failed (SASL, a TLS certificate), or a node's ACL refused this client's
/// identity (EX_NOPERM).
pub(crate) const EXIT_NOPERM: u8 = 77;
/// The lock stopped being provably held while COMMAND ran (its lease ran out or its session
/// ended): COMMAND's own status is on stderr. Outside sysexits' 64-78 and the shells' 126-165.
pub(crate) const EXIT_LOST: u8 = 80;
/// A revocation request (`zklock revoke`) reached a holder that made its lock revocable
/// (--revocable): COMMAND was ended as asked and the lock released; COMMAND's own status is on
/// stderr. Next to 80, outside sysexits' 64-78 and the shells' 126-165.
pub(crate) const EXIT_REVOKED: u8 = 81;
/// COMMAND found but not executable (as shells do).
pub(crate) const EXIT_CANNOT_EXECUTE: u8 = 126;
/// COMMAND not found (as shells do).
pub(crate) const EXIT_NOT_FOUND: u8 = 127;

pub(crate) fn usage(msg: &str) -> ExitCode {
    eprintln!("zklock: {msg}\nTry `zklock --help`.");
    ExitCode::from(EXIT_USAGE)
}

/// The command's options for the setting an error's hint names.
pub(crate) fn option_of(hint: zklock::Hint) -> &'static str {
    use zklock::Hint;
    match hint {
        Hint::TlsCaFile => "--tls-ca",
        Hint::TlsIdentity => "--tls-cert and --tls-key",
        Hint::TlsKeyPassword => "--tls-key-password-file",
        Hint::Tls => "--tls",
        Hint::Sasl => "--sasl-user or --kerberos",
        Hint::Identity => "--sasl-user, --kerberos, --tls-cert or --digest-user",
        // The command gives every connect a timeout of its own; named for completeness.
        Hint::ConnectTimeout => "--timeout or --session-timeout",
        // A hint of a newer library: its Rust name says which setting.
        other => other.rust_name(),
    }
}

/// The exit status for an error of the library, whose message goes to stderr with its hint
/// in the command's words (`--tls-ca` where the library's Rust API says `Tls::ca_file`).
pub(crate) fn fail(e: &zklock::Error) -> ExitCode {
    if is_code(e, |z| {
        matches!(z, zookeeper_client::Error::NoChildrenForEphemerals)
    }) {
        eprintln!(
            "zklock: the lock path is a simple lock's node (an ephemeral node, which no other \
             kind of lock can queue under): take it with --simple, or use another path"
        );
        return ExitCode::from(EXIT_UNKNOWN_LAYOUT);
    }
    let msg = e.to_string_naming(option_of);
    eprintln!("zklock: {msg}");
    match e {
        zklock::Error::InvalidArgument(_) => ExitCode::from(EXIT_USAGE),
        zklock::Error::AuthFailed(_) => ExitCode::from(EXIT_NOPERM),
        e if is_no_auth(e) => ExitCode::from(EXIT_NOPERM),
        _ => ExitCode::from(EXIT_UNAVAILABLE),
    }
}

/// Whether the servers refused a request by the node's ACL (ZooKeeper's NoAuth).
fn is_no_auth(e: &zklock::Error) -> bool {
    is_code(e, |z| matches!(z, zookeeper_client::Error::NoAuth))
}

/// Whether `e` is a ZooKeeper error whose code `code` picks.
fn is_code(e: &zklock::Error, code: impl Fn(&zookeeper_client::Error) -> bool) -> bool {
    matches!(e, zklock::Error::ZooKeeper(_))
        && std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<zookeeper_client::Error>())
            .is_some_and(code)
}

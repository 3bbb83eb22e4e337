//! SASL authentication ([`Sasl`]), an option of a [`Client`](crate::Client)
//! ([`Options::sasl`](crate::Options::sasl)).

// Without the `tls` or `sasl` feature the options are kept (the API is the same with every
// feature set) but never read: connect refuses them, naming the feature.
#![cfg_attr(not(all(feature = "tls", feature = "sasl")), allow(dead_code))]

use super::tls::Secret;

/// SASL authentication at connect (ZooKeeper's `SASLAuthenticationProvider`): the server
/// knows the client as `sasl:<user>` (creator-only ACLs name it). DIGEST-MD5 sends no
/// password over the wire, unlike `digest` authentication ([`Options::auth`](crate::Options::auth)).
///
/// DIGEST-MD5 needs the `sasl` cargo feature (the C library, the Python package and the
/// command have it); GSSAPI (Kerberos) needs `sasl-gssapi`.
///
/// ```
/// let opts = zklock::Options::default().sasl(zklock::Sasl::digest_md5("bob", "secret"));
/// ```
#[derive(Clone, Debug)]
pub struct Sasl(pub(super) Mechanism);

#[derive(Clone, Debug)]
pub(super) enum Mechanism {
    DigestMd5 {
        user: String,
        password: Secret,
    },
    Gssapi {
        user: Option<String>,
        #[cfg_attr(not(feature = "sasl-gssapi"), allow(dead_code))]
        host: Option<String>,
    },
}

impl Sasl {
    /// DIGEST-MD5 with this user and password (a JAAS `Server` section's
    /// `user_<name>="<password>"` on the servers).
    pub fn digest_md5(user: impl Into<String>, password: impl Into<String>) -> Sasl {
        Sasl(Mechanism::DigestMd5 {
            user: user.into(),
            password: Secret(password.into()),
        })
    }

    /// GSSAPI (Kerberos) with the ticket in the credential cache (`kinit` first); `user` and
    /// `host` override the principal's user and the server's host name (default: the cache's
    /// principal, and each server's name from the host list). Needs the `sasl-gssapi` feature.
    pub fn gssapi(user: Option<String>, host: Option<String>) -> Sasl {
        Sasl(Mechanism::Gssapi { user, host })
    }

    /// The mechanism's name and the user, for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.0 {
            Mechanism::DigestMd5 { user, .. } => format!("SASL DIGEST-MD5 for user {user}"),
            Mechanism::Gssapi { user: Some(u), .. } => format!("SASL GSSAPI for user {u}"),
            Mechanism::Gssapi { user: None, .. } => "SASL GSSAPI".into(),
        }
    }
}

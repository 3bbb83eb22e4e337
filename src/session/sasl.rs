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
/// command have it); GSSAPI (Kerberos, [`Sasl::gssapi`]) needs `sasl-gssapi`.
///
/// ```
/// let opts = zklock::Options::default().sasl(zklock::Sasl::digest_md5("bob", "secret"));
/// let opts = zklock::Options::default().sasl(zklock::Sasl::gssapi());
/// ```
#[derive(Clone, Debug)]
pub struct Sasl(pub(super) Mechanism);

#[derive(Clone, Debug)]
pub(super) enum Mechanism {
    DigestMd5 { user: String, password: Secret },
    Gssapi(Gssapi),
}

/// SASL GSSAPI (Kerberos) at connect: the client proves the principal of its Kerberos
/// credentials, and the servers know it as `sasl:<principal>` (`sasl:alice@EXAMPLE.COM`; the
/// servers' `kerberos.removeRealmFromPrincipal` and `kerberos.removeHostFromPrincipal` shorten
/// it). Made by [`Sasl::gssapi`].
///
/// The credentials are the process's, as for every MIT Kerberos program: the ticket in the
/// credential cache (`KRB5CCNAME`, else the default cache; `kinit` makes it), else the client
/// keytab (`KRB5_CLIENT_KTNAME`, else `default_client_keytab_name` in `krb5.conf`), from which
/// Kerberos gets a ticket itself and renews it as it expires; `KRB5_CONFIG` names the
/// `krb5.conf`. They are looked at before each new session: a missing keytab, an expired ticket
/// or credentials for another principal than [`principal`](Self::principal) fail the connect
/// with words that say which, at once.
///
/// The servers' principal is `<service>/<host>@<realm>`: the service `zookeeper` (as the
/// Java client's `zookeeper.sasl.client.username`) and the host each server is reached by in
/// the host list, unless [`service`](Self::service) and [`host`](Self::host) say otherwise.
///
/// Needs the `sasl-gssapi` cargo feature (and the Kerberos libraries: Debian's `libkrb5-dev`
/// to build); without it [`Client::connect`](crate::Client::connect) says so.
///
/// ```
/// let kerberos = zklock::Sasl::gssapi()
///     .principal("alice@EXAMPLE.COM")
///     .service("zookeeper")
///     .host("zk1.example.com");
/// let opts = zklock::Options::default().sasl(kerberos);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Gssapi {
    pub(super) principal: Option<String>,
    pub(super) service: Option<String>,
    pub(super) host: Option<String>,
}

impl Gssapi {
    /// The principal the credentials must be for (`alice@EXAMPLE.COM`; the default realm's
    /// when the name has none): a connect with credentials for another fails, naming both.
    /// Without it, whichever principal the credentials are for.
    pub fn principal(mut self, principal: impl Into<String>) -> Gssapi {
        self.principal = Some(principal.into());
        self
    }

    /// The service of the servers' principal (default `zookeeper`).
    pub fn service(mut self, service: impl Into<String>) -> Gssapi {
        self.service = Some(service.into());
        self
    }

    /// The host of the servers' principal, for every server (default: each server's host as
    /// the host list names it): for servers reached by an address or an alias their principal
    /// does not name.
    pub fn host(mut self, host: impl Into<String>) -> Gssapi {
        self.host = Some(host.into());
        self
    }
}

impl From<Gssapi> for Sasl {
    fn from(g: Gssapi) -> Sasl {
        Sasl(Mechanism::Gssapi(g))
    }
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

    /// GSSAPI (Kerberos) with the process's Kerberos credentials (a credential cache, or a
    /// client keytab): see [`Gssapi`] for where they come from and what may be set. Needs the
    /// `sasl-gssapi` feature.
    ///
    /// ```
    /// let opts = zklock::Options::default().sasl(zklock::Sasl::gssapi());
    /// ```
    pub fn gssapi() -> Gssapi {
        Gssapi::default()
    }

    /// The mechanism's name and the user, for messages.
    pub(crate) fn describe(&self) -> String {
        match &self.0 {
            Mechanism::DigestMd5 { user, .. } => format!("SASL DIGEST-MD5 for user {user}"),
            Mechanism::Gssapi(Gssapi {
                principal: Some(p), ..
            }) => format!("SASL GSSAPI (Kerberos) as {p}"),
            Mechanism::Gssapi(_) => "SASL GSSAPI (Kerberos)".into(),
        }
    }
}

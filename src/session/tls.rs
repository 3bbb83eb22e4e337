//! TLS to the servers ([`Tls`]: whom to trust, and the client's own certificate for mutual
//! TLS), an option of a [`Client`](crate::Client) ([`Options::tls`](crate::Options::tls)),
//! and zookeeper-client's TLS options made of it, once per session (files are read again at
//! each new session, so a rotated certificate is picked up).

// Without the `tls` or `sasl` feature the options are kept (the API is the same with every
// feature set) but never read: connect refuses them, naming the feature.
#![cfg_attr(not(all(feature = "tls", feature = "sasl")), allow(dead_code))]

use std::path::{Path, PathBuf};

#[cfg(feature = "tls")]
use zookeeper_client as zk;

use crate::error::{Error, Hint, Result};

/// Where a PEM text comes from: given, or a file read at each connect.
#[derive(Clone)]
pub(super) enum Pem {
    Text(String),
    File(PathBuf),
}

impl Pem {
    fn read(&self, what: &str) -> Result<String> {
        match self {
            Pem::Text(t) => Ok(t.clone()),
            Pem::File(p) => std::fs::read_to_string(p).map_err(|e| {
                Error::invalid(format!("cannot read the TLS {what} {}: {e}", p.display()))
            }),
        }
    }

    pub(super) fn describe(&self, what: &str) -> String {
        match self {
            Pem::Text(_) => format!("the TLS {what} given as PEM text"),
            Pem::File(p) => format!("the TLS {what} {}", p.display()),
        }
    }
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pem::Text(_) => f.write_str("<PEM text>"),
            Pem::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// TLS to the servers (ZooKeeper's `secureClientPort`): the certificate authorities that sign
/// the servers' certificates, and, for mutual TLS (`ssl.clientAuth=need`), the client's own
/// certificate and key. Server names are verified: each host of the host list must be named
/// in its server's certificate (an IP address as an IP subject alternative name).
///
/// Files are read at each new session, not when the options are made: a certificate rotated
/// on disk is used from the next session on. PEM files or texts only (a PKCS#12 store can be
/// turned into PEM with `openssl pkcs12 -nodes`).
///
/// Needs the `tls` cargo feature (the C library, the Python package and the command have it);
/// without it [`Client::connect`](crate::Client::connect) says so.
///
/// ```
/// let tls = zklock::Tls::new()
///     .ca_file("/etc/zookeeper/ca.pem")
///     .identity_files("/etc/zookeeper/client.pem", "/etc/zookeeper/client.key");
/// let opts = zklock::Options::default().tls(tls);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Tls {
    pub(super) ca: Option<Pem>,
    cert: Option<Pem>,
    key: Option<Pem>,
    key_password: Option<Secret>,
    no_hostname_verification: bool,
}

/// A password, never printed.
#[derive(Clone)]
pub(super) struct Secret(pub(super) String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl Tls {
    /// TLS trusting the system's certificate authorities (the CA bundle OpenSSL would use),
    /// with no client certificate.
    pub fn new() -> Tls {
        Tls::default()
    }

    /// Trusts the certificate authorities of a PEM file (one or more certificates) instead of
    /// the system's.
    pub fn ca_file(mut self, path: impl AsRef<Path>) -> Tls {
        self.ca = Some(Pem::File(path.as_ref().to_path_buf()));
        self
    }

    /// Trusts the certificate authorities of a PEM text instead of the system's.
    pub fn ca_pem(mut self, pem: impl Into<String>) -> Tls {
        self.ca = Some(Pem::Text(pem.into()));
        self
    }

    /// The client's certificate (PEM, with its chain) and private key (PEM: PKCS#8, PKCS#1 or
    /// SEC1), for servers that ask for one (mutual TLS). The server sees the certificate's
    /// subject as the client's `x509` identity (creator-only ACLs name it).
    pub fn identity_files(mut self, cert: impl AsRef<Path>, key: impl AsRef<Path>) -> Tls {
        self.cert = Some(Pem::File(cert.as_ref().to_path_buf()));
        self.key = Some(Pem::File(key.as_ref().to_path_buf()));
        self
    }

    /// The client's certificate and private key as PEM texts (see
    /// [`identity_files`](Self::identity_files)).
    pub fn identity_pem(mut self, cert: impl Into<String>, key: impl Into<String>) -> Tls {
        self.cert = Some(Pem::Text(cert.into()));
        self.key = Some(Pem::Text(key.into()));
        self
    }

    /// The password of an encrypted private key (PEM `ENCRYPTED PRIVATE KEY`, PKCS#8 with
    /// PBES2, as `openssl pkcs8 -topk8` makes).
    pub fn key_password(mut self, password: impl Into<String>) -> Tls {
        self.key_password = Some(Secret(password.into()));
        self
    }

    /// **Dangerous:** accepts a server certificate signed by a trusted authority whatever name
    /// it was issued for. Anyone holding *any* certificate from that authority can then pose
    /// as the servers and see every request, credentials included. Only for servers whose
    /// certificates cannot name them (no IP address in a certificate of a server reached by
    /// address); prefer fixing the certificates.
    pub fn danger_accept_any_server_name(mut self) -> Tls {
        self.no_hostname_verification = true;
        self
    }

    /// Whether a client certificate was given.
    pub(crate) fn has_identity(&self) -> bool {
        self.cert.is_some()
    }

    /// The CA bundle, the client's certificate and its key (decrypted), as PEM texts.
    pub(super) fn read(&self) -> Result<(String, Option<(String, String)>)> {
        let ca = match &self.ca {
            Some(ca) => ca.read("CA file")?,
            None => system_ca()?,
        };
        let identity = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let cert = cert.read("certificate")?;
                let key = decrypt_key(key.read("key")?, self.key_password.as_ref(), key)?;
                Some((cert, key))
            }
            _ => None,
        };
        Ok((ca, identity))
    }
}

/// The system's CA bundle (where OpenSSL would look).
fn system_ca() -> Result<String> {
    #[cfg(feature = "tls")]
    {
        let probe = openssl_probe::probe();
        let mut files: Vec<PathBuf> = probe.cert_file.into_iter().collect();
        files.push("/etc/ssl/certs/ca-certificates.crt".into());
        for f in files {
            if let Ok(t) = std::fs::read_to_string(&f) {
                return Ok(t);
            }
        }
    }
    Err(Error::invalid(Hint::TlsCaFile.after(
        "TLS without a CA file, and no system CA bundle found: give one",
    )))
}

/// The key as an unencrypted PEM: decrypted with `password` when it is an encrypted PKCS#8.
fn decrypt_key(pem: String, password: Option<&Secret>, from: &Pem) -> Result<String> {
    let encrypted = pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----");
    let legacy = pem.contains("Proc-Type: 4,ENCRYPTED");
    match (encrypted || legacy, password) {
        (false, _) => Ok(pem),
        (true, None) => Err(Error::invalid(Hint::TlsKeyPassword.after(format_args!(
            "{} is encrypted: give its password",
            from.describe("key")
        )))),
        (true, Some(_)) if legacy => Err(Error::invalid(format!(
            "{} is encrypted the legacy OpenSSL way (Proc-Type header), which zklock cannot \
             read: convert it with `openssl pkcs8 -topk8 -in KEY -out KEY.p8`",
            from.describe("key")
        ))),
        (true, Some(pw)) => {
            #[cfg(feature = "tls")]
            {
                use pkcs8::der::pem::PemLabel;
                let doc = pkcs8::EncryptedPrivateKeyInfo::try_from(
                    pkcs8::Document::from_pem(&pem)
                        .map_err(|e| {
                            Error::invalid(format!("{}: not a PEM key: {e}", from.describe("key")))
                        })?
                        .1
                        .as_bytes(),
                )
                .map_err(|e| Error::invalid(format!("{}: {e}", from.describe("key"))))?
                .decrypt(pw.0.as_bytes())
                .map_err(|_| {
                    Error::invalid(Hint::TlsKeyPassword.after(format_args!(
                        "{} cannot be decrypted with the password given",
                        from.describe("key")
                    )))
                })?;
                doc.to_pem(pkcs8::PrivateKeyInfo::PEM_LABEL, Default::default())
                    .map(|p| p.to_string())
                    .map_err(|e| Error::invalid(format!("{}: {e}", from.describe("key"))))
            }
            #[cfg(not(feature = "tls"))]
            {
                let _ = pw;
                Err(Error::invalid(without("tls")))
            }
        }
    }
}

/// rustls's process-wide crypto provider, installed if nobody has: with more than one provider
/// compiled in (another crate of the program turning on rustls's `ring`), rustls cannot pick
/// one by itself and its config builders would panic.
#[cfg(feature = "tls")]
pub(super) fn ensure_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another thread's install is fine: a provider is installed.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

#[cfg(feature = "tls")]
pub(super) fn tls_options(tls: Tls) -> Result<zk::TlsOptions> {
    ensure_provider();
    let (ca, identity) = tls.read()?;
    let what = match &tls.ca {
        Some(p) => p.describe("CA file"),
        None => "the system's CA bundle".into(),
    };
    let mut o = zk::TlsOptions::new()
        .with_pem_ca(&ca)
        .map_err(|e| Error::invalid(format!("{what}: {e} (expected PEM certificates)")))?;
    if let Some((cert, key)) = identity {
        o = o.with_pem_identity(&cert, &key).map_err(|e| {
            Error::invalid(format!(
                "{} / {}: {e} (expected a PEM certificate and its PEM private key)",
                tls.cert
                    .as_ref()
                    .map(|c| c.describe("certificate"))
                    .unwrap_or_default(),
                tls.key
                    .as_ref()
                    .map(|c| c.describe("key"))
                    .unwrap_or_default()
            ))
        })?;
    }
    if tls.no_hostname_verification {
        log::warn!(
            "zklock: TLS server names are not verified (as this client's TLS options ask): \
             any holder of a certificate from the trusted CAs can pose as the servers"
        );
        o = crate::sys::tls_without_server_name_check(o);
    }
    Ok(o)
}

/// The message for an option that needs a cargo feature this build lacks.
#[cfg(not(all(feature = "tls", feature = "sasl", feature = "sasl-gssapi")))]
pub(super) fn without(feature: &str) -> String {
    format!(
        "zklock was built without its `{feature}` cargo feature: rebuild with \
         `--features {feature}` ({})",
        if feature == "sasl-gssapi" {
            "and the Kerberos headers: Debian's libkrb5-dev"
        } else {
            "the C library, the Python package and the command have it"
        }
    )
}

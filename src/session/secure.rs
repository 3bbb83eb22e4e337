//! Secured servers: what a client checks and proves when it connects. TLS to the servers
//! ([`Tls`]: whom to trust, and the client's own certificate for mutual TLS) and SASL
//! authentication ([`Sasl`]). Both are options of a [`Client`](crate::Client)
//! ([`Options::tls`](crate::Options::tls), [`Options::sasl`](crate::Options::sasl)); this
//! module turns them into zookeeper-client's, once per session (files are read again at each
//! new session, so a rotated certificate is picked up), and explains a failed handshake.

// Without the `tls` or `sasl` feature the options are kept (the API is the same with every
// feature set) but never read: connect refuses them, naming the feature.
#![cfg_attr(not(all(feature = "tls", feature = "sasl")), allow(dead_code))]

use std::path::{Path, PathBuf};

use zookeeper_client as zk;

use crate::error::{Error, Result};

/// Where a PEM text comes from: given, or a file read at each connect.
#[derive(Clone)]
enum Pem {
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

    fn describe(&self, what: &str) -> String {
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
    ca: Option<Pem>,
    cert: Option<Pem>,
    key: Option<Pem>,
    key_password: Option<Secret>,
    no_hostname_verification: bool,
}

/// A password, never printed.
#[derive(Clone)]
struct Secret(String);

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
    fn read(&self) -> Result<(String, Option<(String, String)>)> {
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
    Err(Error::invalid(
        "TLS without a CA file, and no system CA bundle found (give one: Tls::ca_file)",
    ))
}

/// The key as an unencrypted PEM: decrypted with `password` when it is an encrypted PKCS#8.
fn decrypt_key(pem: String, password: Option<&Secret>, from: &Pem) -> Result<String> {
    let encrypted = pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----");
    let legacy = pem.contains("Proc-Type: 4,ENCRYPTED");
    match (encrypted || legacy, password) {
        (false, _) => Ok(pem),
        (true, None) => Err(Error::invalid(format!(
            "{} is encrypted: give its password (Tls::key_password)",
            from.describe("key")
        ))),
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
                    Error::invalid(format!(
                        "{} cannot be decrypted with the password given (Tls::key_password)",
                        from.describe("key")
                    ))
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
pub struct Sasl(Mechanism);

#[derive(Clone, Debug)]
enum Mechanism {
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

fn without(feature: &str) -> String {
    format!(
        "zklock was built without its `{feature}` cargo feature: rebuild with \
         `--features {feature}` (the C library, the Python package and the command have it)"
    )
}

/// Adds TLS and SASL to a connector. `tls_hosts`: some host of the list says `tcp+tls://`
/// (TLS with the system's CAs when no [`Tls`] is given).
pub(crate) fn apply(
    connector: zk::Connector,
    tls: Option<&Tls>,
    tls_hosts: bool,
    sasl: Option<&Sasl>,
) -> Result<zk::Connector> {
    #[cfg_attr(not(all(feature = "tls", feature = "sasl")), allow(unused_mut))]
    let mut connector = connector;
    if tls.is_some() || tls_hosts {
        #[cfg(feature = "tls")]
        {
            connector = connector.with_tls(tls_options(tls.cloned().unwrap_or_default())?);
        }
        #[cfg(not(feature = "tls"))]
        return Err(Error::invalid(format!(
            "TLS asked for (Options::tls, or a tcp+tls:// host): {}",
            without("tls")
        )));
    }
    match sasl.map(|s| &s.0) {
        None => {}
        #[cfg(feature = "sasl")]
        Some(Mechanism::DigestMd5 { user, password }) => {
            connector = connector.with_sasl(zk::SaslOptions::digest_md5(
                user.clone(),
                password.0.clone(),
            ));
        }
        #[cfg(not(feature = "sasl"))]
        Some(Mechanism::DigestMd5 { .. }) => {
            return Err(Error::invalid(format!(
                "SASL DIGEST-MD5 asked for: {}",
                without("sasl")
            )))
        }
        #[cfg(feature = "sasl-gssapi")]
        Some(Mechanism::Gssapi { user, host }) => {
            let mut o = zk::SaslOptions::gssapi();
            if let Some(u) = user {
                o = o.with_username(u.clone());
            }
            if let Some(h) = host {
                o = o.with_hostname(h.clone());
            }
            connector = connector.with_sasl(o);
        }
        #[cfg(not(feature = "sasl-gssapi"))]
        Some(Mechanism::Gssapi { .. }) => {
            return Err(Error::invalid(format!(
                "SASL GSSAPI asked for: {}",
                without("sasl-gssapi")
            )))
        }
    }
    Ok(connector)
}

/// rustls's process-wide crypto provider, installed if nobody has: with more than one provider
/// compiled in (another crate of the program turning on rustls's `ring`), rustls cannot pick
/// one by itself and its config builders would panic.
#[cfg(feature = "tls")]
fn ensure_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing the race to another thread's install is fine: a provider is installed.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
}

#[cfg(feature = "tls")]
fn tls_options(tls: Tls) -> Result<zk::TlsOptions> {
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
            "zklock: TLS server names are not verified (Tls::danger_accept_any_server_name): \
             any holder of a certificate from the trusted CAs can pose as the servers"
        );
        o = crate::sys::tls_without_server_name_check(o);
    }
    Ok(o)
}

/// Why a TLS handshake with `addr` (named `host` in the host list) fails, in words a user can
/// act on; `None` when it succeeds and the server keeps the connection (the fault is
/// elsewhere). Waits at most `wait` for each step.
#[cfg(feature = "tls")]
pub(crate) fn explain_handshake(
    addr: std::net::SocketAddr,
    host: &str,
    tls: Option<&Tls>,
    wait: std::time::Duration,
) -> Option<String> {
    use rustls::pki_types::ServerName;
    use rustls::{AlertDescription, CertificateError};

    let tls = tls.cloned().unwrap_or_default();
    let (config, has_identity) = match client_config(&tls) {
        Ok(c) => c,
        Err(e) => return Some(e.to_string()),
    };
    let name = ServerName::try_from(host.to_string()).ok()?;
    let mut conn = rustls::ClientConnection::new(config, name).ok()?;
    let mut sock = std::net::TcpStream::connect_timeout(&addr, wait).ok()?;
    sock.set_read_timeout(Some(wait)).ok()?;
    sock.set_write_timeout(Some(wait)).ok()?;
    let mut result = Ok(());
    while conn.is_handshaking() && result.is_ok() {
        result = conn.complete_io(&mut sock).map(|_| ());
    }
    if result.is_ok() {
        // The handshake is done on our side; a server that refuses our certificate says so
        // now, with an alert (TLS 1.3 checks the client's certificate after the client's
        // last handshake message).
        let mut buf = [0u8; 1];
        result = std::io::Read::read(&mut rustls::Stream::new(&mut conn, &mut sock), &mut buf)
            .map(|_| ());
    }
    let e = match result {
        Ok(()) => return None,
        Err(e) => e,
    };
    let timed_out = matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    );
    if timed_out && !conn.is_handshaking() {
        // Handshake done, no alert: the server took us.
        return None;
    }
    let why = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => format!(
            "the server's certificate is not signed by a CA this client trusts ({}): give the \
             CA that signed the servers' certificates (Tls::ca_file)",
            tls.ca
                .as_ref()
                .map(|c| c.describe("CA file"))
                .unwrap_or_else(|| "the system's CA bundle".into())
        ),
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => format!(
            "the server's certificate is not issued for {host:?}: connect by a name or address \
             the certificate carries, or reissue it with {host:?} as a subject alternative name"
        ),
        Some(rustls::Error::InvalidCertificate(
            c @ (CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. }),
        )) => format!("the server's certificate is out of its validity period ({c:?})"),
        Some(rustls::Error::InvalidCertificate(c)) => {
            format!("the server's certificate was refused ({c:?})")
        }
        Some(rustls::Error::AlertReceived(a))
            if !has_identity
                && matches!(
                    a,
                    AlertDescription::CertificateRequired
                        | AlertDescription::HandshakeFailure
                        | AlertDescription::BadCertificate
                ) =>
        {
            "the server requires a client certificate (ssl.clientAuth=need): give one \
              (Tls::identity_files)"
                .to_string()
        }
        Some(rustls::Error::AlertReceived(a))
            if has_identity
                && matches!(
                    a,
                    AlertDescription::CertificateRequired
                        | AlertDescription::HandshakeFailure
                        | AlertDescription::BadCertificate
                        | AlertDescription::UnknownCA
                        | AlertDescription::CertificateUnknown
                        | AlertDescription::CertificateExpired
                        | AlertDescription::CertificateRevoked
                        | AlertDescription::AccessDenied
                ) =>
        {
            format!(
                "the server refused the client certificate ({a:?}): it must be signed by a CA in \
             the servers' trust store, and be valid now"
            )
        }
        Some(rustls::Error::InvalidMessage(_))
        | Some(rustls::Error::InappropriateMessage { .. }) => {
            "the server did not answer TLS: is it a plaintext port? (drop tcp+tls:// and \
             Options::tls for it)"
                .to_string()
        }
        Some(other) => format!("{other}"),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof
            || e.kind() == std::io::ErrorKind::ConnectionReset =>
        {
            if conn.is_handshaking() {
                "the server closed the connection during the handshake: is it a plaintext \
                 port, or does it refuse this client's certificate?"
                    .to_string()
            } else {
                "the server closed the connection after the handshake: it may refuse this \
                 client's certificate"
                    .to_string()
            }
        }
        None if timed_out => "no answer to the TLS handshake: is it a plaintext port?".to_string(),
        None => e.to_string(),
    };
    Some(format!("TLS handshake with {addr} failed: {why}"))
}

/// A rustls configuration as zookeeper-client makes it of `tls` (roots, client certificate;
/// server names verified), for the probes; and whether it carries a client certificate.
#[cfg(feature = "tls")]
fn client_config(tls: &Tls) -> Result<(std::sync::Arc<rustls::ClientConfig>, bool)> {
    use rustls::pki_types::pem::PemObject;
    ensure_provider();
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let (ca, identity) = tls.read()?;
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca.as_bytes()).flatten() {
        let _ = roots.add(c);
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match &identity {
        Some((cert, key)) => {
            let certs: Vec<_> = CertificateDer::pem_slice_iter(cert.as_bytes())
                .flatten()
                .collect();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
                .map_err(|e| Error::invalid(format!("the TLS key: {e}")))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| Error::invalid(format!("the TLS certificate and key: {e}")))?
        }
        None => builder.with_no_client_auth(),
    };
    Ok((std::sync::Arc::new(config), identity.is_some()))
}

/// A four-letter word over TLS (ZooKeeper's secure port answers them): the answer, or `None`
/// when the server could not be asked within `wait`.
#[cfg(feature = "tls")]
pub(crate) fn four_letter(
    addr: std::net::SocketAddr,
    host: &str,
    tls: Option<&Tls>,
    cmd: &str,
    wait: std::time::Duration,
) -> Option<String> {
    use std::io::{Read, Write};
    let (config, _) = client_config(&tls.cloned().unwrap_or_default()).ok()?;
    let name = rustls::pki_types::ServerName::try_from(host.to_string()).ok()?;
    let mut conn = rustls::ClientConnection::new(config, name).ok()?;
    let end = std::time::Instant::now() + wait;
    let mut sock = std::net::TcpStream::connect_timeout(&addr, wait).ok()?;
    sock.set_read_timeout(Some(wait)).ok()?;
    sock.set_write_timeout(Some(wait)).ok()?;
    let mut stream = rustls::Stream::new(&mut conn, &mut sock);
    stream.write_all(cmd.as_bytes()).ok()?;
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() || text.len() > 64 * 1024 {
            return None;
        }
        stream.sock.set_read_timeout(Some(left)).ok()?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => text.extend_from_slice(&buf[..n]),
            // The server closes without close_notify after its answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(_) => return None,
        }
    }
    Some(String::from_utf8_lossy(&text).into_owned())
}

/// Whether `addr` answers a TLS ClientHello with TLS (a server that accepts connections but
/// opens no plaintext session may be a TLS port).
#[cfg(feature = "tls")]
pub(crate) fn speaks_tls(addr: std::net::SocketAddr, wait: std::time::Duration) -> bool {
    use std::io::{Read, Write};
    ensure_provider();
    let config = rustls::ClientConfig::builder()
        .dangerous()
        .with_custom_certificate_verifier(std::sync::Arc::new(Refuse))
        .with_no_client_auth();
    let config = std::sync::Arc::new(config);
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let Ok(mut conn) = rustls::ClientConnection::new(config, name) else {
        return false;
    };
    let Ok(mut sock) = std::net::TcpStream::connect_timeout(&addr, wait) else {
        return false;
    };
    let _ = sock.set_read_timeout(Some(wait));
    let _ = sock.set_write_timeout(Some(wait));
    let mut hello = Vec::new();
    if conn.write_tls(&mut hello).is_err() || sock.write_all(&hello).is_err() {
        return false;
    }
    // A TLS server answers with a handshake record (22) or an alert (21), TLS 1.x.
    let mut head = [0u8; 3];
    sock.read_exact(&mut head).is_ok() && matches!(head, [21 | 22, 3, _])
}

/// A certificate verifier for [`speaks_tls`], which never gets as far as trusting anything.
#[cfg(feature = "tls")]
#[derive(Debug)]
struct Refuse;

#[cfg(feature = "tls")]
impl rustls::client::danger::ServerCertVerifier for Refuse {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> std::result::Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Err(rustls::Error::General("only probing".into()))
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("only probing".into()))
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> std::result::Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Err(rustls::Error::General("only probing".into()))
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::CryptoProvider::get_default()
            .map(|p| p.signature_verification_algorithms.supported_schemes())
            .unwrap_or_else(|| {
                rustls::crypto::aws_lc_rs::default_provider()
                    .signature_verification_algorithms
                    .supported_schemes()
            })
    }
}

//! Certificates for TLS test servers, made at test time (`rcgen`), and the harness's own TLS
//! probe (four-letter words over the secure port).

use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

/// Whether a TLS server asks its clients for a certificate (`ssl.clientAuth` in `zoo.cfg`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ClientAuth {
    /// Mutual TLS: a client without a certificate signed by the server's CA is refused
    /// (`ssl.clientAuth=need`).
    Need,
    /// The server asks for a certificate but accepts a client without one
    /// (`ssl.clientAuth=want`); one it cannot verify is still refused.
    Want,
    /// Server-authenticated TLS only: the client needs just the CA (`ssl.clientAuth=none`).
    None,
}

impl ClientAuth {
    /// The value of `ssl.clientAuth`.
    fn zoo_cfg_value(self) -> &'static str {
        match self {
            ClientAuth::Need => "need",
            ClientAuth::Want => "want",
            ClientAuth::None => "none",
        }
    }
}

/// A certificate and its private key, as PEM text and as files (for clients; also the
/// server's own identity).
///
/// The files live in the directory of the [`TestingCerts`] that made them and are removed with
/// its last clone.
///
/// ```no_run
/// let certs = zklock::testing::TestingCerts::generate().unwrap();
/// let alice = certs.client("alice").unwrap();
/// assert!(alice.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// println!("{} {}", alice.cert_path().display(), alice.key_path().display());
/// ```
#[derive(Clone)]
pub struct ClientCert {
    common_name: String,
    cert_pem: String,
    key_pem: String,
    cert_path: PathBuf,
    key_path: PathBuf,
    cert_der: CertificateDer<'static>,
    key_der: Vec<u8>,
}

impl ClientCert {
    /// The certificate's subject common name (`CN=`); ZooKeeper's x509 identity of a client
    /// that presents it is `CN=<this>`.
    pub fn common_name(&self) -> &str {
        &self.common_name
    }

    /// The certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key, PEM (PKCS#8, unencrypted).
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The file holding [`cert_pem`](Self::cert_pem).
    pub fn cert_path(&self) -> &Path {
        &self.cert_path
    }

    /// The file holding [`key_pem`](Self::key_pem).
    pub fn key_path(&self) -> &Path {
        &self.key_path
    }
}

impl fmt::Debug for ClientCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCert")
            .field("common_name", &self.common_name)
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

/// A throw-away certificate authority with a server certificate it signed, for TLS test
/// servers ([`TestingServer::start_tls`](super::TestingServer::start_tls),
/// [`TestingCluster::start_tls`](super::TestingCluster::start_tls)); client certificates are
/// made on demand by [`client`](Self::client).
///
/// Everything is generated at the call (ECDSA P-256 keys, by `rcgen`; a few milliseconds) and
/// written as PEM files to a temporary directory kept while any clone of the value lives
/// (clones share it; a server keeps a clone). The server certificate names `127.0.0.1` and
/// `localhost` unless made by [`generate_for_names`](Self::generate_for_names), and serves for
/// both server and client authentication.
///
/// Each call to [`generate`](Self::generate) makes a new CA, unknown to servers started with
/// another one: the "unknown CA" case of a test.
///
/// ```no_run
/// use zklock::testing::{ClientAuth, TestingCerts, TestingServer};
///
/// let server = TestingServer::start_tls(ClientAuth::Need).unwrap();
/// let certs = server.certs().unwrap();
/// let client = certs.client("alice").unwrap();
/// // connect to server.connect_string() ("tcp+tls://127.0.0.1:PORT") trusting
/// // certs.ca_path(), presenting client.cert_path() and client.key_path().
/// let stranger = TestingCerts::generate().unwrap(); // a CA the server does not know
/// ```
#[derive(Clone)]
pub struct TestingCerts {
    inner: Arc<Inner>,
}

struct Inner {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    ca_path: PathBuf,
    /// The CA's subject common name.
    ca_name: String,
    names: Vec<String>,
    server: ClientCert,
    server_store: PathBuf,
    /// The identity the harness presents for its four-letter words.
    harness: ClientCert,
    next: AtomicUsize,
}

fn rcgen_err(e: rcgen::Error) -> io::Error {
    io::Error::other(format!("certificate generation failed: {e}"))
}

fn dn(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

/// Sequence number of CAs made in this process (their names tell them apart in logs).
static CA_SERIAL: AtomicUsize = AtomicUsize::new(1);

impl TestingCerts {
    /// A new CA and a server certificate for `127.0.0.1` and `localhost`.
    ///
    /// ```
    /// let certs = zklock::testing::TestingCerts::generate().unwrap();
    /// assert!(certs.ca_pem().contains("BEGIN CERTIFICATE"));
    /// assert!(certs.ca_path().exists());
    /// ```
    pub fn generate() -> io::Result<TestingCerts> {
        Self::generate_for_names(&["127.0.0.1", "localhost"])
    }

    /// A new CA and a server certificate whose subject alternative names are `names` (IP
    /// addresses or DNS names): e.g. `&["wrong.example"]` for a server that a client reaching
    /// it at `127.0.0.1` must reject (name mismatch).
    ///
    /// ```
    /// let certs = zklock::testing::TestingCerts::generate_for_names(&["wrong.example"]).unwrap();
    /// assert_eq!(certs.server_names(), ["wrong.example"]);
    /// ```
    pub fn generate_for_names(names: &[&str]) -> io::Result<TestingCerts> {
        if names.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a server certificate needs at least one name",
            ));
        }
        let dir = tempfile::Builder::new().prefix("zklock-certs-").tempdir()?;
        let serial = CA_SERIAL.fetch_add(1, Ordering::Relaxed);

        let ca_key = KeyPair::generate().map_err(rcgen_err)?;
        let mut ca_params = CertificateParams::default();
        let ca_name = format!("zklock testing CA {} #{serial}", std::process::id());
        ca_params.distinguished_name = dn(&ca_name);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(rcgen_err)?;
        let ca_pem = ca_cert.pem();
        let ca_path = dir.path().join("ca.pem");
        std::fs::write(&ca_path, &ca_pem)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let server = issue(
            &issuer,
            dir.path(),
            "server",
            "zklock testing server",
            names.clone(),
        )?;
        // The server's PEM key store: its key, then its certificate chain.
        let server_store = dir.path().join("server-store.pem");
        std::fs::write(
            &server_store,
            format!("{}{}{}", server.key_pem, server.cert_pem, ca_pem),
        )?;
        let harness = issue(
            &issuer,
            dir.path(),
            "harness",
            "zklock testing harness",
            Vec::new(),
        )?;
        Ok(TestingCerts {
            inner: Arc::new(Inner {
                dir,
                issuer,
                ca_der: ca_cert.der().clone(),
                ca_pem,
                ca_path,
                ca_name,
                names,
                server,
                server_store,
                harness,
                next: AtomicUsize::new(0),
            }),
        })
    }

    /// A PEM file of a CA with this CA's subject name and a key of its own, as regenerating a
    /// CA makes: this CA's certificates name it as their issuer but do not verify against it.
    /// Written beside the CA file, once per call.
    ///
    /// ```
    /// let certs = zklock::testing::TestingCerts::generate().unwrap();
    /// let again = certs.regenerated_ca().unwrap();
    /// assert_ne!(std::fs::read_to_string(again).unwrap(), certs.ca_pem());
    /// ```
    pub fn regenerated_ca(&self) -> io::Result<PathBuf> {
        let key = KeyPair::generate().map_err(rcgen_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&self.inner.ca_name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).map_err(rcgen_err)?;
        let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let path = self
            .inner
            .dir
            .path()
            .join(format!("regenerated-ca-{n}.pem"));
        std::fs::write(&path, cert.pem())?;
        Ok(path)
    }

    /// A new client certificate with subject `CN=<common_name>`, signed by this CA (extended
    /// key usage clientAuth), written to two new files. Each call makes a new key, also for a
    /// name asked before.
    ///
    /// ```
    /// let certs = zklock::testing::TestingCerts::generate().unwrap();
    /// let bob = certs.client("bob").unwrap();
    /// assert_eq!(bob.common_name(), "bob");
    /// assert!(bob.key_pem().contains("PRIVATE KEY"));
    /// ```
    pub fn client(&self, common_name: &str) -> io::Result<ClientCert> {
        let n = self.inner.next.fetch_add(1, Ordering::Relaxed);
        issue(
            &self.inner.issuer,
            self.inner.dir.path(),
            &format!("client-{n}"),
            common_name,
            Vec::new(),
        )
    }

    /// The CA certificate, PEM (what a client trusts).
    pub fn ca_pem(&self) -> &str {
        &self.inner.ca_pem
    }

    /// The file holding [`ca_pem`](Self::ca_pem); also the servers' trust store.
    pub fn ca_path(&self) -> &Path {
        &self.inner.ca_path
    }

    /// The names in the server certificate (`["127.0.0.1", "localhost"]` by default).
    pub fn server_names(&self) -> &[String] {
        &self.inner.names
    }

    /// The server's certificate and key.
    pub fn server(&self) -> &ClientCert {
        &self.inner.server
    }

    /// The server's key store: one PEM file with its key, its certificate and the CA
    /// certificate (`ssl.keyStore.location` with `ssl.keyStore.type=PEM`).
    pub fn server_store_path(&self) -> &Path {
        &self.inner.server_store
    }

    /// The directory of the files.
    pub fn dir(&self) -> &Path {
        self.inner.dir.path()
    }

    /// The `zoo.cfg` lines of a server using these certificates on its secure port
    /// (`serverCnxnFactory`, key and trust stores as PEM, `ssl.clientAuth`); the port lines
    /// are the caller's.
    ///
    /// ```
    /// use zklock::testing::{ClientAuth, TestingCerts};
    /// let certs = TestingCerts::generate().unwrap();
    /// let lines = certs.zoo_cfg_lines(ClientAuth::Need);
    /// assert!(lines.contains(&"ssl.clientAuth=need".to_string()));
    /// ```
    pub fn zoo_cfg_lines(&self, client_auth: ClientAuth) -> Vec<String> {
        vec![
            "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory".to_string(),
            format!(
                "ssl.keyStore.location={}",
                self.server_store_path().display()
            ),
            "ssl.keyStore.type=PEM".to_string(),
            format!("ssl.trustStore.location={}", self.ca_path().display()),
            "ssl.trustStore.type=PEM".to_string(),
            format!("ssl.clientAuth={}", client_auth.zoo_cfg_value()),
        ]
    }

    /// The harness's TLS client: trusts this CA, verifies the server's first name, presents
    /// the harness identity when asked.
    pub(crate) fn probe(&self) -> io::Result<TlsProbe> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(self.inner.ca_der.clone())
            .map_err(io::Error::other)?;
        let h = &self.inner.harness;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(h.key_der.clone()));
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_root_certificates(roots)
            .with_client_auth_cert(vec![h.cert_der.clone()], key)
            .map_err(io::Error::other)?;
        let name = ServerName::try_from(self.inner.names[0].clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(TlsProbe {
            config: Arc::new(config),
            name,
        })
    }
}

impl fmt::Debug for TestingCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestingCerts")
            .field("dir", &self.dir())
            .field("server_names", &self.server_names())
            .finish_non_exhaustive()
    }
}

/// A certificate for `common_name` (with `names` as subject alternative names) signed by
/// `issuer`, written to `<stem>.pem` and `<stem>.key` in `dir`.
fn issue(
    issuer: &Issuer<'static, KeyPair>,
    dir: &Path,
    stem: &str,
    common_name: &str,
    names: Vec<String>,
) -> io::Result<ClientCert> {
    let key = KeyPair::generate().map_err(rcgen_err)?;
    let mut params = CertificateParams::new(names).map_err(rcgen_err)?;
    params.distinguished_name = dn(common_name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    params.use_authority_key_identifier_extension = true;
    let cert = params.signed_by(&key, issuer).map_err(rcgen_err)?;
    let cert_pem = cert.pem();
    let key_pem = key.serialize_pem();
    let cert_path = dir.join(format!("{stem}.pem"));
    let key_path = dir.join(format!("{stem}.key"));
    std::fs::write(&cert_path, &cert_pem)?;
    std::fs::write(&key_path, &key_pem)?;
    Ok(ClientCert {
        common_name: common_name.to_string(),
        cert_pem,
        key_pem,
        cert_path,
        key_path,
        cert_der: cert.der().clone(),
        key_der: key.serialize_der(),
    })
}

/// The harness's TLS client for four-letter words on a secure client port.
#[derive(Clone)]
pub(crate) struct TlsProbe {
    config: Arc<rustls::ClientConfig>,
    name: ServerName<'static>,
}

impl TlsProbe {
    /// Sends a four-letter word over TLS and returns the whole answer (the server closes the
    /// connection after it, with or without a TLS close_notify).
    pub(crate) fn four_letter(
        &self,
        addr: &std::net::SocketAddr,
        cmd: &str,
        timeout: Duration,
    ) -> io::Result<String> {
        let tcp = TcpStream::connect_timeout(addr, timeout)?;
        tcp.set_read_timeout(Some(timeout))?;
        tcp.set_write_timeout(Some(timeout))?;
        let conn = rustls::ClientConnection::new(self.config.clone(), self.name.clone())
            .map_err(io::Error::other)?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        tls.write_all(cmd.as_bytes())?;
        tls.flush()?;
        let mut out = Vec::new();
        match tls.read_to_end(&mut out) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
            Err(e) => return Err(e),
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}

//! Probes of a server over TLS, for the words of a failed connect: why a handshake fails
//! ([`explain_handshake`]), a four-letter word over TLS ([`four_letter`]), and whether a port
//! speaks TLS ([`speaks_tls`]). Only with the `tls` feature.

use super::hosts::Why;
use super::tls::{ensure_provider, Tls};
use crate::error::{Error, Hint, Result};

/// Why a TLS handshake with `addr` (named `host` in the host list) fails, in words a user can
/// act on; `None` when it succeeds and the server keeps the connection (the fault is
/// elsewhere). Waits at most `wait` for each step.
pub(crate) fn explain_handshake(
    addr: std::net::SocketAddr,
    host: &str,
    tls: Option<&Tls>,
    wait: std::time::Duration,
) -> Option<Why> {
    use rustls::pki_types::ServerName;
    use rustls::{AlertDescription, CertificateError};

    let tls = tls.cloned().unwrap_or_default();
    let (config, has_identity) = match client_config(&tls) {
        Ok(c) => c,
        Err(e) => return Some(Why::new(e.without_hint(), e.hint())),
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
    let mut hint = None;
    let why = match e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) {
        // BadSignature: a trusted CA has the name of the certificate's issuer but not its key
        // (a CA regenerated under the same name): to the user, the same mistake.
        Some(rustls::Error::InvalidCertificate(
            c @ (CertificateError::UnknownIssuer | CertificateError::BadSignature),
        )) => {
            hint = Some(Hint::TlsCaFile);
            format!(
                "the server's certificate is not signed by a CA this client trusts ({}{}): \
                 give the CA that signed the servers' certificates",
                tls.ca
                    .as_ref()
                    .map(|c| c.describe("CA file"))
                    .unwrap_or_else(|| "the system's CA bundle".into()),
                if matches!(c, CertificateError::BadSignature) {
                    "; a CA there has the name of the certificate's issuer but another key, as \
                     a CA regenerated under the same name has"
                } else {
                    ""
                }
            )
        }
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
            hint = Some(Hint::TlsIdentity);
            "the server requires a client certificate (ssl.clientAuth=need): give one".to_string()
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
            hint = Some(Hint::Tls);
            "the server did not answer TLS: is it a plaintext port? Then connect to it without \
             TLS: drop tcp+tls:// and the TLS options"
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
    Some(Why::new(
        format!("TLS handshake with {addr} failed: {why}"),
        hint,
    ))
}

/// A rustls configuration as zookeeper-client makes it of `tls` (roots, client certificate;
/// server names verified), for the probes; and whether it carries a client certificate.
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
#[derive(Debug)]
struct Refuse;

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

//! The secure-connection setters of `zkl_options`: TLS (CA, client identity, the key's
//! password) and SASL. Like the others they only record; every check is the Rust library's, at
//! connect.

use std::ffi::c_char;

use super::boundary::try_str;
use super::options::{with_settings, zkl_options};
use super::status::zkl_status;
use crate::{Sasl, Tls};

/// Turns TLS on for every server of the host list (ZooKeeper's secureClientPort), trusting the
/// system's certificate authorities unless a CA is set (zkl_options_set_tls_ca_file or
/// zkl_options_set_tls_ca_pem), with no client certificate unless one is set. A host written
/// "tcp://host:port" stays plaintext. Every zkl_options_set_tls_* call and
/// zkl_options_tls_danger_accept_any_server_name turn TLS on too; hosts written
/// "tcp+tls://host:port" use TLS even without any of them. Each host of the list must be named in
/// its server's certificate (an address as an IP subject alternative name).
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o. Never blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_use_tls(o: *mut zkl_options) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(|t| t);
                Ok(())
            })
        }
    })
}

/// Turns TLS on (zkl_options_use_tls) trusting the certificate authorities of a PEM file (one or
/// more certificates) instead of the system's. path is copied; the file is read at each new
/// session, not now, so a rotated CA is used from the next session on: an unreadable file or
/// one that is not PEM fails the connect with ZKL_INVALID_ARGUMENT and a message naming the
/// path.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or a path that is not UTF-8. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options; path is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_tls_ca_file(
    o: *mut zkl_options,
    path: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `path`.
        let path = unsafe { try_str(path, "path") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(|t| t.ca_file(path));
                Ok(())
            })
        }
    })
}

/// Turns TLS on (zkl_options_use_tls) trusting the certificate authorities of a PEM text (one or
/// more certificates) instead of the system's. pem is copied; text that is not PEM fails the
/// connect with ZKL_INVALID_ARGUMENT.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or text that is not UTF-8. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options; pem is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_tls_ca_pem(
    o: *mut zkl_options,
    pem: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `pem`.
        let pem = unsafe { try_str(pem, "pem") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(|t| t.ca_pem(pem));
                Ok(())
            })
        }
    })
}

/// Turns TLS on (zkl_options_use_tls) with the client's certificate (a PEM file, with its chain)
/// and private key (a PEM file: PKCS#8, PKCS#1 or SEC1; encrypted PKCS#8 with
/// zkl_options_set_tls_key_password), for servers that ask for one (mutual TLS,
/// ssl.clientAuth=need). The server knows the client by the certificate's subject, as its x509
/// identity (creator-only ACLs name it). Both paths are copied; the files are read at each new
/// session: an unreadable file or a bad PEM fails the connect with ZKL_INVALID_ARGUMENT and a
/// message naming the path; a certificate the server refuses, with ZKL_AUTH_FAILED.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or a path that is not UTF-8. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options; cert and key are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_tls_identity_files(
    o: *mut zkl_options,
    cert: *const c_char,
    key: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `cert`.
        let cert = unsafe { try_str(cert, "cert") }?.to_owned();
        // SAFETY: the caller's contract for `key`.
        let key = unsafe { try_str(key, "key") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(|t| t.identity_files(cert, key));
                Ok(())
            })
        }
    })
}

/// Turns TLS on (zkl_options_use_tls) with the client's certificate and private key given as PEM
/// texts (see zkl_options_set_tls_identity_files). Both are copied; text that is not PEM fails
/// the connect with ZKL_INVALID_ARGUMENT.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or text that is not UTF-8. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options; cert_pem and key_pem are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_tls_identity_pem(
    o: *mut zkl_options,
    cert_pem: *const c_char,
    key_pem: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `cert_pem`.
        let cert = unsafe { try_str(cert_pem, "cert_pem") }?.to_owned();
        // SAFETY: the caller's contract for `key_pem`.
        let key = unsafe { try_str(key_pem, "key_pem") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(|t| t.identity_pem(cert, key));
                Ok(())
            })
        }
    })
}

/// Turns TLS on (zkl_options_use_tls) and sets the password of an encrypted private key (PEM
/// "ENCRYPTED PRIVATE KEY", PKCS#8 with PBES2, as `openssl pkcs8 -topk8` makes). password is
/// copied (and never printed); a wrong one fails the connect with ZKL_INVALID_ARGUMENT.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or a password that is not UTF-8. Never
/// blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options; password is NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_tls_key_password(
    o: *mut zkl_options,
    password: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `password`.
        let password = unsafe { try_str(password, "password") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(|t| t.key_password(password));
                Ok(())
            })
        }
    })
}

/// DANGEROUS. Turns TLS on (zkl_options_use_tls) and accepts a server certificate signed by a
/// trusted authority whatever name it was issued for. Anyone holding ANY certificate from that
/// authority can then pose as the servers and see every request, credentials included. Only for
/// servers whose certificates cannot name them; prefer fixing the certificates. A warning is
/// logged at each connect.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o. Never blocks. Any thread.
///
/// Pointers: o is NULL or a live zkl_options.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_tls_danger_accept_any_server_name(
    o: *mut zkl_options,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.tls(Tls::danger_accept_any_server_name);
                Ok(())
            })
        }
    })
}

/// Sets SASL DIGEST-MD5 authentication at every (re)connect, for servers with ZooKeeper's
/// SASLAuthenticationProvider (a JAAS Server section with user_NAME="PASSWORD"): the server
/// knows the client as sasl:USER. Unlike "digest" (zkl_options_add_auth) no password crosses
/// the wire. user and password are copied (the password is never printed). A password the
/// server refuses fails the connect with ZKL_AUTH_FAILED, and a message naming the user.
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL argument or text that is not UTF-8. Never blocks.
/// Any thread.
///
/// Pointers: o is NULL or a live zkl_options; user and password are NULL or NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_sasl_digest_md5(
    o: *mut zkl_options,
    user: *const c_char,
    password: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        // SAFETY: the caller's contract for `user`.
        let user = unsafe { try_str(user, "user") }?.to_owned();
        // SAFETY: the caller's contract for `password`.
        let password = unsafe { try_str(password, "password") }?.to_owned();
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.sasl = Some(Sasl::digest_md5(user, password));
                Ok(())
            })
        }
    })
}

/// Sets SASL GSSAPI (Kerberos) authentication at every (re)connect, with the process's
/// Kerberos credentials: the ticket in the credential cache (KRB5CCNAME, else the default
/// cache; kinit makes it), else the client keytab (KRB5_CLIENT_KTNAME), from which Kerberos
/// gets tickets itself; KRB5_CONFIG names the krb5.conf. The servers know the client as
/// sasl:PRINCIPAL (sasl:alice@EXAMPLE.COM). Each argument may be NULL:
///   - principal: the principal the credentials must be for ("alice@EXAMPLE.COM", or "alice"
///     in any realm); NULL: whichever they are for;
///   - service: the service of the servers' principal (NULL: "zookeeper");
///   - host: the host of every server's principal (NULL: each server's host as the host list
///     names it).
///
/// The credentials are looked at before each new session: a missing keytab, an expired ticket,
/// another principal's credentials, or a principal the KDC does not know fail the connect at
/// once with ZKL_AUTH_FAILED and a message saying which. Needs a library built with the Rust
/// crate's sasl-gssapi feature; otherwise the connect fails with ZKL_INVALID_ARGUMENT, saying
/// so.
///
/// ```c
/// // KRB5_CLIENT_KTNAME=/etc/zklock/alice.keytab in the environment
/// zkl_options_set_sasl_gssapi(o, "alice@EXAMPLE.COM", NULL, NULL);
/// ```
///
/// Returns ZKL_INVALID_ARGUMENT for a NULL o or text that is not UTF-8. Never blocks. Any
/// thread.
///
/// Pointers: o is NULL or a live zkl_options; principal, service and host are NULL or
/// NUL-terminated.
#[no_mangle]
pub unsafe extern "C" fn zkl_options_set_sasl_gssapi(
    o: *mut zkl_options,
    principal: *const c_char,
    service: *const c_char,
    host: *const c_char,
) -> zkl_status {
    ffi_boundary!(status {
        let opt = |p: *const c_char, arg: &str| {
            if p.is_null() {
                return Ok(None);
            }
            // SAFETY: the caller's contract for `principal`, `service` and `host`.
            unsafe { try_str(p, arg) }.map(|s| Some(s.to_owned()))
        };
        let mut gssapi = Sasl::gssapi();
        if let Some(p) = opt(principal, "principal")? {
            gssapi = gssapi.principal(p);
        }
        if let Some(s) = opt(service, "service")? {
            gssapi = gssapi.service(s);
        }
        if let Some(h) = opt(host, "host")? {
            gssapi = gssapi.host(h);
        }
        // SAFETY: the caller's contract for `o`.
        unsafe {
            with_settings(o, |s| {
                s.sasl = Some(gssapi.into());
                Ok(())
            })
        }
    })
}

//! The Kerberos credentials of a GSSAPI session ([`Gssapi`](super::sasl::Gssapi)), looked at
//! before each new session: zookeeper-client takes the process's default credentials itself,
//! and a missing keytab, an expired ticket or another principal's credentials then fail deep
//! in the SASL exchange, in GSSAPI's words, or as a connect that never ends. Here they fail
//! at once, saying which and what to do.

use std::path::Path;

use libgssapi::context::{ClientCtx, CtxFlags};
use libgssapi::credential::{Cred, CredUsage};
use libgssapi::error::MajorFlags;
use libgssapi::name::Name;
use libgssapi::oid::{OidSet, GSS_MECH_KRB5, GSS_NT_HOSTBASED_SERVICE};

use super::sasl::Gssapi;
use crate::error::{Error, Result};

/// Where the credentials come from, for messages: the credential cache and the client keytab
/// as the environment names them.
fn sources() -> String {
    let cache = cache();
    match std::env::var("KRB5_CLIENT_KTNAME") {
        Ok(k) => format!("credential cache {cache}, client keytab {k}"),
        Err(_) => format!("credential cache {cache}, no client keytab (KRB5_CLIENT_KTNAME)"),
    }
}

/// The credential cache as the environment names it.
fn cache() -> String {
    std::env::var("KRB5CCNAME").unwrap_or_else(|_| "(the default one)".into())
}

/// A client keytab named by `KRB5_CLIENT_KTNAME` that is not there (`FILE:` or a path).
fn missing_keytab() -> Option<String> {
    let k = std::env::var("KRB5_CLIENT_KTNAME").ok()?;
    let path = k.strip_prefix("FILE:").unwrap_or(&k);
    if k.contains(':') && !k.starts_with("FILE:") {
        return None;
    }
    (!Path::new(path).exists()).then(|| path.to_string())
}

/// Checks the process's Kerberos credentials for a GSSAPI session with the servers named
/// `servers` (their hosts in the host list), as the SASL exchange will use them: the
/// credentials (none, expired, another principal's than `g.principal`), and a service ticket
/// for each server's principal (a client or server principal the KDC does not know). Returns
/// the client's principal; otherwise an error saying what is wrong and what to do.
pub(super) fn check_credentials(g: &Gssapi, servers: &[&str]) -> Result<String> {
    let fail = |why: String| Error::AuthFailed(format!("SASL GSSAPI (Kerberos): {why}").into());
    let gss = |e: libgssapi::error::Error| fail(format!("GSSAPI: {}", words(&e.to_string())));
    let mut krb5 = OidSet::new().map_err(gss)?;
    krb5.add(&GSS_MECH_KRB5).map_err(gss)?;
    let cred = Cred::acquire(None, None, CredUsage::Initiate, Some(&krb5))
        .map_err(|e| fail(no_credentials(&e)))?;
    // The first step of a context with each server asks the KDC for a ticket to it (and, with
    // a client keytab, for the client's own ticket first): what the SASL exchange does.
    let service = g.service.as_deref().unwrap_or("zookeeper");
    let mut asked: Vec<&str> = Vec::new();
    for server in servers {
        let host = g.host.as_deref().unwrap_or(server);
        if asked.contains(&host) {
            continue;
        }
        asked.push(host);
        let target = Name::new(
            format!("{service}@{host}").as_bytes(),
            Some(&GSS_NT_HOSTBASED_SERVICE),
        )
        .map_err(gss)?;
        let mut ctx = ClientCtx::new(
            None,
            target,
            CtxFlags::GSS_C_MUTUAL_FLAG,
            Some(&GSS_MECH_KRB5),
        );
        if let Err(e) = ctx.step(None, None) {
            return Err(fail(no_ticket(&e, service, host)));
        }
    }
    let info = cred.info().map_err(|e| fail(no_credentials(&e)))?;
    let name = info
        .name
        .display_name()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(gss)?;
    if info.lifetime.is_zero() {
        return Err(fail(format!(
            "the Kerberos ticket of {name} has expired ({}): {NEW_TICKET}",
            sources()
        )));
    }
    if let Some(want) = &g.principal {
        let same = if want.contains('@') {
            *want == name
        } else {
            name.split('@').next() == Some(want.as_str())
        };
        if !same {
            return Err(fail(format!(
                "the Kerberos credentials are for {name}, not {want} as asked ({})",
                sources()
            )));
        }
    }
    Ok(name)
}

const NEW_TICKET: &str = "get a new one (kinit), or give a keytab (KRB5_CLIENT_KTNAME) from \
                          which Kerberos gets tickets itself";

/// Whether a GSSAPI error says the credentials have expired.
fn expired(e: &libgssapi::error::Error) -> bool {
    // The routine error is a number in its field of the major status, not a flag.
    let routine = e.major.bits() & 0x00ff_0000;
    routine == MajorFlags::GSS_S_CREDENTIALS_EXPIRED.bits() || e.to_string().contains("expired")
}

/// The words for credentials that could not be had.
fn no_credentials(e: &libgssapi::error::Error) -> String {
    let why = if expired(e) {
        format!(
            "the Kerberos ticket has expired ({}): {NEW_TICKET}",
            sources()
        )
    } else if let Some(keytab) = missing_keytab() {
        format!(
            "no Kerberos credentials: the client keytab {keytab} (KRB5_CLIENT_KTNAME) does \
             not exist, and the credential cache {} holds no ticket",
            cache()
        )
    } else {
        format!(
            "no Kerberos credentials ({}): get a ticket (kinit), or give a keytab \
             (KRB5_CLIENT_KTNAME)",
            sources()
        )
    };
    format!("{why}; GSSAPI said: {}", words(&e.to_string()))
}

/// The words for a ticket to `service/host` that the KDC did not give.
fn no_ticket(e: &libgssapi::error::Error, service: &str, host: &str) -> String {
    let said = words(&e.to_string());
    let why = if said.contains("Server") && said.contains("not found") {
        format!(
            "the KDC knows no servers' principal {service}/{host}: give the service and host \
             of the servers' principal (the service is `zookeeper` unless the servers run as \
             another; the host is each server's as the host list names it)"
        )
    } else if said.contains("Client") && said.contains("not found") {
        format!(
            "the KDC does not know the client's principal ({}): a keytab of a principal \
             removed or never made",
            sources()
        )
    } else if expired(e) {
        format!(
            "the Kerberos ticket has expired ({}): {NEW_TICKET}",
            sources()
        )
    } else if said.contains("Preauthentication failed") || said.contains("decrypt integrity") {
        format!(
            "the KDC refused the client's key ({}): a keytab older than the principal's \
             last key change",
            sources()
        )
    } else {
        format!(
            "no ticket for the servers' principal {service}/{host} ({})",
            sources()
        )
    };
    format!("{why}; GSSAPI said: {said}")
}

/// GSSAPI's words in one line (its messages end with newlines and repeat codes).
pub(super) fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

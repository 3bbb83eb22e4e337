//! Secured servers: what a client checks and proves when it connects. TLS to the servers
//! ([`Tls`]) and SASL authentication ([`Sasl`]), both options of a [`Client`](crate::Client);
//! this module turns them into zookeeper-client's connector options, once per session. The
//! options are in `tls` and `sasl`; the probes that explain a failed handshake in `probe`.

// Without the `tls` or `sasl` feature the options are kept (the API is the same with every
// feature set) but never read: connect refuses them, naming the feature.
#![cfg_attr(not(all(feature = "tls", feature = "sasl")), allow(dead_code))]

use zookeeper_client as zk;

use super::sasl::{Mechanism, Sasl};
#[cfg(feature = "tls")]
use super::tls::tls_options;
#[cfg(not(all(feature = "tls", feature = "sasl", feature = "sasl-gssapi")))]
use super::tls::without;
use super::tls::Tls;
#[cfg(not(all(feature = "tls", feature = "sasl", feature = "sasl-gssapi")))]
use crate::error::Error;
use crate::error::Result;

/// Adds TLS and SASL to a connector. `tls_hosts`: some host of the list says `tcp+tls://`
/// (TLS with the system's CAs when no [`Tls`] is given). `servers`: the hosts of the host
/// list, whose Kerberos principals a GSSAPI session needs tickets for.
pub(crate) fn apply(
    connector: zk::Connector,
    tls: Option<&Tls>,
    tls_hosts: bool,
    sasl: Option<&Sasl>,
    #[cfg_attr(not(feature = "sasl-gssapi"), allow(unused_variables))] servers: &[&str],
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
            "TLS asked for (in the options, or by a tcp+tls:// host): {}",
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
        Some(Mechanism::Gssapi(g)) => {
            super::kerberos::check_credentials(g, servers)?;
            let mut o = zk::SaslOptions::gssapi();
            if let Some(s) = &g.service {
                o = o.with_username(s.clone());
            }
            if let Some(h) = &g.host {
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

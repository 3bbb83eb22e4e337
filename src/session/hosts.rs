//! The host list and the words of a failed connect: [`HostList`] parsing (`host:port,...`,
//! schemes, chroot), and, per server, why no session opened (refused, no answer, a TLS port
//! reached in plaintext or the reverse, a certificate refused).

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use crate::error::{Error, ErrorDetail, Hint, Result};

/// A host list's servers and its chroot: `host:port,...[/chroot]`, each host optionally
/// written `tcp://host:port` (plaintext) or `tcp+tls://host:port` (TLS), as zookeeper-client
/// reads them.
pub(super) struct HostList<'a> {
    /// The list without the chroot (what zookeeper-client is given).
    pub(super) list: &'a str,
    pub(super) chroot: Option<&'a str>,
    /// Each host: (its text without the prefix, name, port, `Some(true)` for `tcp+tls://`,
    /// `Some(false)` for `tcp://`, `None`: the client's default).
    pub(super) hosts: Vec<(&'a str, &'a str, u16, Option<bool>)>,
}

const PLAIN: &str = "tcp://";
const SECURE: &str = "tcp+tls://";

fn strip_scheme(h: &str) -> (&str, Option<bool>) {
    if let Some(rest) = h.strip_prefix(SECURE) {
        (rest, Some(true))
    } else if let Some(rest) = h.strip_prefix(PLAIN) {
        (rest, Some(false))
    } else {
        (h, None)
    }
}

impl<'a> HostList<'a> {
    pub(super) fn parse(hosts: &'a str) -> Result<HostList<'a>> {
        // The chroot starts at the first '/' of the last host, after its scheme.
        let last = hosts.rfind(',').map_or(0, |i| i + 1);
        let tail = &hosts[last..];
        let lead = tail.len() - tail.trim_start().len();
        let (rest, _) = strip_scheme(&tail[lead..]);
        let at = last + lead + (tail.len() - lead - rest.len());
        let (list, chroot) = match hosts[at..].find('/') {
            Some(i) => (&hosts[..at + i], Some(&hosts[at + i..])),
            None => (hosts, None),
        };
        if let Some(c) = chroot {
            crate::path::validate_path(c).map_err(|e| {
                // The path's own words, without a second "invalid argument: ".
                let why = match e {
                    Error::InvalidArgument(m) => m,
                    other => other.to_string(),
                };
                Error::invalid(format!("bad chroot in host list {hosts:?}: {why}"))
            })?;
        }
        if list.trim().is_empty() {
            return Err(Error::invalid(format!(
                "host list {hosts:?} names no server"
            )));
        }
        let mut out = Vec::new();
        for h in list.split(',') {
            let (text, tls) = strip_scheme(h.trim());
            if text.contains("://") {
                return Err(Error::invalid(format!(
                    "host {h:?} of host list {hosts:?}: the only schemes are tcp:// and tcp+tls://"
                )));
            }
            let (name, port) = match text.rsplit_once(':') {
                Some((name, port)) => (name, port),
                None => (text, "2181"),
            };
            let port: u16 = port.parse().map_err(|_| {
                Error::invalid(format!("bad port in host {h:?} of host list {hosts:?}"))
            })?;
            if name.is_empty() {
                return Err(Error::invalid(format!(
                    "empty host name in host list {hosts:?}"
                )));
            }
            out.push((text, name, port, tls));
        }
        Ok(HostList {
            list,
            chroot,
            hosts: out,
        })
    }

    /// Whether some host is written `tcp+tls://`.
    pub(super) fn names_tls(&self) -> bool {
        self.hosts.iter().any(|h| h.3 == Some(true))
    }
}

/// The servers' addresses; each with its host name when it is reached over TLS (`tls`: hosts
/// without a scheme use TLS).
pub(super) fn parse_hosts(hosts: &str, tls: bool) -> Result<Vec<(SocketAddr, Option<String>)>> {
    let parsed = HostList::parse(hosts)?;
    let mut out = Vec::new();
    let mut unresolved = Vec::new();
    for (text, name, port, scheme) in &parsed.hosts {
        let secure = scheme.unwrap_or(tls).then(|| name.to_string());
        match (*name, *port).to_socket_addrs() {
            Ok(addrs) => out.extend(addrs.map(|a| (a, secure.clone()))),
            Err(e) => unresolved.push(format!("cannot resolve {text}: {e}")),
        }
    }
    // A host left out is worth a warning only while the others are used: with none resolved,
    // the error below says it, once.
    if !out.is_empty() {
        for why in unresolved {
            log::warn!("{why}; connecting to the other hosts");
        }
    }
    if out.is_empty() {
        // Nothing to connect to: say so now, not after the connect timeout.
        return Err(Error::ConnectionLoss(
            format!(
                "cannot connect to {hosts}: {}",
                diagnose(hosts, None, Duration::ZERO)
            )
            .into(),
        ));
    }
    Ok(out)
}

/// Why a connect failed, as its probes found: words, and the setting that would fix it (the
/// first one a probe named), which goes at the very end of the error's message (see
/// [`Hint`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Why {
    pub(super) text: String,
    pub(super) hint: Option<Hint>,
}

impl Why {
    pub(super) fn new(text: impl Into<String>, hint: Option<Hint>) -> Why {
        Why {
            text: text.into(),
            hint,
        }
    }

    /// `message` (which says this), with the hint after it.
    pub(super) fn ending(&self, message: String) -> String {
        match self.hint {
            Some(h) => h.after(message),
            None => message,
        }
    }
}

impl From<String> for Why {
    fn from(text: String) -> Why {
        Why::new(text, None)
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why no session could be opened with `hosts`, in words: per server, "cannot resolve host",
/// "connection refused by", "no answer from", why its TLS handshake fails, or that it
/// "accepts connections" (each probed once, waiting at most `wait` for each answer). `tls`:
/// the client's TLS options, when it has some (hosts without a scheme then use TLS).
pub(super) fn diagnose(hosts: &str, tls: Option<&super::tls::Tls>, wait: Duration) -> Why {
    let Ok(parsed) = HostList::parse(hosts) else {
        return Why::default();
    };
    let mut why = Vec::new();
    let mut hint = None;
    for (_, host, port, scheme) in &parsed.hosts {
        let secure = scheme.unwrap_or(tls.is_some());
        let addrs: Vec<SocketAddr> = match (*host, *port).to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(_) => {
                why.push(format!("cannot resolve host {host:?}"));
                continue;
            }
        };
        for a in addrs {
            if wait.is_zero() {
                continue;
            }
            why.push(match std::net::TcpStream::connect_timeout(&a, wait) {
                Ok(_) => {
                    let w = explain_silence(a, host, secure, tls, wait);
                    hint = hint.or(w.hint);
                    w.text
                }
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    format!("connection refused by {a}")
                }
                Err(_) => format!("no answer from {a}"),
            });
        }
    }
    Why::new(why.join("; "), hint)
}

/// Why a server that accepts connections opened no session.
fn explain_silence(
    a: SocketAddr,
    host: &str,
    secure: bool,
    tls: Option<&super::tls::Tls>,
    wait: Duration,
) -> Why {
    #[cfg(feature = "tls")]
    {
        if secure {
            return super::probe::explain_handshake(a, host, tls, wait).unwrap_or_else(|| {
                format!("{a} completed the TLS handshake but opened no ZooKeeper session").into()
            });
        }
        if super::probe::speaks_tls(a, wait) {
            return Why::new(
                format!(
                    "{a} did not answer as ZooKeeper: it speaks TLS; is it a TLS port? Then \
                     write tcp+tls://{host}:{}, or ask for TLS",
                    a.port()
                ),
                Some(Hint::Tls),
            );
        }
    }
    #[cfg(not(feature = "tls"))]
    let _ = (host, secure, tls, wait);
    format!("{a} accepts connections but opened no ZooKeeper session").into()
}

/// What a connect does when every server refuses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Fails at once, saying so (`Client::connect`, `Client::reconnect`: asked for now).
    Ends,
    /// Waits on to its bound (a fresh session after expiry: the servers may be restarting).
    Waits,
}

/// "connection refused by ..." for each of `servers` when every one refuses a TCP connection
/// now (a refusal comes at once; `wait` bounds a server that does not answer), `None` when one
/// does not refuse: waiting on will not make a server answer soon. Only a TCP connect, closed
/// at once: nothing is sent to a server that accepts.
pub(super) fn all_refused(servers: &[SocketAddr], wait: Duration) -> Option<Why> {
    let mut why = Vec::new();
    for a in servers {
        match std::net::TcpStream::connect_timeout(a, wait) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                why.push(format!("connection refused by {a}"))
            }
            _ => return None,
        }
    }
    (!why.is_empty()).then(|| why.join("; ").into())
}

/// Whether probing the servers (`why`, from [`diagnose`]) found a TLS handshake failing over
/// a certificate: retrying will not help.
pub(super) fn certificate_trouble(why: &Why) -> bool {
    [
        "not signed by a CA this client trusts",
        "certificate is not issued for",
        "requires a client certificate",
        "refused the client certificate",
        "out of its validity period",
        "certificate was refused",
    ]
    .iter()
    .any(|c| why.text.contains(c))
}

/// The error of a failed connect whose servers were probed (`why`): a TLS handshake that
/// failed over certificates is [`Error::AuthFailed`] (retrying will not help), anything else
/// a connection loss.
pub(super) fn connect_failure(detail: ErrorDetail, why: &Why) -> Error {
    if certificate_trouble(why) {
        Error::AuthFailed(detail)
    } else {
        Error::ConnectionLoss(detail)
    }
}

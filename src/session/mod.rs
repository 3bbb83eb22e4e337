//! The session layer: a [`Client`] and the ZooKeeper sessions behind it. The client's options
//! and ACL (`options`), TLS and SASL (`tls`, `sasl`, joined into the connector by `secure`),
//! the kinds a session deals in (`kinds`: states, events, retriable failures), one session's
//! state machine and requests (`state`), its lease (`lease`) and the lease's clock (`clock`), where its state
//! changes go (`events`), the client and its public methods (`client`), opening a session
//! (`connect`), the host list and the words of a failed connect (`hosts`, with the TLS probes
//! of `probe`), and the children watch (`watch`). Recipes talk to a session, never to the
//! executor beneath it.

mod client;
mod clock;
mod connect;
mod events;
mod hosts;
#[cfg(feature = "sasl-gssapi")]
mod kerberos;
mod kinds;
mod lease;
mod options;
#[cfg(feature = "tls")]
mod probe;
mod sasl;
mod secure;
mod state;
mod tls;
mod watch;

pub use client::Client;
pub use kinds::{SessionEvent, SessionState};
pub use options::{Acl, Options};
pub use sasl::{Gssapi, Sasl};
pub use tls::Tls;
pub use watch::ChildrenWatch;

pub(crate) use events::run_detached;
pub(crate) use kinds::is_retriable;
pub(crate) use lease::LeaseUse;
pub(crate) use state::{waiting_caller, SendTime, Session, Via};

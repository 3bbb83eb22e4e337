//! The session layer: a [`Client`] and the ZooKeeper sessions behind it. The client's options
//! and ACL (`options`), one session's state machine and requests (`state`), its lease (`lease`),
//! where its state changes go (`events`), the client that opens sessions (`client`), and the
//! children watch (`watch`). Recipes talk to a session, never to the executor beneath it.

mod client;
mod events;
mod lease;
mod options;
mod secure;
mod state;
mod watch;

pub use client::Client;
pub use options::{Acl, Options};
pub use secure::{Sasl, Tls};
pub use state::{SessionEvent, SessionState};
pub use watch::ChildrenWatch;

pub(crate) use events::run_detached;
pub(crate) use state::{is_retriable, waiting_caller, Session};

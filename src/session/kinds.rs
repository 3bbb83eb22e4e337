//! The kinds a session deals in, with no arrow to the rest of the session layer: its states
//! ([`SessionState`]), the change of state listeners hear of ([`SessionEvent`]), and which
//! failures of a request may be retried ([`is_retriable`]).

use zookeeper_client as zk;

/// The state of the client's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Connected: locks held are held.
    Connected,
    /// Disconnected, the session may survive: holding is uncertain until it reconnects or expires.
    Suspended,
    /// The session expired: every lock it held is lost. A new session may follow.
    Expired,
    /// The client was closed.
    Closed,
}

impl SessionState {
    /// Expired or Closed: the session will never come back.
    pub fn is_terminal(self) -> bool {
        matches!(self, SessionState::Expired | SessionState::Closed)
    }
}

/// A change of session state, as given to listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionEvent {
    /// The new state.
    pub state: SessionState,
    /// The session's id.
    pub session_id: i64,
    /// Which session of this client (0 for the first, +1 for each fresh session after expiry).
    pub generation: u64,
}

/// A failure that says nothing about the server's state: the request may or may not have
/// been applied, and asking again (on the same session) may succeed.
pub(crate) fn is_retriable(e: &zk::Error) -> bool {
    matches!(
        e,
        zk::Error::ConnectionLoss
            | zk::Error::UnexpectedError(_)
            | zk::Error::Timeout
            // The connection's own failures ("no response from connection in ...").
            | zk::Error::Custom(_)
            | zk::Error::NoHosts
    )
}

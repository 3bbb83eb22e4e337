//! The counting semaphore: at most N leases at once, in Curator's layout
//! (`InterProcessSemaphoreV2`, `curator.rs`) or kazoo's (`Semaphore`, `kazoo.rs`), chosen by
//! the protocol. In both, a fair mutex guards the count and only its holder watches the leases,
//! so a release wakes one process, not all of them. A lease is a hold of the front: the handle
//! is the participant, and keeps up to N of them.

mod curator;
mod kazoo;
mod leases;
mod many;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::attempt::Attempt;
use super::front::Lock;
use super::guard::{Guard, GuardSend};
use super::hold::Hold;
use super::participants::{Owner, Policy};
use super::queue::{Exclusive, Queue};
use super::raw::{Participant, Recipe};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{self, Protocol};
use crate::session::Client;
use crate::wait::Signal;
use curator::First;
use leases::Leases;
pub use many::LeaseSet;

/// How long a try-once acquire may wait for the mutex that guards the lease count (it never
/// waits for a lease to be returned).
const TRY_GUARD_WAIT: Duration = Duration::from_millis(500);

/// The protocol of [`Semaphore`]: the guarding mutex and the lease nodes, in one of two layouts.
#[derive(Clone)]
pub struct RawSemaphore {
    /// The fair mutex guarding the lease count (`P/locks` or `P-__lock__`).
    guard: Queue<Exclusive>,
    leases: Leases,
}

/// A distributed counting semaphore: at most `max_leases` holders at once, over every process
/// that uses the same path and protocol (Curator's `InterProcessSemaphoreV2` layout, or kazoo's
/// `Semaphore`). Each acquire takes one more lease for the handle (a handle may keep several,
/// each its own [`Lease`]); leases belong to the handle, not to a thread (a `Lease` may be sent
/// to and dropped on another thread), and vanish with their session (ephemeral nodes). A handle
/// whose own leases fill the semaphore is refused at once
/// ([`Error::WouldDeadlock`]): it could only wait for itself.
///
/// A failed, timed-out or cancelled acquire leaves no lease node behind. A try-once acquire
/// never waits for a lease to be returned (it may wait up to half a second for the mutex that
/// guards the count, held briefly by other acquirers).
///
/// ```no_run
/// use zklock::{Client, Options, Semaphore};
/// let client = Client::connect("127.0.0.1:2181", Options::default())?;
/// let pool = Semaphore::new(&client, "/semaphores/db", 3)?;
/// let lease = pool.lock()?; // one of at most 3
/// println!("lease node {} token {}", lease.node(), lease.fencing_token());
/// drop(lease); // returned
/// # Ok::<(), zklock::Error>(())
/// ```
pub type Semaphore = Lock<RawSemaphore>;

/// One lease of a [`Semaphore`]; returned (its node deleted) on drop. May be sent to and dropped
/// on another thread.
pub type Lease<'a> = Guard<'a, Semaphore>;

impl std::fmt::Debug for RawSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("path", &self.leases.path)
            .field("max_leases", &self.leases.max_leases)
            .field("protocol", &self.leases.protocol)
            .finish()
    }
}

impl Semaphore {
    /// A semaphore of `max_leases` leases at `path`, laid out per the client's protocol.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a malformed path or `max_leases == 0`.
    pub fn new(client: &Client, path: &str, max_leases: u32) -> Result<Semaphore> {
        Semaphore::with_protocol(client, path, max_leases, client.protocol())
    }

    /// A semaphore at `path` laid out per `protocol` (Curator: `P/locks` + `P/leases`; kazoo:
    /// `P-__lock__` + `P/<hex>`, N stored in P).
    pub fn with_protocol(
        client: &Client,
        path: &str,
        max_leases: u32,
        protocol: Protocol,
    ) -> Result<Semaphore> {
        crate::path::validate_path(path)?;
        if max_leases == 0 {
            return Err(Error::invalid(
                "a semaphore needs at least one lease (max_leases = 0)",
            ));
        }
        let (guard_path, leases_dir) = node::semaphore_layout(path, protocol);
        let raw = RawSemaphore {
            guard: Queue::new(client, &guard_path, protocol)?,
            leases: Leases {
                client: client.clone(),
                path: path.to_string(),
                protocol,
                max_leases,
                dir: leases_dir,
                root_checked: AtomicBool::new(false),
            },
        };
        let policy = Policy::Leases(max_leases as usize);
        Ok(Lock::from_raw(raw, Owner::Handle, policy, "semaphore"))
    }

    /// The number of leases.
    pub fn max_leases(&self) -> u32 {
        self.raw.leases.max_leases
    }

    /// The holder ids stored in the current lease nodes (oldest lease first; empty text for a
    /// holder without UTF-8 data, or whose node's ACL hides it from this client), like kazoo's
    /// `lease_holders()`.
    pub fn lease_holders(&self) -> Result<Vec<String>> {
        Ok(self
            .raw
            .leases
            .list()?
            .into_iter()
            .map(|(_, id, _, _)| id)
            .collect())
    }

    /// Blocks until a lease is available, and takes it.
    #[deprecated(since = "0.3.0", note = "use `lock()`, the acquire of every lock")]
    pub fn acquire(&self) -> Result<Lease<'_>> {
        self.lock()
    }

    /// Takes a lease if one is free now.
    #[deprecated(since = "0.3.0", note = "use `try_lock()`")]
    pub fn try_acquire(&self) -> Result<Option<Lease<'_>>> {
        self.try_lock()
    }

    /// Waits at most `timeout` in all for a lease.
    #[deprecated(since = "0.3.0", note = "use `try_lock_for()`")]
    pub fn try_acquire_for(&self, timeout: Duration) -> Result<Option<Lease<'_>>> {
        self.try_lock_for(timeout)
    }

    /// Waits until `deadline` at most for a lease.
    #[deprecated(since = "0.3.0", note = "use `try_lock_until()`")]
    pub fn try_acquire_until(&self, deadline: Instant) -> Result<Option<Lease<'_>>> {
        self.try_lock_until(deadline)
    }

    /// How many leases this handle keeps.
    #[deprecated(since = "0.3.0", note = "use `hold_count()`")]
    pub fn held_leases(&self) -> usize {
        self.hold_count()
    }
}

impl Lease<'_> {
    /// Returns the lease now and reports how it went.
    #[deprecated(since = "0.3.0", note = "use `unlock()`, as every guard")]
    pub fn release(self) -> Result<()> {
        self.unlock()
    }
}

impl Recipe for RawSemaphore {
    /// A lease is the handle's, whatever thread took it.
    type GuardMarker = GuardSend;
    const NAME: &'static str = "Semaphore";

    fn path(&self) -> &str {
        &self.leases.path
    }

    fn client(&self) -> &Client {
        &self.leases.client
    }

    /// Takes the guarding mutex, then a lease by the protocol's layout; the mutex is given back
    /// either way.
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>> {
        // This thread waits for every request it sends here (`session::waiting_caller`).
        let _caller = crate::session::waiting_caller();
        // A try-once attempt has one instant for every step, as the mutex's: the guarding
        // mutex, the lease's create and listing, the recovery of a lost reply, a fresh session.
        let a = Attempt::begin(&self.leases.client, self.leases.protocol, d, signal)?;
        if self.leases.protocol == Protocol::Kazoo
            && !self.leases.root_checked.load(Ordering::Acquire)
        {
            self.leases.ensure_kazoo_root(&a)?;
        }
        // The guard's own deadline (a try waits for it `TRY_GUARD_WAIT`); its node, if its
        // attempt fails, is given back by the semaphore's bound.
        let guarded = a.within(if a.try_once {
            Deadline::At(a.d.capped(TRY_GUARD_WAIT))
        } else {
            a.d
        });
        // Curator's layout: the first round trip tries for the mutex and a lease at once.
        let mut start = None;
        let mut queued = None;
        if self.leases.protocol == Protocol::Curator && !signal.is_cancelled() {
            match self.leases.take_curator_first(&self.guard, &a)? {
                First::Held(hold) if signal.is_cancelled() => {
                    // Cancel works at any time: what was taken is given back.
                    let _ = hold.release();
                    return Err(Error::Cancelled);
                }
                First::Held(hold) => return Ok(Some(hold)),
                First::Guarded(guard, made) => start = Some((guard, made)),
                First::Queued(made, queue) => queued = Some((made, queue)),
                First::Again => {}
            }
        }
        let (guard, made) = match start {
            Some(s) => s,
            None => {
                let guard = match queued {
                    Some(entered) => self.guard.queue_from(&guarded, entered)?,
                    None => self.guard.attempt_in(&guarded)?,
                };
                let Some(guard) = guard else {
                    return Ok(None);
                };
                (guard, None)
            }
        };
        let r = if signal.is_cancelled() {
            // A lease node made meanwhile goes first, while the mutex is still ours.
            drop(made);
            Err(Error::Cancelled)
        } else {
            match self.leases.protocol {
                Protocol::Curator => self.leases.take_curator(&a, made),
                Protocol::Kazoo => self.leases.take_kazoo(&a),
            }
        };
        let r = match r {
            // Cancel works at any time: what was taken is given back.
            Ok(Some(hold)) if signal.is_cancelled() => {
                let _ = hold.release();
                Err(Error::Cancelled)
            }
            r => r,
        };
        // Waited for, not sent and forgotten: a process that exits right after a failed acquire
        // would otherwise leave the guard's node, blocking every acquirer until its session
        // expires.
        if let Err(e) = guard.release_by(a.bound()) {
            log::warn!(
                "releasing the mutex of the semaphore {}: {e}",
                self.leases.path
            );
        }
        r
    }

    /// The lease holders, oldest lease first, each a holder (nodes of the lease directory).
    fn participants(&self) -> Result<Vec<Participant>> {
        Ok(self
            .leases
            .list()?
            .into_iter()
            .map(|(node, holder_id, created_ms, hidden)| Participant {
                sequence: node::sequence(&node).unwrap_or(0),
                node,
                holder_id,
                hidden,
                is_holder: true,
                is_reader: false,
                created_ms,
                // Curator's semaphore has no revocation.
                revocable: false,
            })
            .collect())
    }

    /// The lease directory.
    fn queue_path(&self) -> String {
        self.leases.dir.clone()
    }

    /// All N leases at most (`Semaphore::acquire_many`).
    fn max_per_acquire(&self) -> Option<usize> {
        Some(self.leases.max_leases as usize)
    }

    fn attempt_many(
        &self,
        n: usize,
        d: Deadline,
        signal: &Arc<Signal>,
    ) -> Result<Option<Vec<Hold>>> {
        self.attempt_many_leases(n, d, signal)
    }
}

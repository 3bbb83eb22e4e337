//! [`give_back`]: a node of ours that stops being wanted goes through the one release path
//! (`hold`), waited for by the attempt that let it go, but never past a try-once attempt's
//! pinned instant.

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;
use crate::runtime;
use crate::session::{Session, SessionState};

/// Runs `release` (a delete of ours through the one release path: retried for up to a session
/// timeout, then in the background) and waits for it, so that a process that exits right after
/// a failed acquire does not leave the node behind. `bound` is a try-once attempt's pinned
/// instant (`None` otherwise): the wait never goes past it. The release then goes on on a
/// thread of its own and the attempt returns at `bound`; when `bound` has passed, or the
/// session is cut off (the release could only wait), it is not waited for at all. `what` names
/// the node in the log.
pub(crate) fn give_back(
    session: &Session,
    bound: Option<Instant>,
    what: String,
    release: impl FnOnce() -> Result<()> + Send + 'static,
) {
    let job = Arc::new(parking_lot::Mutex::new(Some(move || {
        if let Err(e) = release() {
            log::warn!("releasing {what}: {e}");
        }
    })));
    if let Some(bound) = bound {
        // The release's own wait is a session timeout from now, past the instant: it runs on
        // a thread of its own, waited for until the instant at most.
        let (done, finished) = futures::channel::oneshot::channel::<()>();
        let j = job.clone();
        let spawned = std::thread::Builder::new()
            .name("zklock-release".into())
            .spawn(move || {
                run_once(&j);
                let _ = done.send(());
            });
        if spawned.is_ok() {
            let now = Instant::now();
            if now < bound && session.state() == SessionState::Connected {
                // Polls the sessions' tasks meanwhile, as every wait of a caller does.
                let _ = runtime::block_on(finished, Some(bound), None, None);
            }
            return;
        }
    }
    run_once(&job);
}

/// Runs the job unless it ran (or runs) already.
fn run_once<F: FnOnce()>(job: &parking_lot::Mutex<Option<F>>) {
    let f = job.lock().take();
    if let Some(f) = f {
        f()
    }
}

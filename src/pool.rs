//! The threads on which async callers' blocking work runs (an acquire that waits, the release
//! of an owned guard dropped in async code): the library's own, so that it needs no async
//! runtime and never blocks one. A job goes to an idle thread, or to a new one when none is
//! idle (a waiting acquire may take its thread for as long as it waits: jobs never queue
//! behind one another); a thread idle for [`IDLE`] ends.

use std::collections::VecDeque;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// How long a thread waits for another job before it ends.
const IDLE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Pool {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads waiting for a job and not yet promised one.
    idle: usize,
    /// Jobs promised to idle threads (each woken thread that finds one takes a job).
    promised: usize,
}

static POOL: Pool = Pool {
    state: Mutex::new(State {
        jobs: VecDeque::new(),
        idle: 0,
        promised: 0,
    }),
    cv: Condvar::new(),
};

/// Runs `job` on a thread of the pool, now: on an idle thread, else on a new one.
pub(crate) fn run(job: impl FnOnce() + Send + 'static) {
    let mut st = POOL.state.lock();
    st.jobs.push_back(Box::new(job));
    if st.idle > 0 {
        st.idle -= 1;
        st.promised += 1;
        POOL.cv.notify_one();
        return;
    }
    drop(st);
    let spawned = std::thread::Builder::new()
        .name("zklock-async".into())
        .spawn(worker);
    if let Err(e) = spawned {
        // The job waits for a thread of the pool to be free.
        log::error!("zklock: no thread for an async caller's work ({e}); it waits for one");
    }
}

/// A pool thread: takes jobs until none comes for [`IDLE`].
fn worker() {
    let mut st = POOL.state.lock();
    loop {
        if let Some(job) = st.jobs.pop_front() {
            drop(st);
            job();
            st = POOL.state.lock();
            continue;
        }
        st.idle += 1;
        loop {
            let timed_out = POOL.cv.wait_for(&mut st, IDLE).timed_out();
            if st.promised > 0 {
                // Promised a job (the idle count went down for it).
                st.promised -= 1;
                break;
            }
            if timed_out {
                st.idle -= 1;
                return;
            }
        }
    }
}

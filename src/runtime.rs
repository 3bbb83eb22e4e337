//! The blocking facade's engine: one background thread that runs zookeeper-client's session
//! tasks, and a tiny executor that blocks the caller on one future until it is ready, its
//! deadline passes, or it is cancelled.
//!
//! Requests are sent on the caller's thread when the crate's method is called (the crate
//! serialises them at call time); the caller then only waits for the reply here.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use futures::channel::mpsc;
use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::{Condvar, Mutex};

type BoxTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

struct Runtime {
    tx: mpsc::UnboundedSender<BoxTask>,
}

impl spawns_core::Spawn for Runtime {
    fn spawn(&self, task: spawns_core::Task) {
        self.send(Box::into_pin(task.future));
    }
}

impl Runtime {
    /// Queues a task for the I/O thread, isolated: a task that panics is logged and dropped,
    /// and the thread goes on running every other task (a session whose own task died stops
    /// renewing its lease, so its holds stop being believed).
    fn send(&self, task: BoxTask) {
        use futures::FutureExt;
        let isolated = std::panic::AssertUnwindSafe(task).catch_unwind().map(|r| {
            if r.is_err() {
                log::error!("a zklock I/O task panicked; the other tasks go on");
            }
        });
        if self.tx.unbounded_send(Box::pin(isolated)).is_err() {
            log::error!("zklock runtime thread is gone; task dropped");
        }
    }
}

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let (tx, mut rx) = mpsc::unbounded::<BoxTask>();
        std::thread::Builder::new()
            .name("zklock-io".into())
            .spawn(move || {
                // Tasks spawned from tasks land here too.
                let _scope = spawns_core::enter(runtime());
                let mut tasks: FuturesUnordered<BoxTask> = FuturesUnordered::new();
                async_io::block_on(futures::future::poll_fn(move |cx| {
                    loop {
                        match rx.poll_next_unpin(cx) {
                            Poll::Ready(Some(t)) => tasks.push(t),
                            Poll::Ready(None) => return Poll::Ready(()),
                            Poll::Pending => break,
                        }
                    }
                    while let Poll::Ready(Some(())) = tasks.poll_next_unpin(cx) {}
                    Poll::Pending
                }));
            })
            .expect("spawn the zklock-io thread");
        Runtime { tx }
    })
}

/// Runs `f` with the runtime as the spawner of zookeeper-client's tasks (its `connect`
/// spawns the session task).
pub(crate) fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _scope = spawns_core::enter(runtime());
    f()
}

/// Spawns a background task on the runtime thread.
pub(crate) fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    runtime().send(Box::pin(fut));
}

/// A wake-up flag and a cancel flag under one mutex, with a condvar: the waker of a blocked
/// caller. Checking the flags and starting to wait happen under the same mutex, so a wake-up
/// between "poll said pending" and "wait" is never lost.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
    cv: Condvar,
}

#[derive(Default)]
struct SignalState {
    woken: bool,
    cancelled: bool,
}

impl Signal {
    pub(crate) fn new() -> Arc<Signal> {
        Arc::new(Signal::default())
    }

    pub(crate) fn cancel(&self) {
        self.state.lock().cancelled = true;
        self.cv.notify_all();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.lock().cancelled
    }
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.state.lock().woken = true;
        self.cv.notify_all();
    }
}

/// How a blocking wait ended.
pub(crate) enum Outcome<T> {
    Ready(T),
    TimedOut,
    Cancelled,
}

/// Blocks on `fut` until it is ready, `deadline` passes, or (if `cancellable`) `signal` is
/// cancelled.
pub(crate) fn block_on<F: Future>(
    fut: F,
    deadline: Option<Instant>,
    signal: &Arc<Signal>,
    cancellable: bool,
) -> Outcome<F::Output> {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Outcome::Ready(v);
        }
        let mut st = signal.state.lock();
        loop {
            if cancellable && st.cancelled {
                return Outcome::Cancelled;
            }
            if st.woken {
                st.woken = false;
                break;
            }
            match deadline {
                Some(d) => {
                    if Instant::now() >= d || signal.cv.wait_until(&mut st, d).timed_out() {
                        if st.woken {
                            st.woken = false;
                            break;
                        }
                        return Outcome::TimedOut;
                    }
                }
                None => signal.cv.wait(&mut st),
            }
        }
    }
}

thread_local! {
    static CALL_SIGNAL: Arc<Signal> = Signal::new();
}

/// Blocks on a ZooKeeper call's reply future until `deadline`; never cancellable.
pub(crate) fn call<F: Future>(fut: F, deadline: Instant) -> Option<F::Output> {
    CALL_SIGNAL.with(|s| match block_on(fut, Some(deadline), s, false) {
        Outcome::Ready(v) => Some(v),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn deadline_and_cancel() {
        let s = Signal::new();
        let t = Instant::now();
        assert!(matches!(
            block_on(
                futures::future::pending::<()>(),
                Some(t + Duration::from_millis(50)),
                &s,
                true
            ),
            Outcome::TimedOut
        ));
        assert!(t.elapsed() >= Duration::from_millis(50));
        let s2 = s.clone();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            s2.cancel();
        });
        assert!(matches!(
            block_on(futures::future::pending::<()>(), None, &s, true),
            Outcome::Cancelled
        ));
        h.join().unwrap();
    }

    #[test]
    fn a_panicking_task_does_not_stop_the_io_thread() {
        spawn(async { panic!("a task's bug") });
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        spawn(async move {
            let _ = tx.send(1);
        });
        let got = call(rx, Instant::now() + Duration::from_secs(5));
        assert_eq!(
            got.map(|r| r.ok()),
            Some(Some(1)),
            "the I/O thread died with the task"
        );
    }

    #[test]
    fn wakes_on_ready_from_other_thread() {
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        let h = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            tx.send(7).unwrap();
        });
        assert_eq!(
            call(rx, Instant::now() + Duration::from_secs(5))
                .unwrap()
                .unwrap(),
            7
        );
        h.join().unwrap();
    }
}

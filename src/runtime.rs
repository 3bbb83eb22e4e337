//! The blocking facade's engine: a caller-runs executor for zookeeper-client's session tasks.
//!
//! zookeeper-client runs each session as one task (writing requests, reading replies, pings,
//! watches, reconnects). Those tasks live here in one shared set that any thread may poll:
//!
//! - a caller blocked on a reply waits in `async_io::block_on`, so it drives the async-io
//!   reactor itself, and it polls the task set itself whenever a task was woken: its request is
//!   written and its reply read on its own thread, with no hop to another thread and back;
//! - the `zklock-io` thread polls the set only while no caller waits (pings, watches,
//!   reconnects, background deletes); async-io's own thread runs the reactor then;
//! - one `dirty` flag and one waker for the whole set (the hub) hand the work over without a
//!   lost wake-up: whoever holds the set polls it again while `dirty` was set during its poll,
//!   checks it once more after letting go, and a caller that leaves hands a pending wake-up to
//!   another waiting caller or to `zklock-io`.
//!
//! Requests are queued on the caller's thread when the crate's method is called (the crate
//! serialises them at call time); a [`Caller`] guard says "this thread will wait for it
//! soon", so that queueing does not wake `zklock-io` for nothing.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::{Condvar, Mutex};

type BoxTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The shared task set and who may be asked to poll it.
struct Runtime {
    /// The tasks; whoever holds this lock polls them.
    tasks: Mutex<FuturesUnordered<BoxTask>>,
    /// Tasks spawned and not yet in `tasks` (spawning never takes the `tasks` lock).
    incoming: Mutex<Vec<BoxTask>>,
    /// A task was woken (or spawned) and nobody has polled the set since.
    dirty: AtomicBool,
    /// Callers blocked in [`block_on`], each of which drives when woken.
    waiters: Mutex<Vec<(u64, Waker)>>,
    /// Wakes `zklock-io` when no caller waits.
    io_kick: Mutex<bool>,
    io_cv: Condvar,
    /// The waker every task's wake-up ends in.
    hub: Waker,
    /// Keeps a pointer to the hub's allocation itself (the waker's points past its end, which
    /// leak checkers such as valgrind count as lost).
    _hub: Arc<Hub>,
}

struct Hub;

impl Wake for Hub {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let rt = runtime();
        rt.dirty.store(true, Ordering::SeqCst);
        let deferred = THREAD.with(|t| {
            if t.driving.get() {
                // The polling loop on this thread sees `dirty` and polls again.
                true
            } else if t.callers.get() > 0 && t.waiter.get().is_none() {
                t.owed.set(true);
                true
            } else {
                false
            }
        });
        if !deferred {
            rt.notify_driver();
        }
    }
}

/// Per thread: is this thread a waiting caller, inside a poll of the set, or about to wait.
struct ThreadState {
    /// The waiter id while this thread is blocked in [`block_on`].
    waiter: Cell<Option<u64>>,
    /// Inside `drive` (the polling thread sees `dirty` itself).
    driving: Cell<bool>,
    /// Open [`Caller`] guards.
    callers: Cell<u32>,
    /// A wake-up was deferred to this thread's next wait.
    owed: Cell<bool>,
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            waiter: Cell::new(None),
            driving: Cell::new(false),
            callers: Cell::new(0),
            owed: Cell::new(false),
        }
    };
}

impl spawns_core::Spawn for Runtime {
    fn spawn(&self, task: spawns_core::Task) {
        self.send(Box::into_pin(task.future));
    }
}

impl Runtime {
    /// Queues a task, isolated: a task that panics is logged and dropped, and every other task
    /// goes on (a session whose own task died stops renewing its lease, so its holds stop
    /// being believed).
    fn send(&self, task: BoxTask) {
        use futures::FutureExt;
        let isolated = std::panic::AssertUnwindSafe(task).catch_unwind().map(|r| {
            if r.is_err() {
                log::error!("a zklock I/O task panicked; the other tasks go on");
            }
        });
        self.incoming.lock().push(Box::pin(isolated));
        self.hub.wake_by_ref();
    }

    /// Asks one thread to poll the set: this thread if it is a waiting caller (no hop), else
    /// the latest waiting caller, else `zklock-io`.
    fn notify_driver(&self) {
        let me = THREAD.with(|t| t.waiter.get());
        {
            let waiters = self.waiters.lock();
            let mine = match me {
                Some(id) => waiters.iter().find(|(w, _)| *w == id),
                None => None,
            };
            let pick = mine.or(waiters.last());
            if let Some((_, waker)) = pick {
                waker.wake_by_ref();
                return;
            }
        }
        let mut kick = self.io_kick.lock();
        if !*kick {
            *kick = true;
            self.io_cv.notify_one();
        }
    }

    /// Polls the task set while it has been woken, unless another thread is polling it (that
    /// thread sees `dirty` and polls again).
    fn drive(&self) {
        let _scope = spawns_core::enter(runtime());
        let was = THREAD.with(|t| t.driving.replace(true));
        loop {
            let Some(mut tasks) = self.tasks.try_lock() else {
                break;
            };
            loop {
                self.dirty.store(false, Ordering::SeqCst);
                tasks.extend(std::mem::take(&mut *self.incoming.lock()));
                let mut cx = Context::from_waker(&self.hub);
                while let Poll::Ready(Some(())) = tasks.poll_next_unpin(&mut cx) {}
                if !self.dirty.load(Ordering::SeqCst) {
                    break;
                }
            }
            drop(tasks);
            // A wake-up between the last check and the unlock found the lock taken.
            if !self.dirty.load(Ordering::SeqCst) {
                break;
            }
        }
        THREAD.with(|t| t.driving.set(was));
    }
}

fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    let rt = RT.get_or_init(|| {
        let hub = Arc::new(Hub);
        Runtime {
            tasks: Mutex::new(FuturesUnordered::new()),
            incoming: Mutex::new(Vec::new()),
            dirty: AtomicBool::new(false),
            waiters: Mutex::new(Vec::new()),
            io_kick: Mutex::new(false),
            io_cv: Condvar::new(),
            hub: Waker::from(hub.clone()),
            _hub: hub,
        }
    });
    static IO: OnceLock<()> = OnceLock::new();
    IO.get_or_init(|| {
        std::thread::Builder::new()
            .name("zklock-io".into())
            .spawn(|| {
                let rt = runtime();
                loop {
                    {
                        let mut kick = rt.io_kick.lock();
                        while !*kick {
                            rt.io_cv.wait(&mut kick);
                        }
                        *kick = false;
                    }
                    rt.drive();
                }
            })
            .expect("spawn the zklock-io thread");
    });
    rt
}

/// Runs `f` with the runtime as the spawner of zookeeper-client's tasks (its `connect`
/// spawns the session task).
pub(crate) fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _scope = spawns_core::enter(runtime());
    f()
}

/// Spawns a background task.
pub(crate) fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    runtime().send(Box::pin(fut));
}

/// Says "this thread is about to wait for what it asks ZooKeeper", for as long as it lives:
/// a task woken by this thread's own request is then polled by this thread's next wait
/// instead of waking `zklock-io` (and if no wait comes, by `zklock-io` when the guard drops).
pub(crate) struct Caller(());

impl Caller {
    pub(crate) fn enter() -> Caller {
        THREAD.with(|t| t.callers.set(t.callers.get() + 1));
        Caller(())
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        let owed = THREAD.with(|t| {
            t.callers.set(t.callers.get() - 1);
            t.callers.get() == 0 && t.owed.replace(false)
        });
        let rt = runtime();
        if owed && rt.dirty.load(Ordering::SeqCst) {
            rt.notify_driver();
        }
    }
}

/// A cancel flag and the waker of the wait it cancels.
#[derive(Default)]
pub(crate) struct Signal {
    state: Mutex<SignalState>,
}

#[derive(Default)]
struct SignalState {
    cancelled: bool,
    waker: Option<Waker>,
}

impl Signal {
    pub(crate) fn new() -> Arc<Signal> {
        Arc::new(Signal::default())
    }

    pub(crate) fn cancel(&self) {
        let waker = {
            let mut st = self.state.lock();
            st.cancelled = true;
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.state.lock().cancelled
    }

    /// True if cancelled; else remembers `waker` for [`Signal::cancel`].
    fn check(&self, waker: &Waker) -> bool {
        let mut st = self.state.lock();
        if st.cancelled {
            return true;
        }
        if !st.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            st.waker = Some(waker.clone());
        }
        false
    }
}

/// Wakes waits at their deadlines, from one thread of its own: an async-io timer would
/// interrupt the reactor (and so wake another thread) on every wait; here a wait whose
/// deadline is later than the alarm thread's next wake-up costs a map insert and remove.
struct Alarms {
    due: Mutex<Due>,
    cv: Condvar,
}

#[derive(Default)]
struct Due {
    waits: std::collections::BTreeMap<(Instant, u64), Waker>,
    /// When the alarm thread wakes next by itself (None: only when notified).
    wakes_at: Option<Instant>,
}

fn alarms() -> &'static Alarms {
    static A: OnceLock<Alarms> = OnceLock::new();
    static THREAD: OnceLock<()> = OnceLock::new();
    let a = A.get_or_init(|| Alarms {
        due: Mutex::new(Due::default()),
        cv: Condvar::new(),
    });
    THREAD.get_or_init(|| {
        std::thread::Builder::new()
            .name("zklock-alarm".into())
            .spawn(|| {
                let a = alarms();
                let mut due = a.due.lock();
                loop {
                    let now = Instant::now();
                    let later = due.waits.split_off(&(now, u64::MAX));
                    let fired = std::mem::replace(&mut due.waits, later);
                    if !fired.is_empty() {
                        parking_lot::MutexGuard::unlocked(&mut due, || {
                            fired.into_values().for_each(Waker::wake)
                        });
                        continue;
                    }
                    // Sleep until the earliest deadline; a wait that ends before then takes
                    // its entry away, and the thread then wakes once for nothing.
                    due.wakes_at = due.waits.keys().next().map(|k| k.0);
                    match due.wakes_at {
                        Some(at) => {
                            a.cv.wait_until(&mut due, at);
                        }
                        None => a.cv.wait(&mut due),
                    }
                }
            })
            .expect("spawn the zklock-alarm thread");
    });
    a
}

/// A registered deadline; removed on drop.
struct Alarm {
    key: (Instant, u64),
}

impl Alarm {
    fn set(at: Instant, waker: &Waker) -> Alarm {
        static IDS: AtomicU64 = AtomicU64::new(1);
        let key = (at, IDS.fetch_add(1, Ordering::Relaxed));
        let a = alarms();
        let mut due = a.due.lock();
        due.waits.insert(key, waker.clone());
        // Waiting deadlines mostly grow: the thread is woken only for an earlier one.
        if due.wakes_at.map_or(true, |w| at < w) {
            due.wakes_at = Some(at);
            a.cv.notify_one();
        }
        Alarm { key }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        alarms().due.lock().waits.remove(&self.key);
    }
}

/// How a blocking wait ended.
pub(crate) enum Outcome<T> {
    Ready(T),
    TimedOut,
    Cancelled,
}

/// This thread, registered as a waiting caller until dropped; on leaving, a wake-up that
/// came too late for it is handed to another driver.
struct Waiting {
    id: u64,
}

impl Waiting {
    fn new(waker: &Waker) -> Waiting {
        static IDS: AtomicU64 = AtomicU64::new(1);
        let id = IDS.fetch_add(1, Ordering::Relaxed);
        runtime().waiters.lock().push((id, waker.clone()));
        THREAD.with(|t| {
            t.waiter.set(Some(id));
            // This wait polls the set at once: what was deferred to it is paid.
            t.owed.set(false);
        });
        Waiting { id }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let rt = runtime();
        rt.waiters.lock().retain(|(w, _)| *w != self.id);
        THREAD.with(|t| t.waiter.set(None));
        if rt.dirty.load(Ordering::SeqCst) {
            rt.notify_driver();
        }
    }
}

/// Blocks on `fut` until it is ready, `deadline` passes, or `signal` is cancelled, polling
/// the session tasks on this thread meanwhile (see the module's docs).
pub(crate) fn block_on<F: Future>(
    fut: F,
    deadline: Option<Instant>,
    signal: Option<&Signal>,
) -> Outcome<F::Output> {
    let rt = runtime();
    let mut fut = std::pin::pin!(fut);
    let mut alarm: Option<Alarm> = None;
    let mut waiting: Option<Waiting> = None;
    let nested = THREAD.with(|t| t.waiter.get().is_some() || t.driving.get());
    let outcome = async_io::block_on(futures::future::poll_fn(|cx| {
        if waiting.is_none() && !nested {
            waiting = Some(Waiting::new(cx.waker()));
        }
        if signal.is_some_and(|s| s.check(cx.waker())) {
            return Poll::Ready(Outcome::Cancelled);
        }
        rt.drive();
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Outcome::Ready(v));
        }
        if let Some(d) = deadline {
            if Instant::now() >= d {
                return Poll::Ready(Outcome::TimedOut);
            }
            if alarm.is_none() {
                alarm = Some(Alarm::set(d, cx.waker()));
            }
        }
        Poll::Pending
    }));
    drop(waiting);
    outcome
}

/// Blocks on a ZooKeeper call's reply future until `deadline`; never cancellable.
pub(crate) fn call<F: Future>(fut: F, deadline: Instant) -> Option<F::Output> {
    match block_on(fut, Some(deadline), None) {
        Outcome::Ready(v) => Some(v),
        _ => None,
    }
}

/// Sleeps for `d`, polling the session tasks meanwhile like any wait.
pub(crate) fn sleep(d: std::time::Duration) {
    let until = Instant::now() + d;
    let _ = block_on(futures::future::pending::<()>(), Some(until), None);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// These tests watch which thread runs a task: one at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn deadline_and_cancel() {
        let _serial = SERIAL.lock();
        let s = Signal::new();
        let t = Instant::now();
        assert!(matches!(
            block_on(
                futures::future::pending::<()>(),
                Some(t + Duration::from_millis(50)),
                Some(&s),
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
            block_on(futures::future::pending::<()>(), None, Some(&s)),
            Outcome::Cancelled
        ));
        h.join().unwrap();
    }

    #[test]
    fn a_panicking_task_does_not_stop_the_other_tasks() {
        let _serial = SERIAL.lock();
        spawn(async { panic!("a task's bug") });
        let (tx, rx) = futures::channel::oneshot::channel::<u32>();
        spawn(async move {
            let _ = tx.send(1);
        });
        let got = call(rx, Instant::now() + Duration::from_secs(5));
        assert_eq!(
            got.map(|r| r.ok()),
            Some(Some(1)),
            "the task set died with the task"
        );
    }

    #[test]
    fn wakes_on_ready_from_other_thread() {
        let _serial = SERIAL.lock();
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

    /// Callers come and go while tasks are woken from other threads: every wake-up finds a
    /// thread to poll the task (a lost one would leave a reply unread until the deadline).
    #[test]
    fn no_wake_up_is_lost_while_callers_come_and_go() {
        let _serial = SERIAL.lock();
        let threads: Vec<_> = (0..6)
            .map(|i| {
                std::thread::spawn(move || {
                    for n in 0..1500u32 {
                        let (go_tx, go_rx) = futures::channel::oneshot::channel::<u32>();
                        let (done_tx, done_rx) = futures::channel::oneshot::channel::<u32>();
                        spawn(async move {
                            if let Ok(v) = go_rx.await {
                                let _ = done_tx.send(v + 1);
                            }
                        });
                        // Half the time the task is woken from another thread, half from
                        // this one before it waits.
                        if (n + i) % 2 == 0 {
                            std::thread::spawn(move || {
                                let _ = go_tx.send(n);
                            });
                        } else {
                            let _ = go_tx.send(n);
                        }
                        let got = call(done_rx, Instant::now() + Duration::from_secs(10));
                        assert_eq!(
                            got.map(|r| r.ok()),
                            Some(Some(n + 1)),
                            "thread {i} round {n}"
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    /// A task woken while no caller waits is run by `zklock-io`; a task woken while a caller
    /// waits is run by that caller.
    #[test]
    fn background_tasks_run_with_or_without_a_waiting_caller() {
        let _serial = SERIAL.lock();
        for caller_waits in [false, true] {
            let (go_tx, go_rx) = futures::channel::oneshot::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<String>();
            spawn(async move {
                let _ = go_rx.await;
                let name = std::thread::current().name().unwrap_or("?").to_string();
                let _ = done_tx.send(name);
            });
            let me = std::thread::current().name().unwrap_or("?").to_string();
            if caller_waits {
                let (tx, rx) = futures::channel::oneshot::channel::<()>();
                let h = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = go_tx.send(());
                    std::thread::sleep(Duration::from_millis(20));
                    let _ = tx.send(());
                });
                let _ = call(rx, Instant::now() + Duration::from_secs(5));
                h.join().unwrap();
                let ran_on = done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
                assert_eq!(ran_on, me, "the waiting caller did not run the task");
            } else {
                std::thread::spawn(move || {
                    let _ = go_tx.send(());
                })
                .join()
                .unwrap();
                let ran_on = done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
                assert_eq!(ran_on, "zklock-io");
            }
        }
    }
}

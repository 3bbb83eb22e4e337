//! The blocking facade's engine: a caller-runs executor for zookeeper-client's session tasks.
//!
//! zookeeper-client runs each session as one task (writing requests, reading replies, pings,
//! watches, reconnects). Those tasks live here in one shared set that any thread may poll:
//!
//! - a caller blocked on a reply polls the set itself, so its request is written and its reply
//!   read on its own thread;
//! - it sleeps (`ppoll`) on its own eventfd *and* on its session's socket, so the reply's
//!   arrival wakes the caller itself, which then polls the session's task: no hop through
//!   another thread. async-io's own thread still runs the poller and wakes the task as well;
//!   that second wake-up finds the reply already read. The crate does not show its socket:
//!   [`SessionIo`] finds it in async-io's poller (and, where it cannot tell, the caller is
//!   woken by whoever reads its reply, one hop later);
//! - a woken task of a session is polled by a caller waiting on that session, else by the
//!   `zklock-io` thread (pings, watches, reconnects, background deletes), so that no caller
//!   has to run for another session's I/O to go on;
//! - one `dirty` flag for the whole set hands the work over without a lost wake-up: whoever
//!   holds the set polls it again while `dirty` was set during its poll, checks it once more
//!   after letting go, and a caller that leaves hands a pending wake-up on to another caller
//!   of its session or to `zklock-io`.
//!
//! Requests are queued on the caller's thread when the crate's method is called (the crate
//! serialises them at call time); a [`Caller`] guard says "this thread will wait for it
//! soon", so that queueing does not wake `zklock-io` for nothing.
//!
//! **fork().** The set belongs to the process that made it. In a forked child it is inert: no
//! task is polled, so nothing inherited is ever written to the parent's sockets (a request
//! queued there, a session's close when its last handle goes), no wake-up takes a lock (a
//! thread of the parent's may have held it at the fork) and nothing waits for `zklock-io`,
//! which does not exist in the child. async-io's reactor (its thread, its epoll set, shared
//! with the parent) does not survive a fork either, so a child cannot start sessions of its
//! own once the parent has started one ([`made_in_parent`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::sys::EventFd;
use crate::wait::{Outcome, Signal};

type BoxTask = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// The shared task set and who may be asked to poll it.
struct Runtime {
    /// The tasks by id; whoever holds this lock polls them.
    tasks: Mutex<HashMap<u64, Task>>,
    /// Tasks spawned and not yet in `tasks` (spawning never takes the `tasks` lock).
    incoming: Mutex<Vec<Task>>,
    /// Ids of woken tasks.
    ready: Mutex<Vec<u64>>,
    /// A task was woken (or spawned) and nobody has polled the set since.
    dirty: AtomicBool,
    /// Wakes `zklock-io` when no caller can.
    io_kick: Mutex<bool>,
    io_cv: Condvar,
    /// The process that made the set; in any other (a forked child) it is inert.
    pid: u32,
}

struct Task {
    fut: BoxTask,
    wake: Arc<TaskWaker>,
}

/// One task's waker: queues the task and wakes a driver.
struct TaskWaker {
    id: u64,
    queued: AtomicBool,
    /// The session the task serves (its wake-ups go to that session's waiting callers).
    owner: Option<Arc<Group>>,
}

/// A session's tasks and the callers waiting on it. A task of the session is polled by one of
/// those callers when it is woken, or by `zklock-io` when none waits: a caller never has to
/// run for another session's I/O to go on.
#[derive(Default)]
pub(crate) struct Group {
    tasks: Mutex<Vec<Waker>>,
    waiters: Mutex<Vec<(u64, Waker)>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let rt = runtime();
        if rt.forked() {
            // A task of the parent's, in a forked child: never polled here.
            return;
        }
        if self.queued.swap(true, Ordering::SeqCst) {
            // Still queued: the wake-up that queued it asked for a driver.
            return;
        }
        rt.ready.lock().push(self.id);
        rt.woken(self.owner.as_deref());
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
    /// The session whose connect is running on this thread (see [`SessionIo::connect`]).
    capture: RefCell<Option<Arc<Group>>>,
}

thread_local! {
    static THREAD: ThreadState = const {
        ThreadState {
            waiter: Cell::new(None),
            driving: Cell::new(false),
            callers: Cell::new(0),
            capture: RefCell::new(None),
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
        if self.forked() {
            // Work of a session made before the fork: never done in the child (dropping the
            // future only frees memory: requests go out when a task polls them).
            log::debug!("zklock: a forked child does not run its parent's I/O");
            return;
        }
        static IDS: AtomicU64 = AtomicU64::new(1);
        let isolated = std::panic::AssertUnwindSafe(task).catch_unwind().map(|r| {
            if r.is_err() {
                log::error!("a zklock I/O task panicked; the other tasks go on");
            }
        });
        // Only what the connect itself spawns, not what tasks it polls meanwhile spawn.
        let owner = THREAD.with(|t| {
            (!t.driving.get())
                .then(|| t.capture.borrow().clone())
                .flatten()
        });
        let wake = Arc::new(TaskWaker {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            queued: AtomicBool::new(true),
            owner: owner.clone(),
        });
        if let Some(g) = &owner {
            g.tasks.lock().push(Waker::from(wake.clone()));
        }
        self.incoming.lock().push(Task {
            fut: Box::pin(isolated),
            wake,
        });
        self.woken(owner.as_deref());
    }

    /// Whether this is a forked child of the process that made the set (where it is inert).
    fn forked(&self) -> bool {
        crate::sys::process_id() != self.pid
    }

    /// A task (of `owner`'s session) was woken or spawned: make sure some thread polls it.
    fn woken(&self, owner: Option<&Group>) {
        self.dirty.store(true, Ordering::SeqCst);
        let deferred = THREAD.with(|t| {
            // The polling loop on this thread sees `dirty` and polls again; a thread in a
            // `Caller` guard polls at its next wait (or hands over when the guard ends).
            t.driving.get() || (t.callers.get() > 0 && t.waiter.get().is_none())
        });
        if !deferred {
            self.notify_driver(owner);
        }
    }

    /// Asks one thread to poll the set: a caller waiting on the task's session (this thread if
    /// it is one: no hop; else the latest), else `zklock-io`.
    fn notify_driver(&self, owner: Option<&Group>) {
        if self.forked() {
            return;
        }
        if let Some(g) = owner {
            let me = THREAD.with(|t| t.waiter.get());
            let waiters = g.waiters.lock();
            let mine = me.and_then(|id| waiters.iter().find(|(w, _)| *w == id));
            if let Some((_, waker)) = mine.or(waiters.last()) {
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

    /// Polls the woken tasks while there are any, unless another thread is polling the set
    /// (that thread sees `dirty` and polls again).
    /// Returns false if another thread held the set the whole time.
    fn drive(&self) -> bool {
        if self.forked() {
            // The parent's tasks (its sessions' I/O) are never polled in a forked child.
            return false;
        }
        let _scope = spawns_core::enter(runtime());
        let was = THREAD.with(|t| t.driving.replace(true));
        let mut polled = false;
        loop {
            let Some(mut tasks) = self.tasks.try_lock() else {
                break;
            };
            polled = true;
            // What a session's task reads of its connects is kept (`grants`): one tap for
            // the whole round of polls.
            crate::grants::tapped(|| loop {
                self.dirty.store(false, Ordering::SeqCst);
                let mut batch = std::mem::take(&mut *self.ready.lock());
                let incoming = std::mem::take(&mut *self.incoming.lock());
                for task in incoming {
                    batch.push(task.wake.id);
                    tasks.insert(task.wake.id, task);
                }
                for id in batch {
                    // A stale id (a task that has finished) is skipped.
                    let Some(task) = tasks.get_mut(&id) else {
                        continue;
                    };
                    // Cleared before the poll: a wake-up during it queues the task again.
                    task.wake.queued.store(false, Ordering::SeqCst);
                    let waker = Waker::from(task.wake.clone());
                    let mut cx = Context::from_waker(&waker);
                    if task.fut.as_mut().poll(&mut cx).is_ready() {
                        tasks.remove(&id);
                    }
                }
                if !self.dirty.load(Ordering::SeqCst) {
                    break;
                }
            });
            drop(tasks);
            // A wake-up between the last check and the unlock found the lock taken.
            if !self.dirty.load(Ordering::SeqCst) {
                break;
            }
        }
        THREAD.with(|t| t.driving.set(was));
        polled
    }
}

static RT: OnceLock<Runtime> = OnceLock::new();

fn runtime() -> &'static Runtime {
    let rt = RT.get_or_init(|| Runtime {
        tasks: Mutex::new(HashMap::new()),
        incoming: Mutex::new(Vec::new()),
        ready: Mutex::new(Vec::new()),
        dirty: AtomicBool::new(false),
        io_kick: Mutex::new(false),
        io_cv: Condvar::new(),
        pid: crate::sys::process_id(),
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

/// The process that started the executor, if it is not this one: this is a forked child of a
/// process that had sessions, where the executor is inert and no session can be started.
pub(crate) fn made_in_parent() -> Option<u32> {
    RT.get()
        .map(|rt| rt.pid)
        .filter(|&p| p != crate::sys::process_id())
}

/// Runs `f` with the runtime as the spawner of zookeeper-client's tasks (its `connect`
/// spawns the session task).
pub(crate) fn enter<R>(f: impl FnOnce() -> R) -> R {
    let _scope = spawns_core::enter(runtime());
    f()
}

/// Runs `f` with the tasks it spawns on this thread (not those of the tasks it polls) made
/// members of `group`.
fn capture_spawns<R>(group: &Arc<Group>, f: impl FnOnce() -> R) -> R {
    let outer = THREAD.with(|t| t.capture.replace(Some(group.clone())));
    let r = f();
    THREAD.with(|t| t.capture.replace(outer));
    r
}

/// Spawns a background task.
pub(crate) fn spawn(fut: impl Future<Output = ()> + Send + 'static) {
    runtime().send(Box::pin(fut));
}

/// Says "this thread is about to wait for what it asks ZooKeeper", for as long as it lives:
/// a task woken meanwhile (by this thread's own request, or by a reply while no caller waits)
/// is polled by this thread's next wait instead of waking `zklock-io`, and a wake-up left over
/// when the guard ends is polled then.
pub(crate) struct Caller(());

impl Caller {
    pub(crate) fn enter() -> Caller {
        THREAD.with(|t| t.callers.set(t.callers.get() + 1));
        Caller(())
    }
}

impl Drop for Caller {
    fn drop(&mut self) {
        let last = THREAD.with(|t| {
            t.callers.set(t.callers.get() - 1);
            t.callers.get() == 0
        });
        if last {
            let rt = runtime();
            if rt.dirty.load(Ordering::SeqCst) {
                // What was left to this thread (often async-io's late wake-up for a reply this
                // thread has read already) is polled here, not handed to `zklock-io`.
                rt.drive();
            }
        }
    }
}

/// This thread, registered as a caller waiting on `group`'s session until dropped; on leaving,
/// a wake-up that came too late for it is handed to another driver.
struct Waiting<'a> {
    id: u64,
    group: Option<&'a Group>,
}

impl<'a> Waiting<'a> {
    fn new(waker: &Waker, group: Option<&'a Group>) -> Waiting<'a> {
        static IDS: AtomicU64 = AtomicU64::new(1);
        let id = IDS.fetch_add(1, Ordering::Relaxed);
        if let Some(g) = group {
            g.waiters.lock().push((id, waker.clone()));
        }
        THREAD.with(|t| t.waiter.set(Some(id)));
        Waiting { id, group }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(g) = self.group {
            g.waiters.lock().retain(|(w, _)| *w != self.id);
        }
        THREAD.with(|t| t.waiter.set(None));
        let rt = runtime();
        if rt.dirty.load(Ordering::SeqCst) {
            rt.notify_driver(self.group);
        }
    }
}

/// A duplicate of async-io's epoll descriptor, found once (None where it cannot be: callers
/// then learn of replies from whoever polls the tasks).
fn reactor_fd() -> Option<&'static OwnedFd> {
    static FD: OnceLock<Option<OwnedFd>> = OnceLock::new();
    FD.get_or_init(|| {
        use std::os::fd::AsRawFd;
        // A probe source: registering it adds its descriptor to async-io's epoll set.
        let (a, _b) = std::os::unix::net::UnixDatagram::pair().ok()?;
        let probe = async_io::Async::new(a).ok()?;
        let found = crate::sys::epoll_watching(probe.as_raw_fd());
        if found.is_none() {
            log::debug!("async-io's poller not found: callers do not watch their sockets");
        }
        found
    })
    .as_ref()
}

/// Sockets to ZooKeeper claimed by a session (see [`SessionIo`]).
static CLAIMED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// The most descriptors async-io may watch for us to look for a session's socket among them.
const SOCKET_SEARCH_LIMIT: usize = 256;

fn server_sockets(servers: &[SocketAddr]) -> Option<Vec<i32>> {
    crate::sys::server_sockets_in(reactor_fd()?.as_fd(), servers, SOCKET_SEARCH_LIMIT)
}

/// What a caller waiting on one session wakes itself with: the wakers of the session's tasks
/// and the session's socket, when it is known. zookeeper-client does not show its socket: it
/// is the one socket to a server that appeared in async-io's poller during the connect (or,
/// after a reconnect, the one socket to a server that no session claims); when that is not
/// clear (sessions connecting at the same time), it stays unknown and the session's callers
/// learn of replies from whoever polls the tasks, one hop later.
pub(crate) struct SessionIo {
    group: Arc<Group>,
    socket: std::sync::atomic::AtomicI32,
    /// The one caller that sleeps on the socket (its waiter id; 0: none): a reply wakes one
    /// thread, not every thread waiting on the session.
    watcher: AtomicU64,
}

impl SessionIo {
    /// Runs `connect` (which spawns the session's tasks; it waits with the `SessionIo` it is
    /// given) and finds what it made.
    pub(crate) fn connect<R>(
        servers: &[SocketAddr],
        connect: impl FnOnce(&SessionIo) -> R,
    ) -> (R, SessionIo) {
        let before = server_sockets(servers);
        let io = SessionIo {
            group: Arc::default(),
            socket: std::sync::atomic::AtomicI32::new(-1),
            watcher: AtomicU64::new(0),
        };
        let r = capture_spawns(&io.group, || connect(&io));
        if let (Some(before), Some(after)) = (before, server_sockets(servers)) {
            io.claim(after.into_iter().filter(|s| !before.contains(s)).collect());
        }
        (r, io)
    }

    /// The session reconnected (on a new socket).
    pub(crate) fn reconnected(&self, servers: &[SocketAddr]) {
        self.disconnected();
        if let Some(all) = server_sockets(servers) {
            self.claim(all);
        }
    }

    /// Sets TCP_NODELAY on the session's socket; where it is not known, on every socket to
    /// `servers` (a scan of the process's descriptors).
    pub(crate) fn set_nodelay(&self, servers: &[SocketAddr]) {
        match self.socket() {
            Some(fd) => {
                crate::sys::set_nodelay(fd);
            }
            None => {
                crate::sys::set_nodelay_to(servers);
            }
        }
    }

    /// The session lost its socket.
    pub(crate) fn disconnected(&self) {
        let old = self.socket.swap(-1, Ordering::SeqCst);
        if old >= 0 {
            CLAIMED.lock().retain(|&s| s != old);
        }
    }

    /// Takes the one candidate that no other session claims, if there is exactly one.
    fn claim(&self, candidates: Vec<i32>) {
        let mut claimed = CLAIMED.lock();
        let free: Vec<i32> = candidates
            .into_iter()
            .filter(|s| !claimed.contains(s))
            .collect();
        if let [one] = free[..] {
            claimed.push(one);
            self.socket.store(one, Ordering::SeqCst);
        } else {
            log::debug!(
                "zklock: which socket a session uses is not clear ({} candidates)",
                free.len()
            );
        }
    }

    pub(crate) fn socket(&self) -> Option<i32> {
        Some(self.socket.load(Ordering::SeqCst)).filter(|&s| s >= 0)
    }

    /// The socket, if waiter `id` is (or now becomes) the one that sleeps on it.
    fn watch(&self, id: u64) -> Option<i32> {
        let me = match self
            .watcher
            .compare_exchange(0, id, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => true,
            Err(w) => w == id,
        };
        if me {
            self.socket()
        } else {
            None
        }
    }

    fn unwatch(&self, id: u64) {
        let _ = self
            .watcher
            .compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

impl Drop for SessionIo {
    fn drop(&mut self) {
        if RT.get().is_some_and(Runtime::forked) {
            // A forked child frees its copy: the claims are the parent's (and their lock may
            // have been held by a thread of the parent's at the fork).
            return;
        }
        self.disconnected();
    }
}

/// A waiting caller's waker: wakes its `ppoll` through an eventfd, and costs no system call
/// when the caller is not asleep.
struct Parked {
    ev: EventFd,
    state: AtomicU8,
}

const NOTIFIED: u8 = 1;
const SLEEPING: u8 = 2;

impl Wake for Parked {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.state.fetch_or(NOTIFIED, Ordering::SeqCst) == SLEEPING {
            self.ev.signal();
        }
    }
}

thread_local! {
    static PARKED: OnceLock<Option<Arc<Parked>>> = const { OnceLock::new() };
}

fn parked() -> Option<Arc<Parked>> {
    PARKED.with(|p| {
        p.get_or_init(|| {
            Some(Arc::new(Parked {
                ev: EventFd::new()?,
                state: AtomicU8::new(0),
            }))
        })
        .clone()
    })
}

/// After a wake-up by the socket that brought no reply, how long the socket is left out of
/// the caller's sleep (doubling on each such wake-up in a row, up to `NOT_OURS_MAX`).
const NOT_OURS_BACKOFF: Duration = Duration::from_micros(200);
const NOT_OURS_MAX: Duration = Duration::from_millis(20);

/// Blocks on `fut` until it is ready, `deadline` passes, or `signal` is cancelled, polling
/// the session tasks on this thread meanwhile (see the module's docs). `io`: the session the
/// wait is for, whose socket the caller watches (see [`SessionIo`]).
pub(crate) fn block_on<F: Future>(
    fut: F,
    deadline: Option<Instant>,
    signal: Option<&Signal>,
    io: Option<&SessionIo>,
) -> Outcome<F::Output> {
    let nested = THREAD.with(|t| t.waiter.get().is_some() || t.driving.get());
    match parked() {
        Some(p) if !nested => block_on_parked(fut, deadline, signal, io, p),
        _ => block_on_async_io(fut, deadline, signal, io, nested),
    }
}

fn block_on_parked<F: Future>(
    fut: F,
    deadline: Option<Instant>,
    signal: Option<&Signal>,
    io: Option<&SessionIo>,
    me: Arc<Parked>,
) -> Outcome<F::Output> {
    let rt = runtime();
    let waker = Waker::from(me.clone());
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    let waiting = Waiting::new(&waker, io.map(|io| &*io.group));
    // Only a wait for a reply sleeps on the socket, and one per session at a time: waits for
    // watches (one thread per waiting acquire, up to thousands on one session) are woken by
    // whoever reads their event.
    let io_watch = io.filter(|_| signal.is_none());
    let _unwatch = CallOnDrop(|| {
        if let Some(io) = io_watch {
            io.unwatch(waiting.id)
        }
    });
    // After the socket turned readable without our reply (a watch event, or data its task
    // does not read yet: it may stay readable), it is left out of the next sleeps for a while
    // that doubles each time, up to `NOT_OURS_MAX`: a caller never spins on it.
    let mut left_out_until: Option<Instant> = None;
    let mut left_out_for = Duration::ZERO;
    let mut socket_woke_us = false;
    loop {
        me.state.fetch_and(!NOTIFIED, Ordering::SeqCst);
        if signal.is_some_and(|s| s.check(&waker)) {
            return Outcome::Cancelled;
        }
        // When another thread holds the task set, it polls what is ready (our session's task
        // too) and our reply's arrival wakes us through our waker: no need to watch the socket.
        let drove = rt.drive();
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Outcome::Ready(v);
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Outcome::TimedOut;
        }
        if std::mem::take(&mut socket_woke_us) {
            left_out_for = (left_out_for * 2).clamp(NOT_OURS_BACKOFF, NOT_OURS_MAX);
            left_out_until = Some(now + left_out_for);
        }
        if me.state.fetch_or(SLEEPING, Ordering::SeqCst) & NOTIFIED != 0 {
            me.state.fetch_and(!SLEEPING, Ordering::SeqCst);
            continue;
        }
        let left_out = left_out_until.filter(|&t| now < t);
        let socket = io_watch
            .filter(|_| drove && left_out.is_none())
            .and_then(|io| io.watch(waiting.id));
        let mut timeout = deadline.map(|d| d - now);
        if let Some(t) = left_out {
            timeout = Some(timeout.map_or(t - now, |d| d.min(t - now)));
        }
        let (readable, signalled) = crate::sys::wait_readable(socket, &me.ev, timeout);
        me.state.fetch_and(!SLEEPING, Ordering::SeqCst);
        #[cfg(test)]
        tests::count_wake(readable, signalled);
        if signalled {
            left_out_for = Duration::ZERO;
        }
        if readable {
            // Maybe our reply: the session's task reads it on this thread, now.
            if let Some(io) = io {
                io.group.tasks.lock().iter().for_each(Waker::wake_by_ref);
            }
            socket_woke_us = true;
        }
    }
}

/// Runs a closure when dropped.
struct CallOnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for CallOnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

fn block_on_async_io<F: Future>(
    fut: F,
    deadline: Option<Instant>,
    signal: Option<&Signal>,
    io: Option<&SessionIo>,
    nested: bool,
) -> Outcome<F::Output> {
    let rt = runtime();
    let mut fut = std::pin::pin!(fut);
    let mut timer: Option<async_io::Timer> = None;
    let mut waiting: Option<Waiting> = None;
    let outcome = async_io::block_on(futures::future::poll_fn(|cx| {
        if waiting.is_none() && !nested {
            waiting = Some(Waiting::new(cx.waker(), io.map(|io| &*io.group)));
        }
        if signal.is_some_and(|s| s.check(cx.waker())) {
            return Poll::Ready(Outcome::Cancelled);
        }
        rt.drive();
        if let Poll::Ready(v) = fut.as_mut().poll(cx) {
            return Poll::Ready(Outcome::Ready(v));
        }
        if let Some(d) = deadline {
            let t = timer.get_or_insert_with(|| async_io::Timer::at(d));
            if Pin::new(t).poll(cx).is_ready() {
                return Poll::Ready(Outcome::TimedOut);
            }
        }
        Poll::Pending
    }));
    drop(waiting);
    outcome
}

/// Sleeps for `d`, polling the session tasks meanwhile like any wait.
pub(crate) fn sleep(d: Duration) {
    let until = Instant::now() + d;
    let _ = block_on(futures::future::pending::<()>(), Some(until), None, None);
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    /// These tests watch which thread runs a task: one at a time, and none beside a unit test
    /// that drives a real session (its waits run tasks too).
    pub(crate) static SERIAL: Mutex<()> = Mutex::new(());

    /// Blocks on `fut` until `deadline`, never cancellable (as a session's call waits).
    fn call<F: Future>(fut: F, deadline: Instant, io: Option<&SessionIo>) -> Option<F::Output> {
        match block_on(fut, Some(deadline), None, io) {
            Outcome::Ready(v) => Some(v),
            _ => None,
        }
    }

    /// Wake-ups of waiting callers: (with their socket readable, by a signal alone).
    static WAKES: Mutex<(u64, u64)> = Mutex::new((0, 0));

    pub(super) fn count_wake(readable: bool, signalled: bool) {
        let mut w = WAKES.lock();
        if readable {
            w.0 += 1;
        } else if signalled {
            w.1 += 1;
        }
    }

    /// A reply arriving on a task's socket wakes the waiting caller through the poller itself
    /// (no wake-up from another thread), and the caller reads it: round trips over a socket
    /// pair served by an echo thread, as a session's requests are served by the server.
    #[test]
    fn a_reply_wakes_its_caller_through_its_socket_not_another_thread() {
        use futures::{AsyncReadExt, AsyncWriteExt};
        let _serial = SERIAL.lock();
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let ours_fd = std::os::fd::AsRawFd::as_raw_fd(&ours);
        let echo = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let mut theirs = theirs;
            let mut b = [0u8; 1];
            while theirs.read_exact(&mut b).is_ok() {
                std::thread::sleep(Duration::from_micros(300));
                if theirs.write_all(&b).is_err() {
                    break;
                }
            }
        });
        // The "session task": sends each request it is given, reads each reply, hands it back.
        type Reply = futures::channel::oneshot::Sender<(u8, String)>;
        let (req_tx, mut req_rx) = futures::channel::mpsc::unbounded::<(u8, Reply)>();
        let io = SessionIo {
            group: Arc::default(),
            socket: std::sync::atomic::AtomicI32::new(ours_fd),
            watcher: AtomicU64::new(0),
        };
        capture_spawns(&io.group, || {
            spawn(async move {
                use futures::StreamExt;
                let mut sock = async_io::Async::new(ours).unwrap();
                while let Some((b, reply)) = req_rx.next().await {
                    sock.write_all(&[b]).await.unwrap();
                    let mut got = [0u8; 1];
                    sock.read_exact(&mut got).await.unwrap();
                    let on = std::thread::current().name().unwrap_or("?").to_string();
                    let _ = reply.send((got[0], on));
                }
            })
        });
        assert_eq!(io.group.tasks.lock().len(), 1);
        let me = std::thread::current().name().unwrap_or("?").to_string();
        *WAKES.lock() = (0, 0);
        let mut read_here = 0;
        for i in 0..200u32 {
            let _caller = Caller::enter();
            let (tx, rx) = futures::channel::oneshot::channel();
            req_tx.unbounded_send(((i % 256) as u8, tx)).unwrap();
            let (got, on) = call(rx, Instant::now() + Duration::from_secs(5), Some(&io))
                .expect("no reply within 5 s")
                .unwrap();
            assert_eq!(got, (i % 256) as u8);
            read_here += usize::from(on == me);
        }
        drop(req_tx);
        echo.join().unwrap();
        let (by_poller, by_signal) = *WAKES.lock();

        assert!(
            read_here >= 190,
            "only {read_here} of 200 replies read on the caller's thread"
        );
        assert!(
            by_poller >= 150,
            "the socket woke the caller {by_poller} times, another thread {by_signal} times"
        );
    }

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
                None,
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
            block_on(futures::future::pending::<()>(), None, Some(&s), None),
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
        let got = call(rx, Instant::now() + Duration::from_secs(5), None);
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
            call(rx, Instant::now() + Duration::from_secs(5), None)
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
                        let got = call(done_rx, Instant::now() + Duration::from_secs(10), None);
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

    /// A session's task woken while a caller waits on that session is run by that caller; a
    /// task of no session, or woken while no caller waits, is run by `zklock-io`.
    #[test]
    fn a_sessions_tasks_run_on_its_waiting_caller_the_rest_on_zklock_io() {
        let _serial = SERIAL.lock();
        let me = std::thread::current().name().unwrap_or("?").to_string();
        let io = SessionIo {
            group: Arc::default(),
            socket: std::sync::atomic::AtomicI32::new(-1),
            watcher: AtomicU64::new(0),
        };
        for (of_session, caller_waits, expected) in [
            (true, true, me.as_str()),
            (true, false, "zklock-io"),
            (false, true, "zklock-io"),
        ] {
            let (go_tx, go_rx) = futures::channel::oneshot::channel::<()>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<String>();
            let task = async move {
                let _ = go_rx.await;
                let name = std::thread::current().name().unwrap_or("?").to_string();
                let _ = done_tx.send(name);
            };
            if of_session {
                capture_spawns(&io.group, || spawn(task));
            } else {
                spawn(task);
            }
            let waker = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                let _ = go_tx.send(());
            });
            if caller_waits {
                let _ = block_on(
                    futures::future::pending::<()>(),
                    Some(Instant::now() + Duration::from_millis(100)),
                    None,
                    Some(&io),
                );
            }
            waker.join().unwrap();
            let ran_on = done_rx.recv_timeout(Duration::from_secs(5)).unwrap();
            assert_eq!(
                ran_on, expected,
                "task of a session: {of_session}, caller waiting: {caller_waits}"
            );
        }
    }
}

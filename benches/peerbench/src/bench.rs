//! The lock adapters: the recipe under test (`BENCH_RECIPE`), its sessions, and how a workload
//! takes and gives back a lock.

use super::*;

/// The harness's view of one lock handle of one session.
pub(crate) trait Lock: Send + Sync {
    fn acquire(&self) -> zklock::Result<()>;
    fn release(&self) -> zklock::Result<()>;
    fn cancel(&self);
}

/// Every recipe through the library's own `Lockable` (a `Semaphore` takes one lease per call).
impl<T: zklock::Lockable + Send + Sync> Lock for T {
    fn acquire(&self) -> zklock::Result<()> {
        zklock::Lockable::acquire(self, zklock::Deadline::Forever)?
            .map(drop)
            .ok_or(zklock::Error::Timeout)
    }
    fn release(&self) -> zklock::Result<()> {
        zklock::Lockable::release(self)
    }
    fn cancel(&self) {
        zklock::Lockable::cancel(self)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Recipe {
    /// `Mutex` (W5: `ReadWriteLock`).
    Lock,
    /// `SemaphoreMutex` (Curator's `InterProcessSemaphoreMutex`).
    Semaphore,
    /// `Semaphore` with one lease (kazoo's `Semaphore(max_leases=1)`).
    Lease,
    /// `SimpleLock`.
    Simple,
    /// `Mutex` through the C ABI (W1–W3).
    Ffi,
    /// `ReadWriteLock`: its write half for W1–W4 and W6, both halves for W5.
    Rw,
}

impl Recipe {
    pub(crate) fn parse(s: &str) -> Option<Recipe> {
        Some(match s {
            "" | "lock" | "mutex" => Recipe::Lock,
            "semaphore" => Recipe::Semaphore,
            "lease" => Recipe::Lease,
            "simple" => Recipe::Simple,
            "ffi" => Recipe::Ffi,
            "rw" => Recipe::Rw,
            _ => return None,
        })
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Recipe::Lock => "lock",
            Recipe::Semaphore => "semaphore",
            Recipe::Lease => "lease",
            Recipe::Simple => "simple",
            Recipe::Ffi => "ffi",
            Recipe::Rw => "rw",
        }
    }
}

/// One session of the benchmark: the Rust client, or a C-ABI client for `ffi`.
pub(crate) enum Session {
    Rust(Client),
    Ffi(ffi::FfiClient),
}

pub(crate) struct Bench {
    pub(crate) recipe: Recipe,
    /// The host list every session connects to (`ZK_CONNECT` unless a mode starts its own servers).
    pub(crate) hosts: String,
    /// The options of every Rust session (the TLS mode adds `Options::tls`).
    pub(crate) options: Options,
    /// Extra params of every W1/W2 row (the TLS mode's `transport` and `round`).
    pub(crate) tags: Vec<(String, J)>,
}

impl Bench {
    /// The harness's bench: sessions to `ZK_CONNECT` with the session timeout `BENCH_SESSION_MS`
    /// (10 s by default).
    pub(crate) fn new(recipe: Recipe) -> Bench {
        Bench {
            recipe,
            hosts: connect_string(),
            options: Options::default().session_timeout(session_timeout()),
            tags: Vec::new(),
        }
    }

    /// A row's params: `o` and this bench's tags.
    pub(crate) fn params(&self, o: &mut Obj) -> J {
        for (k, v) in &self.tags {
            o.put(k, v.clone());
        }
        o.take()
    }

    pub(crate) fn new_client(&self) -> Session {
        if self.recipe == Recipe::Ffi {
            return Session::Ffi(ffi::FfiClient::connect(&self.hosts).unwrap_or_else(|e| {
                log!("C ABI connect failed: {e}");
                std::process::exit(1)
            }));
        }
        let c = Client::connect(&self.hosts, self.options.clone()).unwrap_or_else(|e| {
            log!("connect failed: {e}");
            std::process::exit(1)
        });
        Session::Rust(c)
    }

    pub(crate) fn lock(&self, s: &Session, path: &str) -> Box<dyn Lock> {
        let r: zklock::Result<Box<dyn Lock>> = match (s, self.recipe) {
            (Session::Rust(c), Recipe::Lock) => {
                zklock::Mutex::new(c, path).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Semaphore) => {
                zklock::SemaphoreMutex::new(c, path).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Lease) => {
                zklock::Semaphore::new(c, path, 1).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Simple) => {
                zklock::SimpleLock::new(c, path).map(|m| Box::new(m) as Box<dyn Lock>)
            }
            (Session::Rust(c), Recipe::Rw) => zklock::ReadWriteLock::new(c, path)
                .map(|m| Box::new(m.write_lock()) as Box<dyn Lock>),
            (Session::Ffi(c), _) => c.mutex(path).map(|m| Box::new(m) as Box<dyn Lock>),
            (Session::Rust(_), Recipe::Ffi) => unreachable!("an ffi bench has C-ABI sessions"),
        };
        r.unwrap_or_else(|e| {
            log!("lock handle: {e}");
            std::process::exit(1)
        })
    }

    pub(crate) fn notifications(&self, s: &Session) -> u64 {
        match s {
            Session::Rust(c) => c.watch_events(),
            Session::Ffi(_) => 0,
        }
    }

    pub(crate) fn close(&self, s: Session) {
        match s {
            Session::Rust(c) => c.close(),
            Session::Ffi(c) => drop(c),
        }
    }

    /// A fresh path per run under `/peerbench/zklock-<recipe>/`. Every node zklock creates
    /// above its lock nodes is a container, which the server deletes once empty (within
    /// `znode.container.checkIntervalMs`, 60 s by default), so nothing is left behind.
    pub(crate) fn base_path(&self, w: &str) -> String {
        let rid = env_str("BENCH_RUN_ID", &std::process::id().to_string());
        let rnd = (now_ns() ^ (u64::from(std::process::id()) << 20)) % (1 << 30);
        format!("/peerbench/zklock-{}/{w}-{rid}-{rnd}", self.recipe.name())
    }
}

pub(crate) fn must(r: zklock::Result<()>, what: &str) {
    if let Err(e) = r {
        log!("{what}: {e}");
        std::process::exit(1);
    }
}

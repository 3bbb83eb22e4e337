//! The process rules of the `zklock` command (signals it catches and forwards, the child that
//! dies with it, process groups), a CPU clock for the benchmark, and a terminal for the
//! command's tests. The command compiles this module in as its own
//! (src/bin/zklock/main.rs); the library calls none of it but this process's id, and exports
//! only the test helpers (`zklock::testing`).

/// This process's id. A child is told from its parent however it was made: through `fork()`, a
/// raw `fork`/`clone` system call, or a runtime's own spawn, none of which need run a
/// `pthread_atfork` handler. The id is kept in a page of its own that the kernel empties in
/// every child that gets a copy of this address space (`MADV_WIPEONFORK`, Linux 4.14), so a
/// child reads zero there, asks `getpid` and keeps its own id. A read is one load: the checks
/// that make a forked child's inherited sessions inert run before every request and at each
/// wake-up of the executor, about 30 times a lock cycle (each a `getpid` system call of 0.4 µs
/// on a VM before). Without the page (an older kernel refuses the advice), every call asks
/// `getpid`. A child that shares this address space instead (`clone` with `CLONE_VM`: vfork,
/// `posix_spawn`) runs in the parent's memory and may only exec or exit, which it does.
pub(crate) fn process_id() -> u32 {
    use std::sync::atomic::Ordering;
    let Some(kept) = kept_id() else {
        return std::process::id();
    };
    match kept.load(Ordering::Relaxed) {
        0 => {
            let id = std::process::id();
            kept.store(id, Ordering::Relaxed);
            id
        }
        id => id,
    }
}

/// The word of the wiped-on-fork page ([`process_id`]), or `None` where the kernel cannot
/// wipe a page on fork.
fn kept_id() -> Option<&'static std::sync::atomic::AtomicU32> {
    use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
    // The page's address, NO_PAGE where the kernel cannot wipe one, 0 before the first call.
    // Not a OnceLock: a child forked while another thread made the page would wait on that
    // thread, which it does not have; here two first calls may each map one, and one stays.
    const NO_PAGE: usize = 1;
    static PAGE: AtomicUsize = AtomicUsize::new(0);
    let mut page = PAGE.load(Ordering::Acquire);
    if page == 0 {
        let made = wiped_on_fork_page().unwrap_or(NO_PAGE);
        page = match PAGE.compare_exchange(0, made, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => made,
            Err(first) => {
                if made != NO_PAGE {
                    // SAFETY: the page mapped just above, used by nothing else.
                    unsafe { libc::munmap(made as *mut libc::c_void, 4096) };
                }
                first
            }
        };
    }
    // SAFETY: a page mapped for good (never unmapped once kept), readable and writable,
    // zeroed when mapped and in every child: a valid AtomicU32 at its start, only ever used
    // through atomic operations.
    (page != NO_PAGE).then(|| unsafe { &*(page as *const AtomicU32) })
}

/// A page of its own that the kernel empties in a child (`MADV_WIPEONFORK`), if it can.
fn wiped_on_fork_page() -> Option<usize> {
    // SAFETY: an anonymous private mapping of one page, no address asked: it touches no memory
    // of ours; a failure is MAP_FAILED, checked below.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: p is the page just mapped, private and anonymous, as MADV_WIPEONFORK needs.
    if unsafe { libc::madvise(p, 4096, libc::MADV_WIPEONFORK) } != 0 {
        log::debug!(
            "zklock: the kernel does not wipe pages on fork ({}): the process id is asked of \
             it at every check",
            std::io::Error::last_os_error()
        );
        // SAFETY: p is the page mapped above, used by nothing else.
        unsafe { libc::munmap(p, 4096) };
        return None;
    }
    Some(p as usize)
}

/// Makes the child that `cmd` starts die (SIGKILL) when the thread that starts it, i.e. its
/// parent, dies, however it dies (SIGKILL, OOM): `PR_SET_PDEATHSIG`, set in the child before
/// `exec`. If the parent died before that took effect, the child ends itself at once.
pub fn die_with_parent(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the child between fork and exec; it only calls prctl, getppid
    // and _exit, which are async-signal-safe, and touches no memory of the parent's threads.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            // The race after fork: a parent that died before prctl left us to init.
            if libc::getppid() != parent {
                libc::_exit(128 + libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// Sends signal `sig` to process `pid`; false if it could not be sent.
pub fn send_signal(pid: u32, sig: i32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Forks this process: the child runs `child` and ends with `_exit` of what it returns (no
/// exit handlers run, nothing of other threads is dropped: it ends as a C child does after
/// its work); the parent gets the child's pid. For tests of what a forked child does with
/// what it inherited; `child` runs with this thread alone, so it must not wait for anything
/// another thread of the parent's held at the fork.
pub fn fork_child(child: impl FnOnce() -> i32) -> std::io::Result<u32> {
    // SAFETY: fork(2) has no memory-safety preconditions; in the child only this thread
    // exists, and it runs `child` then _exit, never returning into the parent's code.
    match unsafe { libc::fork() } {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            let code = child();
            // SAFETY: _exit(2) ends the process at once; nothing is touched after it.
            unsafe { libc::_exit(code) }
        }
        pid => Ok(pid as u32),
    }
}

/// As [`fork_child`], but the child is made by the raw `clone` system call (flags `SIGCHLD`
/// alone: a fork in all but libc's bookkeeping), as some runtimes and sandboxes make one: no
/// `pthread_atfork` handler runs, and libc's own locks (malloc's among them) stay as the
/// parent's other threads held them, so `child` may hang on one; kill it after a while.
pub fn clone_child(child: impl FnOnce() -> i32) -> std::io::Result<u32> {
    // SAFETY: clone(2) with SIGCHLD alone and no new stack has fork(2)'s (lack of)
    // preconditions; in the child only this thread exists, and it runs `child` then _exit.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        0 => {
            let code = child();
            // SAFETY: _exit(2) ends the process at once; nothing is touched after it.
            unsafe { libc::_exit(code) }
        }
        pid => Ok(pid as u32),
    }
}

/// Waits up to `timeout` for the child `pid` to end: its exit status (128 + the signal if
/// a signal ended it), or None if it still runs (or is not our child).
pub fn wait_child(pid: u32, timeout: std::time::Duration) -> Option<i32> {
    let end = std::time::Instant::now() + timeout;
    loop {
        let mut status = 0;
        // SAFETY: waitpid(2) writes the status to a valid i32.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
        if r == pid as libc::pid_t {
            return Some(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        if r < 0 || std::time::Instant::now() >= end {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// CPU time used by this process so far (user + system, all threads); for benchmarks.
pub fn process_cpu_time() -> std::time::Duration {
    // SAFETY: an all-zero rusage is a valid value of that plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is valid for writing one rusage.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return std::time::Duration::ZERO;
    }
    let tv = |t: libc::timeval| {
        std::time::Duration::from_secs(t.tv_sec as u64)
            + std::time::Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// How a caught signal came (see [`CaughtSignals`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalOrigin {
    /// The signal number.
    pub signal: i32,
    /// Sent by the kernel itself (`si_code` SI_KERNEL), not by a process: a Ctrl-C or Ctrl-\
    /// typed at the terminal or its hangup, which go to the terminal's foreground process
    /// group as a whole.
    pub from_kernel: bool,
    /// The sending process (`si_pid`; 0 when the kernel sent it).
    pub sender: u32,
}

/// The write end of the pipe the signal handler writes to (-1: none).
static SIGNAL_PIPE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);
/// The process that catches: a child between its fork and its exec runs the inherited handler
/// too, and must not write a record of a signal that only it got.
static CATCHING_PROCESS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// The handler: one 12-byte record (signal, si_code, si_pid) per signal, written to the pipe.
extern "C" fn on_caught_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t (SA_SIGINFO); si_pid is read only for a
    // signal sent by a process (SI_USER, SI_QUEUE, SI_TKILL: si_code <= 0), where it is set.
    // write(2) and errno access are async-signal-safe; errno is restored for the code the
    // signal interrupted.
    unsafe {
        let errno = *libc::__errno_location();
        if libc::getpid() != CATCHING_PROCESS.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let code = (*info).si_code;
        let pid = if code <= 0 { (*info).si_pid() } else { 0 };
        let rec: [i32; 3] = [sig, code, pid];
        let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::Relaxed);
        if fd >= 0 {
            // Non-blocking: a full pipe drops the record (thousands of signals unread).
            let _ = libc::write(fd, rec.as_ptr().cast(), std::mem::size_of_val(&rec));
        }
        *libc::__errno_location() = errno;
    }
}

/// Signals caught with where each one came from (the `zklock` command tells a Ctrl-C its
/// command got too from one sent to it alone). Dispositions set by [`CaughtSignals::catch`]
/// stay for the rest of the process (a program's own signals are reset to their defaults by
/// `exec`, so a command it starts begins with them).
pub struct CaughtSignals(std::fs::File);

impl CaughtSignals {
    /// Catches `signals` from now on (once per process: a second call takes them over).
    pub fn catch(signals: &[i32]) -> std::io::Result<CaughtSignals> {
        use std::os::fd::FromRawFd;
        let mut fds = [-1; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fds[0] is a new descriptor that nothing else owns; the write end stays open
        // for the handler for the rest of the process.
        let read = unsafe { std::fs::File::from_raw_fd(fds[0]) };
        CATCHING_PROCESS.store(
            std::process::id() as libc::pid_t,
            std::sync::atomic::Ordering::SeqCst,
        );
        let old = SIGNAL_PIPE.swap(fds[1], std::sync::atomic::Ordering::SeqCst);
        for &sig in signals {
            // SAFETY: an all-zero sigaction is a valid value of that plain C struct; it is then
            // filled in and passed to sigaction(2), with a handler that is async-signal-safe.
            let rc = unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                let handler: Handler = on_caught_signal;
                sa.sa_sigaction = handler as libc::sighandler_t;
                sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut())
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        if old >= 0 {
            // SAFETY: the old write end was ours, and the handler now writes to the new one.
            unsafe { libc::close(old) };
        }
        Ok(CaughtSignals(read))
    }

    /// Makes a [`CaughtSignals::next`] that waits (or the next one) return None now.
    pub fn wake(&self) {
        let rec = [0i32; 3];
        let fd = SIGNAL_PIPE.load(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: writes the 12 bytes of `rec` to the pipe (non-blocking; if it is full, a
        // record is already there to end the wait).
        let _ = unsafe { libc::write(fd, rec.as_ptr().cast(), std::mem::size_of_val(&rec)) };
    }

    /// The next signal caught, waiting for one for at most `timeout` (zero: only one already
    /// caught; None: no limit); None if there was none, or on a [`CaughtSignals::wake`].
    pub fn next(&self, timeout: Option<std::time::Duration>) -> Option<SignalOrigin> {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as libc::c_int);
        // SAFETY: pfd is one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            return None;
        }
        // Records are written whole (12 bytes < PIPE_BUF), so a read gets whole ones.
        let mut buf = [0u8; 12];
        (&self.0).read_exact(&mut buf).ok()?;
        let word = |i: usize| i32::from_ne_bytes(buf[i * 4..i * 4 + 4].try_into().unwrap());
        if word(0) == 0 {
            return None;
        }
        Some(SignalOrigin {
            signal: word(0),
            from_kernel: word(1) == libc::SI_KERNEL,
            sender: word(2).max(0) as u32,
        })
    }
}

/// A process of this process's group that keeps some signals blocked and does nothing
/// else: a signal sent to the whole group (`kill -INT -- -PGID`, a Ctrl-C at the terminal)
/// stays pending in it, one sent to this process alone never reaches it. The two look
/// alike to the process that catches them (same `si_code`, same sender): the witness tells
/// them apart. It dies with its parent (`PR_SET_PDEATHSIG`) and holds no descriptor.
pub struct GroupWitness {
    pid: libc::pid_t,
    signals: Vec<i32>,
}

impl GroupWitness {
    /// Starts a witness of `signals` in this process's group.
    pub fn start(signals: &[i32]) -> std::io::Result<GroupWitness> {
        // SAFETY: an all-zero sigset_t is valid storage that sigemptyset then initializes;
        // pthread_sigmask, fork and the calls in the child are async-signal-safe (the child
        // of a multi-threaded process may make no other), and the child never returns: it
        // waits in pause() until SIGKILL (from its parent's drop, or its parent's death).
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &sig in signals {
                libc::sigaddset(&mut set, sig);
            }
            // Blocked before the fork, so the child never runs the parent's handlers.
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
            let parent = libc::getpid();
            let pid = libc::fork();
            if pid == 0 {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if libc::getppid() != parent {
                    libc::_exit(0);
                }
                // Holds none of the parent's descriptors (pipes would not see their end).
                if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
                    for fd in 0..4096 {
                        libc::close(fd);
                    }
                }
                loop {
                    libc::pause();
                }
            }
            let err = std::io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            if pid < 0 {
                return Err(err);
            }
            Ok(GroupWitness {
                pid,
                signals: signals.to_vec(),
            })
        }
    }

    /// Whether signal `sig` is pending in the witness: it was sent to the whole group
    /// since the witness started.
    pub fn got(&self, sig: i32) -> bool {
        let Ok(status) = std::fs::read(format!("/proc/{}/status", self.pid)) else {
            return false;
        };
        (1..=64).contains(&sig)
            && pending_in_status(&status).is_some_and(|m| m & (1 << (sig - 1)) != 0)
    }

    /// Has the child `cmd` starts tell, just before its `exec`, which of `signals` this
    /// witness then had pending: a signal the witness got later reached the command too (it
    /// was in the group by then), one it had already came before the command existed or was
    /// taken by the child on its way to `exec`. The child first gives `signals` their default
    /// dispositions (as `exec` would), so none sent after that is taken by this process's
    /// handlers in it. Read the answer with [`AtExec::read`] once `cmd` was spawned.
    pub fn pending_at_exec(
        &self,
        cmd: &mut std::process::Command,
        signals: &[i32],
    ) -> std::io::Result<AtExec> {
        use std::os::fd::FromRawFd;
        use std::os::unix::process::CommandExt;
        let mut fds = [-1; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both descriptors are new and owned by nothing else.
        let (read, write) = unsafe {
            (
                std::fs::File::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        let status = std::ffi::CString::new(format!("/proc/{}/status", self.pid))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        let signals = signals.to_vec();
        let to_parent = fds[1];
        // SAFETY: the closure runs in the child between fork and exec and allocates nothing:
        // signal, open, read, close and write are async-signal-safe, the path was made before
        // the fork, and the status is parsed in a buffer on the stack.
        unsafe {
            cmd.pre_exec(move || {
                for &sig in &signals {
                    libc::signal(sig, libc::SIG_DFL);
                }
                let fd = libc::open(status.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Ok(());
                }
                let mut buf = [0u8; 8192];
                let mut len = 0;
                while len < buf.len() {
                    let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
                    if n <= 0 {
                        break;
                    }
                    len += n as usize;
                }
                libc::close(fd);
                if let Some(mask) = pending_in_status(&buf[..len]) {
                    let bytes = mask.to_ne_bytes();
                    libc::write(to_parent, bytes.as_ptr().cast(), bytes.len());
                }
                Ok(())
            });
        }
        Ok(AtExec {
            read,
            write: Some(write),
        })
    }

    /// A fresh witness (nothing pending) in place of this one; this one stays if a new one
    /// cannot be started.
    pub fn renew(&mut self) -> std::io::Result<()> {
        let fresh = GroupWitness::start(&self.signals)?;
        // The old one ends (drop) once the new one watches: no gap.
        drop(std::mem::replace(self, fresh));
        Ok(())
    }
}

impl Drop for GroupWitness {
    fn drop(&mut self) {
        // SAFETY: kill(2) and waitpid(2) on our own child, whose status goes to a valid i32.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            libc::waitpid(self.pid, &mut status, 0);
        }
    }
}

/// What a [`GroupWitness`] had pending at a command's `exec`, as its child said.
pub struct AtExec {
    read: std::fs::File,
    write: Option<std::os::fd::OwnedFd>,
}

impl AtExec {
    /// The signals (bit `sig - 1`) the witness had pending when the spawned child reached its
    /// `exec`; None if it did not say (it died first, or could not read the witness).
    pub fn read(mut self) -> Option<u64> {
        use std::io::Read;
        // This process's write end: the child's closed at its exec, so the read ends there.
        drop(self.write.take());
        let mut bytes = [0u8; 8];
        self.read.read_exact(&mut bytes).ok()?;
        Some(u64::from_ne_bytes(bytes))
    }
}

/// The pending signals of a `/proc/PID/status` text: its `SigPnd` and `ShdPnd` masks. Reads
/// without allocating (a child between fork and exec calls it too).
fn pending_in_status(status: &[u8]) -> Option<u64> {
    let mut mask = None;
    for line in status.split(|&b| b == b'\n') {
        let value = match line {
            [b'S', b'i', b'g', b'P', b'n', b'd', b':', rest @ ..]
            | [b'S', b'h', b'd', b'P', b'n', b'd', b':', rest @ ..] => rest,
            _ => continue,
        };
        let mut v = 0u64;
        for &c in value {
            let d = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                b' ' | b'\t' => continue,
                _ => return None,
            };
            v = (v << 4) | u64::from(d);
        }
        mask = Some(mask.unwrap_or(0) | v);
    }
    mask
}

/// Whether process `pid` is in this process's process group.
pub fn in_my_process_group(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: getpgid(2) and getpgrp(2) have no memory-safety preconditions.
    unsafe {
        let g = libc::getpgid(pid);
        g >= 0 && g == libc::getpgrp()
    }
}

/// A new pseudo-terminal: (master, slave), both close-on-exec and neither this process's
/// controlling terminal. For tests that type at a program (a Ctrl-C).
#[cfg(feature = "testing")]
pub fn open_pty() -> std::io::Result<(std::fs::File, std::fs::File)> {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // SAFETY: posix_openpt(3) has no memory-safety preconditions.
    let fd = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor that nothing else owns.
    let master = unsafe { std::fs::File::from_raw_fd(fd) };
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: fd is a pty master; ptsname_r writes a NUL-terminated name of at most name.len()
    // bytes into name.
    let rc = unsafe {
        if libc::grantpt(fd) != 0 || libc::unlockpt(fd) != 0 {
            -1
        } else {
            libc::ptsname_r(fd, name.as_mut_ptr(), name.len())
        }
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: ptsname_r succeeded, so name holds a NUL-terminated string.
    let path = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
    let path = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path.to_bytes());
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    Ok((master, slave))
}

/// Makes the child that `cmd` starts lead a new session whose controlling terminal is its
/// standard input (a terminal), as a login shell does: the terminal's Ctrl-C then goes to the
/// child's process group. For tests.
#[cfg(feature = "testing")]
pub fn controlling_terminal_on_stdin(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec (after its standard input
    // was set up); setsid and ioctl are async-signal-safe and touch no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::pending_in_status;

    #[test]
    fn the_pending_masks_of_a_status_are_read_and_joined() {
        let status = b"Name:\tsh\nSigQ:\t0/63452\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000002\nSigBlk:\t0000000000004003\n";
        assert_eq!(pending_in_status(status), Some(1 << (libc::SIGINT - 1)));
        assert_eq!(pending_in_status(b"Name:\tsh\n"), None);
        assert_eq!(pending_in_status(b"ShdPnd:\tzz\n"), None);
    }
}

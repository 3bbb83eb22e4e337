//! `zklock`: run a command while holding a ZooKeeper lock, like `flock(1)` across machines.
//!
//! ```text
//! zklock [OPTIONS] PATH [--] COMMAND [ARGS...]
//! zklock holders [OPTIONS] PATH
//! ```
//!
//! See `zklock --help` for the options and the exit statuses.

use std::io::Write;
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use libc::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use zklock::process::{CaughtSignals, SignalOrigin};
use zklock::{
    Client, Deadline, Lockable, Mutex, Options, Protocol, ReadWriteLock, Semaphore, SessionState,
    SimpleLock,
};

/// Not acquired before the timeout (EX_TEMPFAIL from sysexits.h; change with --conflict-exit-code).
const EXIT_NOT_ACQUIRED: u8 = 75;
/// Bad command line (EX_USAGE).
const EXIT_USAGE: u8 = 64;
/// ZooKeeper unreachable, session lost while acquiring, or another ZooKeeper error
/// (EX_UNAVAILABLE).
const EXIT_UNAVAILABLE: u8 = 69;
/// COMMAND found but not executable (as shells do).
const EXIT_CANNOT_EXECUTE: u8 = 126;
/// COMMAND not found (as shells do).
const EXIT_NOT_FOUND: u8 = 127;

const USAGE: &str = "\
Usage: zklock [OPTIONS] PATH [--] COMMAND [ARGS...]
       zklock holders [OPTIONS] [--json] [--watch] PATH

Runs COMMAND while holding the ZooKeeper lock at PATH (like flock(1), across machines), and
exits with COMMAND's exit status (128+N if it was killed by signal N). `zklock holders PATH`
lists the lock's queue: holders first, each with its holder id (--json: a JSON array, an object
per participant; --watch: again on every change of the queue, until interrupted).

Options:
  --hosts H             ZooKeeper hosts \"host:port[,host:port...][/chroot]\"
                        (default: $ZKL_HOSTS, else 127.0.0.1:2181)
  --timeout S           wait at most S seconds for the lock (decimals allowed; 0 tries
                        once); default: wait forever
  -n, --nonblock        same as --timeout 0
  --read                take the shared (read) half of a read-write lock at PATH
  --write               take the exclusive (write) half of a read-write lock at PATH
  --semaphore N         take one of N leases of a semaphore at PATH
  --simple              take a simple lock (one ephemeral node at PATH itself)
                        (default kind: the fair mutex, Curator InterProcessMutex compatible)
  --protocol P          node naming: curator (default) or kazoo
  --session-timeout S   ZooKeeper session timeout in seconds (default 10)
  --holder-id ID        the id stored in the lock node (default HOSTNAME:PID)
  --on-lost ACTION      when the lock stops being provably held while COMMAND runs (its
                        lease ran out: from then on the server may give it to someone
                        else): term (default: send COMMAND SIGTERM), kill (SIGKILL) or
                        ignore; a message goes to stderr in every case
  --kill-after S        with --on-lost term: SIGKILL COMMAND if it still runs S seconds
                        after that SIGTERM
  -E, --conflict-exit-code N
                        exit status when the lock is not acquired in time (default 75)
  -v, --verbose         say on stderr when the lock is acquired and released
  --json, --watch       (holders) print JSON; list again on every change of the queue
  -h, --help            this text
  -V, --version         the version

COMMAND never outlives the lock: SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to zklock are
passed on to COMMAND, and zklock waits for it, then releases and exits with its status; if
zklock dies without a chance to do so (SIGKILL, OOM), COMMAND is killed with it. A Ctrl-C
or Ctrl-\\ typed at the terminal reaches COMMAND itself (it is in zklock's process group), so
zklock does not pass it on. One of these signals while zklock still waits for the lock ends
the wait: zklock leaves the queue, and exits 128+N without running COMMAND.

COMMAND's environment also gets ZKLOCK_PATH and ZKLOCK_FENCING_TOKEN (the hold's fencing
token: strictly increasing from one holder of the lock to the next).

Exit status:
  COMMAND's status    COMMAND ran while the lock was held
  75                  not acquired before the timeout (or busy, with --timeout 0 / -n)
  64                  bad usage
  69                  ZooKeeper unreachable, or a ZooKeeper error, before COMMAND started
  128+N               signal N ended zklock before COMMAND started
  126, 127            COMMAND could not be executed / was not found
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(u32),
    Simple,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnLost {
    Term,
    Kill,
    Ignore,
}

#[derive(Debug)]
struct Args {
    holders: bool,
    json: bool,
    watch: bool,
    hosts: String,
    timeout: Option<Duration>,
    kind: Kind,
    protocol: Protocol,
    session_timeout: Duration,
    holder_id: Option<String>,
    on_lost: OnLost,
    kill_after: Option<Duration>,
    conflict_exit: u8,
    verbose: bool,
    path: String,
    command: Vec<String>,
}

enum Parsed {
    Run(Args),
    Exit(ExitCode),
}

/// The longest session timeout accepted (servers grant at most their maxSessionTimeout,
/// 20 ticks = 40 s by default).
const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(3600);

fn seconds(flag: &str, v: &str) -> Result<Duration, String> {
    let s: f64 = v
        .parse()
        .map_err(|_| format!("{flag}: {v:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(s)
        .map_err(|_| format!("{flag}: {v:?} is not a number of seconds >= 0"))
}

fn parse(argv: Vec<String>) -> Result<Parsed, String> {
    let mut a = Args {
        holders: false,
        json: false,
        watch: false,
        hosts: std::env::var("ZKL_HOSTS")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "127.0.0.1:2181".into()),
        timeout: None,
        kind: Kind::Mutex,
        protocol: Protocol::Curator,
        session_timeout: Duration::from_secs(10),
        holder_id: None,
        on_lost: OnLost::Term,
        kill_after: None,
        conflict_exit: EXIT_NOT_ACQUIRED,
        verbose: false,
        path: String::new(),
        command: Vec::new(),
    };
    let mut kinds = 0;
    let mut it = argv.into_iter().peekable();
    if it.peek().map(String::as_str) == Some("holders") {
        a.holders = true;
        it.next();
    }
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(Parsed::Exit(ExitCode::SUCCESS));
            }
            "-V" | "--version" => {
                println!("zklock {}", env!("CARGO_PKG_VERSION"));
                return Ok(Parsed::Exit(ExitCode::SUCCESS));
            }
            "--hosts" => a.hosts = value("--hosts")?,
            "--timeout" => {
                let t = seconds("--timeout", &value("--timeout")?)?;
                // Longer than the clock can count: the same as forever.
                a.timeout = std::time::Instant::now().checked_add(t).map(|_| t);
            }
            "-n" | "--nonblock" => a.timeout = Some(Duration::ZERO),
            "--read" => {
                a.kind = Kind::Read;
                kinds += 1;
            }
            "--write" => {
                a.kind = Kind::Write;
                kinds += 1;
            }
            "--simple" => {
                a.kind = Kind::Simple;
                kinds += 1;
            }
            "--semaphore" => {
                let v = value("--semaphore")?;
                let n: u32 = v.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("--semaphore: {v:?} is not a number of leases (1 or more)")
                })?;
                a.kind = Kind::Semaphore(n);
                kinds += 1;
            }
            "--protocol" => {
                a.protocol = match value("--protocol")?.as_str() {
                    "curator" => Protocol::Curator,
                    "kazoo" => Protocol::Kazoo,
                    other => {
                        return Err(format!(
                            "--protocol: {other:?} is neither curator nor kazoo"
                        ))
                    }
                }
            }
            "--session-timeout" => {
                let v = value("--session-timeout")?;
                a.session_timeout = seconds("--session-timeout", &v)?;
                if a.session_timeout > MAX_SESSION_TIMEOUT {
                    return Err(format!(
                        "--session-timeout: {v} s is more than any ZooKeeper server grants (at most {} s here)",
                        MAX_SESSION_TIMEOUT.as_secs()
                    ));
                }
            }
            "--holder-id" => a.holder_id = Some(value("--holder-id")?),
            "--kill-after" => {
                a.kill_after = Some(seconds("--kill-after", &value("--kill-after")?)?)
            }
            "--on-lost" => {
                a.on_lost = match value("--on-lost")?.as_str() {
                    "term" => OnLost::Term,
                    "kill" => OnLost::Kill,
                    "ignore" => OnLost::Ignore,
                    other => {
                        return Err(format!("--on-lost: {other:?} is not term, kill or ignore"))
                    }
                }
            }
            "-E" | "--conflict-exit-code" => {
                let v = value("--conflict-exit-code")?;
                a.conflict_exit = v.parse().map_err(|_| {
                    format!("--conflict-exit-code: {v:?} is not a status from 0 to 255")
                })?;
            }
            "-v" | "--verbose" => a.verbose = true,
            "--json" => a.json = true,
            "--watch" => a.watch = true,
            "--" if a.path.is_empty() => return Err("PATH is missing before `--`".into()),
            _ if flag.starts_with('-') && flag.len() > 1 => {
                return Err(format!("unknown option {arg}"))
            }
            // The subcommand may also follow options (a lock path starts with '/').
            "holders" if !a.holders => a.holders = true,
            _ => {
                a.path = arg;
                break;
            }
        }
    }
    if kinds > 1 {
        return Err("choose at most one of --read, --write, --semaphore, --simple".into());
    }
    if a.path.is_empty() {
        return Err("PATH is missing".into());
    }
    let rest: Vec<String> = it.collect();
    a.command = match rest.first().map(String::as_str) {
        Some("--") => rest[1..].to_vec(),
        _ => rest,
    };
    if (a.json || a.watch) && !a.holders {
        return Err("--json and --watch go with `zklock holders`".into());
    }
    if a.holders && !a.command.is_empty() {
        return Err(format!(
            "`zklock holders` takes no COMMAND (got {:?})",
            a.command
        ));
    }
    if !a.holders && a.command.is_empty() {
        return Err("COMMAND is missing".into());
    }
    Ok(Parsed::Run(a))
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1).collect()) {
        Ok(Parsed::Run(a)) => a,
        Ok(Parsed::Exit(code)) => return code,
        Err(e) => {
            eprintln!("zklock: {e}\nTry `zklock --help`.");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let mut opts = Options::default()
        .session_timeout(args.session_timeout)
        .connect_timeout(args.session_timeout)
        .protocol(args.protocol)
        // A lock lost with its session stays lost: never quietly open a new session.
        .reconnect_on_expiry(false);
    if let Some(id) = &args.holder_id {
        opts = opts.holder_id(id.clone());
    }
    let client = match Client::connect(&args.hosts, opts) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let code = if args.holders {
        holders(&client, &args)
    } else {
        run(&client, &args)
    };
    client.close();
    code
}

/// The exit status for an error of the library.
fn fail(e: &zklock::Error) -> ExitCode {
    eprintln!("zklock: {e}");
    match e {
        zklock::Error::InvalidArgument(_) => ExitCode::from(EXIT_USAGE),
        _ => ExitCode::from(EXIT_UNAVAILABLE),
    }
}

/// `zklock holders PATH` (`--json`: one JSON array per listing, an object per participant;
/// `--watch`: list again on every change of the queue, driven by a ZooKeeper watch).
fn holders(client: &Client, args: &Args) -> ExitCode {
    let lock = match make_lock(client, args) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::stdout();
    // The last listing printed: a watch that fires for a change already shown prints nothing.
    let mut shown = None;
    loop {
        // Watch first, then list: a change after the listing is never missed.
        let change = if args.watch {
            match client.watch_children(&lock.queue_path()) {
                Ok((_, w)) => Some(w),
                Err(e) => return fail(&e),
            }
        } else {
            None
        };
        match lock.participants() {
            Ok(list) if shown.as_ref() != Some(&list) => {
                print_participants(&mut out, &list, args);
                shown = Some(list);
            }
            Ok(_) => {}
            Err(e) => return fail(&e),
        }
        let Some(mut change) = change else {
            return ExitCode::SUCCESS;
        };
        if let Err(e) = change.wait(None) {
            return fail(&e);
        }
    }
}

fn print_participants(out: &mut impl Write, list: &[zklock::Participant], args: &Args) {
    let shows_mode = matches!(args.kind, Kind::Read | Kind::Write);
    let queue = !matches!(args.kind, Kind::Semaphore(_) | Kind::Simple);
    let text = if args.json {
        let items: Vec<_> = list
            .iter()
            .map(|p| {
                serde_json::json!({
                    "role": if p.is_holder { "holder" } else { "waiting" },
                    "sequence": if queue { Some(p.sequence) } else { None },
                    "mode": if shows_mode { Some(if p.is_reader { "read" } else { "write" }) } else { None },
                    "holder_id": p.holder_id,
                    "node": if queue { Some(&p.node) } else { None },
                })
            })
            .collect();
        format!("{}\n", serde_json::Value::Array(items))
    } else {
        let mut t = String::new();
        for p in list {
            let role = if p.is_holder { "holder" } else { "waiting" };
            if !queue {
                t.push_str(&format!("{role}\t{}\n", p.holder_id));
            } else if shows_mode {
                let mode = if p.is_reader { "read" } else { "write" };
                t.push_str(&format!(
                    "{role}\t{}\t{mode}\t{}\t{}\n",
                    p.sequence, p.holder_id, p.node
                ));
            } else {
                t.push_str(&format!(
                    "{role}\t{}\t{}\t{}\n",
                    p.sequence, p.holder_id, p.node
                ));
            }
        }
        if args.watch {
            // One listing per change, separated by an empty line.
            t.push('\n');
        }
        t
    };
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// The lock of the kind asked for, as the one trait every recipe implements.
fn make_lock(client: &Client, args: &Args) -> zklock::Result<Box<dyn Lockable>> {
    Ok(match args.kind {
        Kind::Mutex => Box::new(Mutex::new(client, &args.path)?),
        Kind::Read => Box::new(ReadWriteLock::new(client, &args.path)?.read_lock()),
        Kind::Write => Box::new(ReadWriteLock::new(client, &args.path)?.write_lock()),
        Kind::Semaphore(n) => Box::new(Semaphore::new(client, &args.path, n)?),
        Kind::Simple => Box::new(SimpleLock::new(client, &args.path)?),
    })
}

/// `zklock PATH COMMAND...`.
fn run(client: &Client, args: &Args) -> ExitCode {
    let lock = match make_lock(client, args) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // Catch the signals before the acquire: one that comes while zklock waits ends the wait
    // (the acquire deletes its node; main() closes the session), so the queue does not keep a
    // node of a zklock that is gone until its session expires. Later ones go on to COMMAND.
    let signals = match CaughtSignals::catch(&FORWARDED) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("zklock: cannot catch signals: {e}");
            return ExitCode::from(EXIT_UNAVAILABLE);
        }
    };
    let waiting = AtomicBool::new(true);
    let (acquired, signal) = std::thread::scope(|s| {
        let canceller = s.spawn(|| cancel_on_signal(&*lock, &signals, &waiting));
        let acquired = lock.acquire(Deadline::from_timeout(args.timeout));
        waiting.store(false, Ordering::SeqCst);
        signals.wake();
        (
            acquired,
            canceller.join().expect("the signal watcher does not panic"),
        )
    });
    if let Some(sig) = signal {
        if matches!(acquired, Ok(Some(_))) {
            let _ = lock.release();
        }
        return interrupted(args, sig);
    }
    let token = match acquired {
        Ok(Some(token)) => token,
        Ok(None) => {
            let how = match args.timeout {
                Some(t) if t.is_zero() => "it is busy".to_string(),
                Some(t) => format!("not acquired within {:?}", t),
                None => "not acquired".to_string(),
            };
            eprintln!("zklock: {}: {how}", args.path);
            return ExitCode::from(args.conflict_exit);
        }
        Err(e) => return fail(&e),
    };
    if args.verbose {
        eprintln!("zklock: acquired {} (fencing token {token})", args.path);
    }
    let (lost_tx, lost_rx) = mpsc::channel::<()>();
    lock.on_lost(Box::new(move || {
        let _ = lost_tx.send(());
    }));

    // A signal between the acquire and here: COMMAND does not start. From here on, the
    // signals go on to COMMAND (any caught after this look goes to it once it has started;
    // COMMAND starts with default handlers).
    if let Some(o) = signals.next(Some(Duration::ZERO)) {
        let _ = lock.release();
        return interrupted(args, o.signal);
    }
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("ZKLOCK_PATH", &args.path)
        .env("ZKLOCK_FENCING_TOKEN", token.to_string());
    // If zklock dies uncatchably, COMMAND dies too: never running while the lock is free.
    zklock::process::die_with_parent(&mut cmd);
    let child = cmd.spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("zklock: cannot run {:?}: {e}", args.command[0]);
            return ExitCode::from(match e.kind() {
                std::io::ErrorKind::NotFound => EXIT_NOT_FOUND,
                _ => EXIT_CANNOT_EXECUTE,
            });
        }
    };
    let status = wait_child(&mut child, &lost_rx, &signals, client, args);
    if let Err(e) = lock.release() {
        eprintln!("zklock: releasing {}: {e}", args.path);
    }
    if args.verbose {
        eprintln!("zklock: released {}", args.path);
    }
    match status {
        Ok(s) => exit_code_of(s),
        Err(e) => {
            eprintln!("zklock: waiting for {:?}: {e}", args.command[0]);
            ExitCode::from(EXIT_UNAVAILABLE)
        }
    }
}

/// While `waiting`: on the first signal caught, cancels the acquire of `lock`, and returns
/// that signal once the acquire has returned; None if it returned without a signal.
fn cancel_on_signal(
    lock: &dyn Lockable,
    signals: &CaughtSignals,
    waiting: &AtomicBool,
) -> Option<i32> {
    while waiting.load(Ordering::SeqCst) {
        let Some(o) = signals.next(None) else {
            continue;
        };
        // A cancel is not kept for an acquire that has not begun to wait yet (nor for the next
        // wait of one that goes on): cancel until the acquire has returned.
        while waiting.load(Ordering::SeqCst) {
            lock.cancel();
            std::thread::sleep(Duration::from_millis(10));
        }
        return Some(o.signal);
    }
    None
}

/// Signal `sig` ended zklock before COMMAND started (nothing of the attempt is left on the
/// server): 128+N, as a shell reports a command killed by signal N.
fn interrupted(args: &Args, sig: i32) -> ExitCode {
    eprintln!("zklock: {}: signal {sig} before COMMAND started", args.path);
    ExitCode::from(128u8.wrapping_add(sig as u8))
}

/// The signals zklock passes on to COMMAND.
const FORWARDED: [i32; 4] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT];

/// Whether COMMAND (process `pid`) got signal `o` itself, so that zklock must not pass it on:
/// the kernel sent it (a Ctrl-C or Ctrl-\ typed at the terminal, a hangup: sent to the
/// terminal's foreground process group as a whole, zklock's) and COMMAND is still in zklock's
/// process group. A signal a process sent (kill(2)) is passed on, to zklock alone or to its
/// group: the two look the same to zklock (same si_code, same sender).
fn command_got_it_too(o: &SignalOrigin, pid: u32) -> bool {
    o.from_kernel && zklock::process::in_my_process_group(pid)
}

/// Waits for the child, passing on the signals zklock receives (but not a terminal's, which
/// reached it too: [`command_got_it_too`]); when the lock stops being provably held
/// meanwhile, says so and applies --on-lost (and --kill-after). The child is signalled only
/// while it is known not to have been reaped, so its pid is still its own.
fn wait_child(
    child: &mut Child,
    lost_rx: &mpsc::Receiver<()>,
    signals: &CaughtSignals,
    client: &Client,
    args: &Args,
) -> std::io::Result<std::process::ExitStatus> {
    let mut lost = false;
    let mut termed_at: Option<std::time::Instant> = None;
    let pid = child.id();
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(s);
        }
        while let Some(o) = signals.next(Some(Duration::ZERO)) {
            let sig = o.signal;
            if command_got_it_too(&o, pid) {
                if args.verbose {
                    eprintln!("zklock: signal {sig} from the terminal reached {pid} too");
                }
                continue;
            }
            if args.verbose {
                eprintln!("zklock: passing signal {sig} on to {pid}");
            }
            zklock::process::send_signal(pid, sig);
        }
        if let (Some(t), Some(after)) = (termed_at, args.kill_after) {
            if t.elapsed() >= after {
                eprintln!("zklock: {pid} still runs {after:?} after SIGTERM; killing it (SIGKILL)");
                let _ = child.kill();
                termed_at = None;
            }
        }
        if !lost && lost_rx.recv_timeout(Duration::from_millis(20)).is_ok() {
            lost = true;
            let why = match client.state() {
                SessionState::Closed => "the ZooKeeper session was closed",
                SessionState::Expired => "the ZooKeeper session expired",
                _ => "no answer from ZooKeeper within the session's lease",
            };
            match args.on_lost {
                OnLost::Term => {
                    eprintln!(
                        "zklock: lost the lock on {} ({why}); sending SIGTERM to {pid}",
                        args.path
                    );
                    zklock::process::send_signal(pid, SIGTERM);
                    termed_at = Some(std::time::Instant::now());
                }
                OnLost::Kill => {
                    eprintln!(
                        "zklock: lost the lock on {} ({why}); killing {pid} (SIGKILL)",
                        args.path
                    );
                    let _ = child.kill();
                }
                OnLost::Ignore => {
                    eprintln!(
                        "zklock: lost the lock on {} ({why}); {pid} keeps running (--on-lost=ignore)",
                        args.path
                    );
                }
            }
        } else if lost {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn exit_code_of(s: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => ExitCode::from(c as u8),
        (None, Some(sig)) => ExitCode::from(128u8.wrapping_add(sig as u8)),
        _ => ExitCode::from(EXIT_UNAVAILABLE),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Result<Args, String> {
        match parse(v.iter().map(|s| s.to_string()).collect())? {
            Parsed::Run(a) => Ok(a),
            Parsed::Exit(_) => Err("exit".into()),
        }
    }

    #[test]
    fn parses_flags_path_and_command() {
        let a = args(&[
            "--hosts",
            "h:1",
            "--timeout=2.5",
            "--read",
            "/p",
            "--",
            "echo",
            "--x",
        ])
        .unwrap();
        assert_eq!(a.hosts, "h:1");
        assert_eq!(a.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(a.kind, Kind::Read);
        assert_eq!(a.path, "/p");
        assert_eq!(a.command, ["echo", "--x"]);
        let a = args(&["-n", "--semaphore", "3", "--on-lost", "kill", "/p", "true"]).unwrap();
        assert_eq!(
            (a.timeout, a.kind, a.on_lost),
            (Some(Duration::ZERO), Kind::Semaphore(3), OnLost::Kill)
        );
        assert_eq!(a.command, ["true"]);
        let a = args(&["holders", "--protocol", "kazoo", "/p"]).unwrap();
        assert!(a.holders && a.command.is_empty() && a.protocol == Protocol::Kazoo);
        assert_eq!(
            args(&["--timeout", "1e19", "/p", "true"]).unwrap().timeout,
            None
        );
        let a = args(&["--hosts", "h:1", "holders", "/p"]).unwrap();
        assert!(a.holders && a.path == "/p");
    }

    #[test]
    fn rejects_bad_usage() {
        for bad in [
            &["/p"][..],
            &[],
            &["--read", "--write", "/p", "true"],
            &["--semaphore", "0", "/p", "true"],
            &["--timeout", "-1", "/p", "true"],
            &["--on-lost", "maybe", "/p", "true"],
            &["--bogus", "/p", "true"],
            &["holders", "/p", "extra"],
            &["--", "true"],
            &["-E", "300", "/p", "true"],
        ] {
            assert!(args(bad).is_err(), "{bad:?}");
        }
    }
}

//! `zklock PATH COMMAND...`: running COMMAND under the lock (the signals zklock passes on,
//! --on-lost, --revocable).

use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use libc::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use zklock::{Client, Deadline, Lockable, SessionState};

use crate::cli::{Kind, OnLost, OnRevoke, RunArgs};
use crate::exit_codes::{
    fail, EXIT_CANNOT_EXECUTE, EXIT_LOST, EXIT_NOT_FOUND, EXIT_REVOKED, EXIT_UNAVAILABLE,
};
use crate::make_lock;
use crate::secure::PASSWORD_VARS;
use zklock::command_process::{self as process, AtExec, CaughtSignals, GroupWitness, SignalOrigin};

/// `zklock PATH COMMAND...`.
pub(crate) fn run(
    client: &Client,
    args: &RunArgs,
    path: &str,
    started: std::time::Instant,
) -> ExitCode {
    let lock = match make_lock(client, path, args.kind.asked().unwrap_or(Kind::Mutex)) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // Revocable from the start: the hold's node says so as soon as it is held.
    let (revoke_tx, revoke_rx) = mpsc::channel::<()>();
    if args.revocable.is_some() {
        let Some(revocable) = lock.as_revocable() else {
            return crate::exit_codes::usage(&format!(
                "--revocable: the lock at {path} cannot be asked to let go (a semaphore cannot)"
            ));
        };
        if let Err(e) = revocable.make_revocable(Box::new(move || {
            let _ = revoke_tx.send(());
        })) {
            return fail(&e);
        }
    }
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
        // One deadline for the whole call: what the connect took is gone from the wait.
        let deadline = match args.timeout {
            Some(t) if t.is_zero() => Deadline::TryOnce,
            Some(t) => started
                .checked_add(t)
                .map_or(Deadline::Forever, Deadline::At),
            None => Deadline::Forever,
        };
        let acquired = lock.acquire(deadline);
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
        return interrupted(path, sig);
    }
    let token = match acquired {
        Ok(Some(token)) => token,
        Ok(None) => {
            let how = match args.timeout {
                Some(t) if t.is_zero() => "it is busy".to_string(),
                Some(t) => format!("not acquired within {}", for_people(t)),
                None => "not acquired".to_string(),
            };
            eprintln!("zklock: {path}: {how}");
            return ExitCode::from(args.conflict_exit_code);
        }
        Err(e) => return fail(&e),
    };
    if args.conn.verbose {
        eprintln!("zklock: acquired {path} (fencing token {token})");
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
        return interrupted(path, o.signal);
    }
    if revoke_rx.try_recv().is_ok() {
        let _ = lock.release();
        eprintln!("zklock: {path}: asked to let go (revoked) before COMMAND started; released");
        return ExitCode::from(EXIT_REVOKED);
    }
    let mut cmd = Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("ZKLOCK_PATH", path)
        .env("ZKLOCK_FENCING_TOKEN", token.to_string());
    for var in PASSWORD_VARS {
        cmd.env_remove(var);
    }
    // If zklock dies uncatchably, COMMAND dies too: never running while the lock is free.
    process::die_with_parent(&mut cmd);
    // The group's witness watches from before COMMAND exists, and COMMAND's child says what it
    // had seen at the exec: a group signal after that reached COMMAND, whenever zklock's own
    // thread runs again.
    let mut witness = match GroupWitness::start(&FORWARDED) {
        Ok(w) => Some(w),
        Err(e) => {
            eprintln!(
                "zklock: cannot start the process group's witness ({e}): a signal sent to the \
                 whole group may reach COMMAND twice"
            );
            None
        }
    };
    let at_exec = witness
        .as_ref()
        .and_then(|w| w.pending_at_exec(&mut cmd, &FORWARDED).ok());
    let child = cmd.spawn();
    // Unknown (the child died on the way): every signal the witness holds counts as one that
    // may have come before COMMAND, and is passed on.
    let mut before_exec = at_exec.and_then(AtExec::read).unwrap_or(u64::MAX);
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
    let status = wait_child(
        &mut child,
        &lost_rx,
        &revoke_rx,
        Watch {
            caught: &signals,
            witness: &mut witness,
            before_exec: &mut before_exec,
        },
        client,
        args,
        path,
    );
    if let Err(e) = lock.release() {
        eprintln!("zklock: releasing {path}: {e}");
    }
    if args.conn.verbose {
        eprintln!("zklock: released {path}");
    }
    match status {
        Ok((s, Ended::ByItself)) => exit_code_of(s),
        Ok((s, Ended::Lost)) => {
            eprintln!(
                "zklock: {path}: the lock was lost while {:?} ran; it {}; exiting {EXIT_LOST}",
                args.command[0],
                describe(s)
            );
            ExitCode::from(EXIT_LOST)
        }
        Ok((s, Ended::Revoked)) => {
            eprintln!(
                "zklock: {path}: revoked while {:?} ran; it {}; released; exiting {EXIT_REVOKED}",
                args.command[0],
                describe(s)
            );
            ExitCode::from(EXIT_REVOKED)
        }
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
        // Sticky: it ends the acquire whether it waits yet or is about to begin. Return once
        // the acquire has.
        lock.cancel();
        while waiting.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        return Some(o.signal);
    }
    None
}

/// Signal `sig` ended zklock before COMMAND started (nothing of the attempt is left on the
/// server): 128+N, as a shell reports a command killed by signal N.
fn interrupted(path: &str, sig: i32) -> ExitCode {
    eprintln!("zklock: {path}: signal {sig} before COMMAND started");
    ExitCode::from(128u8.wrapping_add(sig as u8))
}

/// The signals zklock passes on to COMMAND.
const FORWARDED: [i32; 4] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT];

/// How long before the earliest instant the servers could hand a lost lock on COMMAND is
/// killed: the wait loop's look (a millisecond near the kill) and the kill's delivery, with
/// room for a loaded machine.
const KILL_LEAD: Duration = Duration::from_millis(100);

/// The signals zklock caught, its process group's witness, and the signals the witness
/// already held at COMMAND's exec.
struct Watch<'a> {
    caught: &'a CaughtSignals,
    witness: &'a mut Option<GroupWitness>,
    /// Bit `sig - 1`: held at COMMAND's exec (sent before COMMAND could get it).
    before_exec: &'a mut u64,
}

/// Whether signal `o` went to zklock's whole process group after COMMAND's exec, so that
/// COMMAND got it itself (a Ctrl-C or Ctrl-\ typed at the terminal, a hangup, a supervisor's
/// `kill -- -PGID`): the group's witness got it, and did not hold it yet at the exec; without a
/// witness, the kernel sent it. A signal sent to zklock alone and one sent to its group look the
/// same to zklock (same si_code, same sender); only the witness, a process of the group that
/// zklock never signals, tells them apart. The witness is renewed after each signal it got.
fn sent_to_my_group(o: &SignalOrigin, w: &mut Watch) -> bool {
    let Some(witness) = w.witness.as_mut() else {
        return o.from_kernel;
    };
    // The kernel marks the signal pending in every process of the group before kill(2)
    // returns; zklock reads it later than that, but looks twice more on a busy machine.
    let mut got = witness.got(o.signal);
    for _ in 0..2 {
        if got || o.from_kernel {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        got = witness.got(o.signal);
    }
    if !got {
        return o.from_kernel;
    }
    let bit = 1u64 << (o.signal - 1);
    let before_exec = *w.before_exec & bit != 0;
    match witness.renew() {
        // The fresh witness started after COMMAND's exec: all it sees, COMMAND got too.
        Ok(()) => *w.before_exec = 0,
        Err(e) => {
            eprintln!("zklock: cannot renew the process group's witness: {e}");
            *w.witness = None;
        }
    }
    !before_exec
}

/// How COMMAND came to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// By itself (or by a signal zklock passed on).
    ByItself,
    /// After the lock stopped being provably held (--on-lost).
    Lost,
    /// After a revocation request (--revocable).
    Revoked,
}

/// Waits for the child, passing on the signals zklock receives (but not those sent to its whole
/// process group while COMMAND is in it: COMMAND got them itself, [`sent_to_my_group`]); when
/// the lock stops being provably held meanwhile, says so and applies --on-lost (and
/// --kill-after); when a revocation request comes to a --revocable hold, ends COMMAND as it
/// says. The child is signalled only while it is known not to have been reaped, so its pid is
/// still its own.
fn wait_child(
    child: &mut Child,
    lost_rx: &mpsc::Receiver<()>,
    revoke_rx: &mpsc::Receiver<()>,
    mut watch: Watch,
    client: &Client,
    args: &RunArgs,
    path: &str,
) -> std::io::Result<(std::process::ExitStatus, Ended)> {
    let mut ended = Ended::ByItself;
    // When COMMAND, sent SIGTERM, is killed if it still runs; and why, for the message.
    let mut kill_at: Option<(Instant, &str)> = None;
    let pid = child.id();
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok((s, ended));
        }
        while let Some(o) = watch.caught.next(Some(Duration::ZERO)) {
            let sig = o.signal;
            if sent_to_my_group(&o, &mut watch) && process::in_my_process_group(pid) {
                if args.conn.verbose {
                    eprintln!("zklock: signal {sig} went to the process group: {pid} got it too");
                }
                continue;
            }
            if args.conn.verbose {
                eprintln!("zklock: passing signal {sig} on to {pid}");
            }
            process::send_signal(pid, sig);
        }
        if let Some((at, why)) = kill_at {
            if Instant::now() >= at {
                eprintln!("zklock: {pid} still runs {why}; killing it (SIGKILL)");
                let _ = child.kill();
                kill_at = None;
            }
        }
        if ended == Ended::ByItself && revoke_rx.try_recv().is_ok() {
            ended = Ended::Revoked;
            match args.revocable {
                Some(OnRevoke::Kill) => {
                    eprintln!("zklock: {path}: asked to let go (revoked); killing {pid} (SIGKILL)");
                    let _ = child.kill();
                }
                _ => {
                    eprintln!(
                        "zklock: {path}: asked to let go (revoked); sending SIGTERM to {pid}"
                    );
                    process::send_signal(pid, SIGTERM);
                    kill_at = args
                        .kill_after
                        .map(|after| (Instant::now() + after, "after --kill-after"));
                }
            }
        }
        let lost = ended == Ended::Lost;
        // Looked at often enough to land a kill on time.
        let tick = match kill_at {
            Some((at, _)) => at
                .saturating_duration_since(Instant::now())
                .clamp(Duration::from_millis(1), Duration::from_millis(20)),
            None => Duration::from_millis(20),
        };
        if !lost && lost_rx.recv_timeout(tick).is_ok() {
            ended = Ended::Lost;
            let why = match client.state() {
                SessionState::Closed => "the ZooKeeper session was closed",
                SessionState::Expired => "the ZooKeeper session expired",
                _ => "no answer from ZooKeeper within the session's lease",
            };
            // The servers may hand the lock on from this instant: COMMAND is dead by then,
            // whatever --kill-after says (the kill is sent early enough to land before it).
            let handover = client
                .handover_bound()
                .unwrap_or_default()
                .saturating_sub(KILL_LEAD);
            match args.on_lost {
                OnLost::Term if handover.is_zero() => {
                    eprintln!(
                        "zklock: lost the lock on {path} ({why}), and another client may hold it \
                         at once; killing {pid} (SIGKILL)"
                    );
                    let _ = child.kill();
                }
                OnLost::Term => {
                    eprintln!(
                        "zklock: lost the lock on {path} ({why}); sending SIGTERM to {pid}, \
                         SIGKILL in {} at most",
                        for_people(handover)
                    );
                    process::send_signal(pid, SIGTERM);
                    let now = Instant::now();
                    kill_at = Some(match args.kill_after {
                        Some(after) if after < handover => (now + after, "after --kill-after"),
                        _ => (
                            now + handover,
                            "as the servers may soon hand the lock to another client",
                        ),
                    });
                }
                OnLost::Kill => {
                    eprintln!("zklock: lost the lock on {path} ({why}); killing {pid} (SIGKILL)");
                    let _ = child.kill();
                }
                OnLost::Ignore => {
                    eprintln!(
                        "zklock: lost the lock on {path} ({why}); {pid} keeps running (--on-lost=ignore)"
                    );
                }
            }
        } else if lost {
            std::thread::sleep(tick);
        }
    }
}

/// COMMAND's end in words: "exited with N" or "was killed by signal N".
fn describe(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exited with {c}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => format!("ended ({s})"),
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

/// A duration as people write it, to the millisecond: "1 s", "2.5 s", "145 ms" (not Debug's
/// "2.999986386s").
pub(crate) fn for_people(d: Duration) -> String {
    let ms = (d.as_micros() + 500) / 1000;
    if ms >= 1000 {
        let text = format!("{}.{:03}", ms / 1000, ms % 1000);
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        format!("{ms} ms")
    }
}

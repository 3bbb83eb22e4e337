//! `zklock`: run a command while holding a ZooKeeper lock, like `flock(1)` across machines.
//!
//! ```text
//! zklock [OPTIONS] PATH [--] COMMAND [ARGS...]
//! zklock [OPTIONS] -c COMMAND_STRING PATH
//! zklock holders [OPTIONS] PATH
//! zklock revoke [OPTIONS] PATH [NODE]
//! ```
//!
//! See `zklock --help` (and `zklock holders --help`, `zklock revoke --help`) for the options
//! and the exit statuses; `man/zklock.1` is the same text as a manual page.

// The command's process rules (signals, the child's death with its parent, process groups) are
// the library's OS-facing module's, the one file besides the C layer with `unsafe` in it,
// handed to the command under the `cli` feature (`zklock::command_process`).

mod argv;
mod cli;
mod exit_codes;
mod holders;
mod manual;
mod run;
mod secure;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use zklock::{
    Acl, Client, LeaderElection, Lockable, Mutex, Options, Protocol, ReadWriteLock, Semaphore,
    SimpleLock,
};

use crate::argv::subcommand_first;
use crate::cli::{parse_args, AclArg, Conn, Kind, Proto, Sub};
use crate::exit_codes::{fail, usage, EXIT_USAGE};

fn main() -> ExitCode {
    let cli = match parse_args(subcommand_first(std::env::args().collect())) {
        Ok(c) => c,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            return if usage {
                ExitCode::from(EXIT_USAGE)
            } else {
                ExitCode::SUCCESS // --help, --version
            };
        }
    };
    if let Some(page) = &cli.man {
        let Some(out) = manual::manual_page(page) else {
            return usage(&format!(
                "no manual page {page:?} (zklock, zklock-holders, zklock-revoke)"
            ));
        };
        let _ = std::io::stdout().write_all(&out);
        return ExitCode::SUCCESS;
    }
    match cli.sub {
        Some(Sub::Holders(a)) => with_client(&a.conn, None, &a.path, |c| holders::holders(c, &a)),
        Some(Sub::Revoke(a)) => with_client(&a.conn, None, &a.path, |c| holders::revoke(c, &a)),
        None => {
            let mut a = cli.run;
            let Some(path) = a.path.clone() else {
                return usage("PATH is missing");
            };
            if let Some(sh) = a.shell.take() {
                if !a.command.is_empty() {
                    return usage("give either -c COMMAND_STRING or COMMAND, not both");
                }
                a.command = vec!["sh".into(), "-c".into(), sh];
            }
            if a.command.first().map(String::as_str) == Some("--") {
                a.command.remove(0);
            }
            if a.command.is_empty() {
                return usage("COMMAND is missing");
            }
            if a.nonblock {
                a.timeout = Some(Duration::ZERO);
            }
            // -n and --timeout bound the whole call, the connect included (-n: 1 s for it).
            let connect = a.timeout.map(|t| t.max(Duration::from_secs(1)));
            let started = std::time::Instant::now();
            with_client(&a.conn, connect, &path, |c| run::run(c, &a, &path, started))
        }
    }
}

/// Checks the path, connects (at most `connect`, else the session timeout), runs `f`, closes.
fn with_client(
    conn: &Conn,
    connect: Option<Duration>,
    path: &str,
    f: impl FnOnce(&Client) -> ExitCode,
) -> ExitCode {
    // A bad path is a usage error, found before any connection is tried.
    if let Err(e) = zklock::validate_path(path) {
        return usage(&e.to_string());
    }
    let mut opts = Options::default()
        .session_timeout(conn.session_timeout)
        .connect_timeout(connect.map_or(conn.session_timeout, |c| c.min(conn.session_timeout)))
        .protocol(match conn.protocol {
            Proto::Curator => Protocol::Curator,
            Proto::Kazoo => Protocol::Kazoo,
        })
        // A lock lost with its session stays lost: never quietly open a new session.
        .reconnect_on_expiry(false);
    if let Some(id) = &conn.holder_id {
        opts = opts.holder_id(id.clone());
    }
    if let Some(tick) = conn.server_tick_ms {
        opts = opts.server_tick_time(tick);
    }
    opts = opts.acl(match conn.acl {
        AclArg::Open => Acl::Open,
        AclArg::Creator => Acl::CreatorAll,
        AclArg::CreatorRead => Acl::CreatorAllReadAll,
    });
    opts = match conn.secure.apply(opts) {
        Ok(o) => o,
        Err(msg) => return usage(&msg),
    };
    let client = match Client::connect(&conn.hosts, opts) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let code = f(&client);
    client.close();
    code
}

/// The lock of a kind, as the one trait every recipe implements.
fn make_lock(client: &Client, path: &str, kind: Kind) -> zklock::Result<Box<dyn Lockable>> {
    Ok(match kind {
        Kind::Mutex => Box::new(Mutex::new(client, path)?),
        Kind::Read => Box::new(ReadWriteLock::new(client, path)?.read_lock()),
        Kind::Write => Box::new(ReadWriteLock::new(client, path)?.write_lock()),
        Kind::Semaphore(n) => Box::new(Semaphore::new(client, path, n)?),
        Kind::Simple => Box::new(SimpleLock::new(client, path)?),
        Kind::Election => Box::new(LeaderElection::new(client, path)?),
    })
}

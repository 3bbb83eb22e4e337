//! The command's definition (clap), its argument checks, and the shim that finds a
//! subcommand given after options.

use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};

use crate::exit_codes::EXIT_NOT_ACQUIRED;
use crate::secure::Secure;

const AFTER_HELP: &str = "\
COMMAND never outlives the lock: SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to zklock are passed on
to COMMAND, and zklock waits for it, then releases and exits with its status; if zklock dies
without a chance to do so (SIGKILL, OOM), COMMAND is killed with it. A signal sent to zklock's whole
process group (a Ctrl-C or Ctrl-\\ typed at the terminal, a supervisor's kill -- -PGID) reaches
COMMAND itself (it is in that group), so zklock does not pass it on: COMMAND gets it once. One of
these signals while zklock still waits for the lock ends the wait: zklock leaves the
queue, and exits 128+N without running COMMAND.

--revocable makes the hold revocable (Curator's cooperative revocation): `zklock revoke PATH`
from anywhere asks the holder to let go, and zklock ends COMMAND as --revocable says (SIGTERM,
then SIGKILL after --kill-after if given; or SIGKILL), releases, and exits 81. Without it a
request changes nothing, and `zklock revoke` says so.

A timeout too long for the clock to count (-w 1e30, -w inf) is forever, as no -w is.

COMMAND's environment also gets ZKLOCK_PATH and ZKLOCK_FENCING_TOKEN (the hold's fencing token:
strictly increasing from one holder of the lock to the next).

Secured ensembles: every --tls*, --sasl-*, --kerberos*, --digest-* option and --acl may be given
by the environment variable its help names (ZKL_TLS, ZKL_TLS_CA, ZKL_TLS_CERT, ZKL_TLS_KEY,
ZKL_TLS_KEY_PASSWORD_FILE, ZKL_SASL_USER, ZKL_SASL_PASSWORD_FILE, ZKL_KERBEROS,
ZKL_KERBEROS_PRINCIPAL, ZKL_KERBEROS_SERVICE, ZKL_KERBEROS_HOST, ZKL_DIGEST_USER,
ZKL_DIGEST_PASSWORD_FILE, ZKL_ACL), so that a script needs nothing secret on its command line.
Kerberos takes the process's credentials, as every Kerberos program does: KRB5CCNAME (kinit),
KRB5_CLIENT_KTNAME (a keytab), KRB5_CONFIG.
A password is never an option (ps shows the command line): it comes from a file
(--sasl-password-file, --digest-password-file, --tls-key-password-file; one trailing newline is
stripped), else from the environment's ZKL_SASL_PASSWORD, ZKL_DIGEST_PASSWORD or
ZKL_TLS_KEY_PASSWORD, which zklock does not pass on to COMMAND.

Exit status:
  COMMAND's status    COMMAND ran while the lock was held
  75                  not acquired before the timeout (or busy, with -n / --timeout 0), or
                      its hold not proven held in time (COMMAND runs only while it is:
                      within one session timeout without -w)
  80                  the lock stopped being provably held while COMMAND ran (its status is
                      on stderr)
  81                  (--revocable) a revocation request ended COMMAND, and the lock was
                      released (its status is on stderr)
  64                  bad usage, or PATH is not a lock path (checked before connecting)
  65                  (holders, revoke) PATH holds no lock layout zklock knows; or PATH is
                      a simple lock's node and another kind of lock was asked for
  69                  ZooKeeper unreachable (the message says why), or a ZooKeeper error,
                      before COMMAND started
  77                  authentication failed (a SASL password, a TLS certificate: the
                      message says what to fix), or a node's ACL refused this client's
                      identity (the message names it), before COMMAND started
  128+N               signal N ended zklock before COMMAND started
  126, 127            COMMAND could not be executed / was not found";

/// Runs COMMAND while holding the ZooKeeper lock at PATH (like flock(1), across machines).
///
/// Exits with COMMAND's exit status (128+N if it was killed by signal N). The default lock is the
/// fair mutex, Apache Curator InterProcessMutex compatible.
#[derive(Parser, Debug)]
#[command(
    name = "zklock",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    override_usage = "zklock [OPTIONS] PATH [--] COMMAND [ARGS...]\n       zklock [OPTIONS] -c COMMAND_STRING PATH\n       zklock holders [OPTIONS] PATH\n       zklock revoke [OPTIONS] PATH [NODE]"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) sub: Option<Sub>,
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Print a manual page (roff) and exit: zklock (the default), zklock-holders or
    /// zklock-revoke.
    #[arg(
        long,
        hide = true,
        exclusive = true,
        value_name = "PAGE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "zklock"
    )]
    pub(crate) man: Option<String>,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Sub {
    /// List the lock's holders and waiters, holders first, with their holder ids and how long
    /// each has held or waited; the lock's kind is found from its nodes unless given.
    Holders(HoldersArgs),
    /// Ask the lock's holders (or the participant NODE) to let go: cooperative revocation, as
    /// Curator's Revoker. Only holders that made their lock revocable (zklock --revocable,
    /// Curator's makeRevocable) hear it; each node asked is printed, and stderr says whether
    /// its holder listens.
    Revoke(RevokeArgs),
}

#[derive(Args, Debug, Clone)]
pub(crate) struct Conn {
    /// ZooKeeper hosts "host:port[,host:port...][/chroot]".
    #[arg(
        long,
        env = "ZKL_HOSTS",
        default_value = "127.0.0.1:2181",
        hide_env_values = true
    )]
    pub(crate) hosts: String,
    /// Node naming: curator or kazoo.
    #[arg(long, value_enum, default_value_t = Proto::Curator)]
    pub(crate) protocol: Proto,
    /// ZooKeeper session timeout in seconds (the server may grant less).
    #[arg(long, value_name = "S", default_value = "10", value_parser = session_seconds)]
    pub(crate) session_timeout: Duration,
    /// The servers' tickTime in milliseconds, which the hold's lease reckons with (default:
    /// read from the servers' `conf` four-letter word, else ZooKeeper's 2000).
    #[arg(long, value_name = "MS", env = "ZKL_SERVER_TICK_MS", value_parser = tick_millis)]
    pub(crate) server_tick_ms: Option<Duration>,
    /// The id stored in the lock node (default HOSTNAME:PID).
    #[arg(long, value_name = "ID")]
    pub(crate) holder_id: Option<String>,
    /// Say on stderr when the lock is acquired and released.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// The ACL of the nodes zklock creates: open (anyone may do anything), creator (only this
    /// client's identity: --sasl-user, --digest-user or --tls-cert), creator-read (the creator
    /// may do anything, anyone may read).
    #[arg(
        long,
        value_enum,
        env = "ZKL_ACL",
        default_value_t = AclArg::Open,
        help_heading = "Secured ensembles"
    )]
    pub(crate) acl: AclArg,
    #[command(flatten)]
    pub(crate) secure: Secure,
}

#[derive(Args, Debug, Clone, Default)]
#[group(multiple = false)]
pub(crate) struct KindArgs {
    /// Take the shared (read) half of a read-write lock at PATH.
    #[arg(short = 's', long, visible_alias = "shared")]
    pub(crate) read: bool,
    /// Take the exclusive (write) half of a read-write lock at PATH.
    #[arg(short = 'x', long, visible_alias = "exclusive")]
    pub(crate) write: bool,
    /// Take one of N leases of a semaphore at PATH.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) semaphore: Option<u32>,
    /// Take a simple lock (one ephemeral node at PATH itself).
    #[arg(long)]
    pub(crate) simple: bool,
    /// Join the leader election at PATH (Curator's LeaderLatch layout) and run COMMAND while
    /// leading; ZKLOCK_FENCING_TOKEN is the term.
    #[arg(long)]
    pub(crate) elect: bool,
}

#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    pub(crate) conn: Conn,
    #[command(flatten)]
    pub(crate) kind: KindArgs,
    /// Wait at most S seconds for the lock, connecting included (decimals allowed; 0 tries
    /// once); default: wait forever.
    #[arg(short = 'w', long, visible_alias = "wait", value_name = "S", value_parser = seconds)]
    pub(crate) timeout: Option<Duration>,
    /// Do not wait: connect (at most 1 s) and try once (same as --timeout 0).
    #[arg(short, long, conflicts_with = "timeout")]
    pub(crate) nonblock: bool,
    /// Exit status when the lock is not acquired in time.
    #[arg(short = 'E', long, value_name = "N", default_value_t = EXIT_NOT_ACQUIRED)]
    pub(crate) conflict_exit_code: u8,
    /// When the lock stops being provably held while COMMAND runs (its lease ran out, or its
    /// session is reconnecting): send COMMAND SIGTERM, SIGKILL, or ignore it; a message goes to
    /// stderr, and zklock exits 80, in every case. After SIGTERM, COMMAND is killed before the
    /// servers could hand the lock to another client (a tenth of the session timeout after the
    /// lease ran out; at once while a reconnect's answer is awaited), --kill-after or not.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    pub(crate) on_lost: OnLost,
    /// With --on-lost term or --revocable term: SIGKILL COMMAND if it still runs S seconds
    /// after that SIGTERM (for a lost lock, sooner if the servers could hand it on sooner).
    #[arg(long, value_name = "S", value_parser = seconds)]
    pub(crate) kill_after: Option<Duration>,
    /// Make the hold revocable: on a request to let go (`zklock revoke PATH`, Curator's
    /// Revoker), send COMMAND SIGTERM (term, the default) or SIGKILL (kill), release once it
    /// ended, and exit 81. Not for --semaphore (Curator's semaphore has no revocation).
    #[arg(
        long,
        value_enum,
        value_name = "HOW",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "term",
        conflicts_with = "semaphore"
    )]
    pub(crate) revocable: Option<OnRevoke>,
    /// Run COMMAND_STRING with `sh -c` (as flock -c).
    #[arg(short = 'c', long = "command", value_name = "COMMAND_STRING")]
    pub(crate) shell: Option<String>,
    /// Accepted for flock's command lines, and changes nothing: flock -o keeps COMMAND from
    /// inheriting the lock's file descriptor, and a ZooKeeper lock has none (COMMAND never
    /// holds the lock itself: zklock holds it while COMMAND runs).
    #[arg(short = 'o', long = "close")]
    pub(crate) close: bool,
    /// The lock path (absolute, e.g. /locks/nightly).
    #[arg(value_name = "PATH", required = true)]
    pub(crate) path: Option<String>,
    /// The command to run while holding the lock, and its arguments.
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub(crate) command: Vec<String>,
}

#[derive(Args, Debug)]
pub(crate) struct HoldersArgs {
    #[command(flatten)]
    pub(crate) conn: Conn,
    #[command(flatten)]
    pub(crate) kind: KindArgs,
    /// Print a JSON array per listing, an object per participant.
    #[arg(long)]
    pub(crate) json: bool,
    /// List again on every change of the queue, until interrupted.
    #[arg(long)]
    pub(crate) watch: bool,
    /// The lock path.
    pub(crate) path: String,
}

#[derive(Args, Debug)]
pub(crate) struct RevokeArgs {
    #[command(flatten)]
    pub(crate) conn: Conn,
    #[command(flatten)]
    pub(crate) kind: KindArgs,
    /// The lock path.
    pub(crate) path: String,
    /// Ask only this participant (its node name, as `zklock holders` shows it).
    pub(crate) node: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Proto {
    Curator,
    Kazoo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum AclArg {
    #[default]
    Open,
    Creator,
    CreatorRead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnLost {
    Term,
    Kill,
    Ignore,
}

/// How a revocable hold ends COMMAND when asked to let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnRevoke {
    Term,
    Kill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(u32),
    Simple,
    Election,
}

impl KindArgs {
    /// The kind asked for, if any.
    pub(crate) fn asked(&self) -> Option<Kind> {
        if self.read {
            Some(Kind::Read)
        } else if self.write {
            Some(Kind::Write)
        } else if let Some(n) = self.semaphore {
            Some(Kind::Semaphore(n))
        } else if self.simple {
            Some(Kind::Simple)
        } else if self.elect {
            Some(Kind::Election)
        } else {
            None
        }
    }
}

/// The longest session timeout accepted (servers grant at most their maxSessionTimeout,
/// 20 ticks = 40 s by default).
const MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(3600);

/// The longest duration kept as such: anything longer (`1e30`, `inf`) is forever.
const FOREVER: Duration = Duration::from_secs(u64::MAX / 4);

fn seconds(v: &str) -> Result<Duration, String> {
    let s: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| !s.is_nan())
        .ok_or_else(|| format!("{v:?} is not a number of seconds"))?;
    if s < 0.0 {
        return Err(format!("{v:?} is not a number of seconds >= 0"));
    }
    // Longer than the clock can count: the same as forever.
    Ok(Duration::try_from_secs_f64(s).map_or(FOREVER, |d| d.min(FOREVER)))
}

fn session_seconds(v: &str) -> Result<Duration, String> {
    let d = seconds(v)?;
    if d > MAX_SESSION_TIMEOUT {
        return Err(format!(
            "{v} s is more than any ZooKeeper server grants (at most {} s here)",
            MAX_SESSION_TIMEOUT.as_secs()
        ));
    }
    Ok(d)
}

fn tick_millis(v: &str) -> Result<Duration, String> {
    match v.parse::<u64>() {
        Ok(ms) if (1..=3_600_000).contains(&ms) => Ok(Duration::from_millis(ms)),
        _ => Err(format!("{v:?} is not a tick of 1 to 3600000 ms")),
    }
}

/// The command's definition. `holders` and `revoke` accept -v and the kind flags (as 0.2 did)
/// without listing them: revoke finds the kind from the nodes, and neither says more with -v.
pub(crate) fn command() -> clap::Command {
    let quiet = |sub: clap::Command, args: &[&str]| {
        args.iter()
            .fold(sub, |sub, a| sub.mut_arg(*a, |arg| arg.hide(true)))
    };
    Cli::command()
        .mut_subcommand("holders", |s| quiet(s, &["verbose"]))
        .mut_subcommand("revoke", |s| {
            quiet(
                s,
                &["verbose", "read", "write", "semaphore", "simple", "elect"],
            )
        })
}

/// The parsed command line of `argv`, by [`command`].
pub(crate) fn parse_args(argv: Vec<String>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut matches = command().try_get_matches_from(argv)?;
    Cli::from_arg_matches_mut(&mut matches)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn parse(v: &[&str]) -> Result<Cli, clap::Error> {
        parse_args(
            std::iter::once("zklock")
                .chain(v.iter().copied())
                .map(String::from)
                .collect(),
        )
    }

    #[test]
    fn the_definition_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn parses_flags_path_and_command() {
        let c = parse(&[
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
        let a = c.run;
        assert_eq!(a.conn.hosts, "h:1");
        assert_eq!(a.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(a.kind.asked(), Some(Kind::Read));
        assert_eq!(a.path.as_deref(), Some("/p"));
        assert_eq!(a.command, ["echo", "--x"]);
        // flock's habits: -w, -s/-x, -c, combined short flags.
        let a = parse(&["-nv", "-x", "/p", "true"]).unwrap().run;
        assert!(a.nonblock && a.conn.verbose && a.kind.write);
        let a = parse(&["-w", "3", "-s", "-c", "echo hi", "/p"])
            .unwrap()
            .run;
        assert_eq!(a.timeout, Some(Duration::from_secs(3)));
        assert_eq!((a.kind.read, a.shell.as_deref()), (true, Some("echo hi")));
        let a = parse(&["-no", "/p", "true"]).unwrap().run;
        assert!(a.nonblock && a.close);
        let a = parse(&["-n", "--semaphore", "3", "--on-lost", "kill", "/p", "true"])
            .unwrap()
            .run;
        assert_eq!(
            (a.nonblock, a.kind.asked(), a.on_lost),
            (true, Some(Kind::Semaphore(3)), OnLost::Kill)
        );
        match parse(&["holders", "--protocol", "kazoo", "--json", "/p"])
            .unwrap()
            .sub
        {
            Some(Sub::Holders(h)) => {
                assert!(h.json && h.conn.protocol == Proto::Kazoo && h.path == "/p")
            }
            other => panic!("{other:?}"),
        }
        match parse(&["revoke", "/p", "node-1"]).unwrap().sub {
            Some(Sub::Revoke(r)) => assert_eq!(r.node.as_deref(), Some("node-1")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn rejects_bad_usage() {
        for bad in [
            &["--read", "--write", "/p", "true"][..],
            &["--semaphore", "0", "/p", "true"],
            &["--timeout", "-1", "/p", "true"],
            &["--on-lost", "maybe", "/p", "true"],
            &["--bogus", "/p", "true"],
            &["holders", "/p", "extra"],
            &["-E", "300", "/p", "true"],
            &["-n", "--timeout", "3", "/p", "true"],
            &["--session-timeout", "1e19", "/p", "true"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}

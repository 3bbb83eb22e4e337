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
// the OS-facing module's, the one file besides the C layer with `unsafe` in it: the command
// compiles it in as its own, rather than the library making it public.
#[path = "../sys.rs"]
#[allow(unsafe_code, dead_code)]
mod sys;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use libc::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use sys::process::{CaughtSignals, GroupWitness, SignalOrigin};
use zklock::{
    Acl, Client, Deadline, LockKind, Lockable, Mutex, Options, Protocol, ReadWriteLock, Sasl,
    Semaphore, SessionState, SimpleLock, Tls,
};

/// Not acquired before the timeout (EX_TEMPFAIL from sysexits.h; change with --conflict-exit-code).
const EXIT_NOT_ACQUIRED: u8 = 75;
/// Bad command line, or a lock path that is not one (EX_USAGE).
const EXIT_USAGE: u8 = 64;
/// `holders`/`revoke`: the path holds no lock layout zklock knows (EX_DATAERR).
const EXIT_UNKNOWN_LAYOUT: u8 = 65;
/// ZooKeeper unreachable, session lost while acquiring, or another ZooKeeper error
/// (EX_UNAVAILABLE).
const EXIT_UNAVAILABLE: u8 = 69;
/// Authentication failed (SASL, a TLS certificate), or a node's ACL refused this client's
/// identity (EX_NOPERM).
const EXIT_NOPERM: u8 = 77;
/// The lock stopped being provably held while COMMAND ran (its lease ran out or its session
/// ended): COMMAND's own status is on stderr. Outside sysexits' 64-78 and the shells' 126-165.
const EXIT_LOST: u8 = 80;
/// A revocation request (`zklock revoke`) reached a holder that made its lock revocable
/// (--revocable): COMMAND was ended as asked and the lock released; COMMAND's own status is on
/// stderr. Next to 80, outside sysexits' 64-78 and the shells' 126-165.
const EXIT_REVOKED: u8 = 81;
/// COMMAND found but not executable (as shells do).
const EXIT_CANNOT_EXECUTE: u8 = 126;
/// COMMAND not found (as shells do).
const EXIT_NOT_FOUND: u8 = 127;

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

Secured ensembles: every --tls*, --sasl-*, --digest-* option and --acl may be given by the
environment variable its help names (ZKL_TLS, ZKL_TLS_CA, ZKL_TLS_CERT, ZKL_TLS_KEY,
ZKL_TLS_KEY_PASSWORD_FILE, ZKL_SASL_USER, ZKL_SASL_PASSWORD_FILE, ZKL_DIGEST_USER,
ZKL_DIGEST_PASSWORD_FILE, ZKL_ACL), so that a script needs nothing secret on its command line.
A password is never an option (ps shows the command line): it comes from a file
(--sasl-password-file, --digest-password-file, --tls-key-password-file; one trailing newline is
stripped), else from the environment's ZKL_SASL_PASSWORD, ZKL_DIGEST_PASSWORD or
ZKL_TLS_KEY_PASSWORD, which zklock does not pass on to COMMAND.

Exit status:
  COMMAND's status    COMMAND ran while the lock was held
  75                  not acquired before the timeout (or busy, with -n / --timeout 0)
  80                  the lock stopped being provably held while COMMAND ran (its status is
                      on stderr)
  81                  (--revocable) a revocation request ended COMMAND, and the lock was
                      released (its status is on stderr)
  64                  bad usage, or PATH is not a lock path (checked before connecting)
  65                  (holders, revoke) PATH holds no lock layout zklock knows
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
struct Cli {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
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
    man: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Sub {
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
struct Conn {
    /// ZooKeeper hosts "host:port[,host:port...][/chroot]".
    #[arg(
        long,
        env = "ZKL_HOSTS",
        default_value = "127.0.0.1:2181",
        hide_env_values = true
    )]
    hosts: String,
    /// Node naming: curator or kazoo.
    #[arg(long, value_enum, default_value_t = Proto::Curator)]
    protocol: Proto,
    /// ZooKeeper session timeout in seconds (the server may grant less).
    #[arg(long, value_name = "S", default_value = "10", value_parser = session_seconds)]
    session_timeout: Duration,
    /// The servers' tickTime in milliseconds, which the hold's lease reckons with (default:
    /// read from the servers' `conf` four-letter word, else ZooKeeper's 2000).
    #[arg(long, value_name = "MS", env = "ZKL_SERVER_TICK_MS", value_parser = tick_millis)]
    server_tick_ms: Option<Duration>,
    /// The id stored in the lock node (default HOSTNAME:PID).
    #[arg(long, value_name = "ID")]
    holder_id: Option<String>,
    /// Say on stderr when the lock is acquired and released.
    #[arg(short, long)]
    verbose: bool,
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
    acl: AclArg,
    #[command(flatten)]
    secure: Secure,
}

/// Credentials and TLS: no secret is ever taken from the command line (`ps` shows it), only
/// from a file or the environment.
#[derive(Args, Debug, Clone, Default)]
struct Secure {
    /// Connect with TLS (ZooKeeper's secureClientPort), trusting the system's certificate
    /// authorities unless --tls-ca is given. Any --tls-* option implies it; a host written
    /// tcp+tls://host:port uses TLS by itself, one written tcp://host:port never.
    #[arg(
        long,
        env = "ZKL_TLS",
        value_parser = clap::builder::FalseyValueParser::new(),
        help_heading = "Secured ensembles"
    )]
    tls: bool,
    /// Trust the certificate authorities of this PEM file (instead of the system's).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_CA",
        help_heading = "Secured ensembles"
    )]
    tls_ca: Option<PathBuf>,
    /// This client's certificate (PEM, with its chain), for mutual TLS (ssl.clientAuth=need);
    /// the servers know the client as x509:<its subject>. Needs --tls-key.
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_CERT",
        help_heading = "Secured ensembles"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1; an encrypted PKCS#8 key
    /// needs --tls-key-password-file or ZKL_TLS_KEY_PASSWORD).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_KEY",
        help_heading = "Secured ensembles"
    )]
    tls_key: Option<PathBuf>,
    /// A file holding the password of an encrypted --tls-key (one trailing newline is
    /// stripped); else the environment's ZKL_TLS_KEY_PASSWORD.
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_TLS_KEY_PASSWORD_FILE",
        help_heading = "Secured ensembles"
    )]
    tls_key_password_file: Option<PathBuf>,
    /// Authenticate with SASL DIGEST-MD5 as USER (servers with SASLAuthenticationProvider); the
    /// servers know the client as sasl:USER. The password comes from --sasl-password-file, else
    /// the environment's ZKL_SASL_PASSWORD: never from the command line.
    #[arg(
        long,
        value_name = "USER",
        env = "ZKL_SASL_USER",
        help_heading = "Secured ensembles"
    )]
    sasl_user: Option<String>,
    /// A file holding --sasl-user's password (one trailing newline is stripped).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_SASL_PASSWORD_FILE",
        help_heading = "Secured ensembles"
    )]
    sasl_password_file: Option<PathBuf>,
    /// Add ZooKeeper digest authentication as USER (addauth digest USER:PASSWORD); the servers
    /// know the client as digest:USER. The password comes from --digest-password-file, else the
    /// environment's ZKL_DIGEST_PASSWORD. Digest sends the password in clear at every connect:
    /// prefer SASL, or TLS.
    #[arg(
        long,
        value_name = "USER",
        env = "ZKL_DIGEST_USER",
        help_heading = "Secured ensembles"
    )]
    digest_user: Option<String>,
    /// A file holding --digest-user's password (one trailing newline is stripped).
    #[arg(
        long,
        value_name = "FILE",
        env = "ZKL_DIGEST_PASSWORD_FILE",
        help_heading = "Secured ensembles"
    )]
    digest_password_file: Option<PathBuf>,
}

#[derive(Args, Debug, Clone, Default)]
#[group(multiple = false)]
struct KindArgs {
    /// Take the shared (read) half of a read-write lock at PATH.
    #[arg(short = 's', long, visible_alias = "shared")]
    read: bool,
    /// Take the exclusive (write) half of a read-write lock at PATH.
    #[arg(short = 'x', long, visible_alias = "exclusive")]
    write: bool,
    /// Take one of N leases of a semaphore at PATH.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    semaphore: Option<u32>,
    /// Take a simple lock (one ephemeral node at PATH itself).
    #[arg(long)]
    simple: bool,
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    kind: KindArgs,
    /// Wait at most S seconds for the lock, connecting included (decimals allowed; 0 tries
    /// once); default: wait forever.
    #[arg(short = 'w', long, visible_alias = "wait", value_name = "S", value_parser = seconds)]
    timeout: Option<Duration>,
    /// Do not wait: connect (at most 1 s) and try once (same as --timeout 0).
    #[arg(short, long, conflicts_with = "timeout")]
    nonblock: bool,
    /// Exit status when the lock is not acquired in time.
    #[arg(short = 'E', long, value_name = "N", default_value_t = EXIT_NOT_ACQUIRED)]
    conflict_exit_code: u8,
    /// When the lock stops being provably held while COMMAND runs (its lease ran out: from
    /// then on the server may give it to someone else): send COMMAND SIGTERM, SIGKILL, or
    /// ignore it; a message goes to stderr, and zklock exits 80, in every case.
    #[arg(long, value_enum, default_value_t = OnLost::Term)]
    on_lost: OnLost,
    /// With --on-lost term or --revocable term: SIGKILL COMMAND if it still runs S seconds
    /// after that SIGTERM.
    #[arg(long, value_name = "S", value_parser = seconds)]
    kill_after: Option<Duration>,
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
    revocable: Option<OnRevoke>,
    /// Run COMMAND_STRING with `sh -c` (as flock -c).
    #[arg(short = 'c', long = "command", value_name = "COMMAND_STRING")]
    shell: Option<String>,
    /// The lock path (absolute, e.g. /locks/nightly).
    #[arg(value_name = "PATH", required = true)]
    path: Option<String>,
    /// The command to run while holding the lock, and its arguments.
    #[arg(
        value_name = "COMMAND",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<String>,
}

#[derive(Args, Debug)]
struct HoldersArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    kind: KindArgs,
    /// Print a JSON array per listing, an object per participant.
    #[arg(long)]
    json: bool,
    /// List again on every change of the queue, until interrupted.
    #[arg(long)]
    watch: bool,
    /// The lock path.
    path: String,
}

#[derive(Args, Debug)]
struct RevokeArgs {
    #[command(flatten)]
    conn: Conn,
    #[command(flatten)]
    kind: KindArgs,
    /// The lock path.
    path: String,
    /// Ask only this participant (its node name, as `zklock holders` shows it).
    node: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Proto {
    Curator,
    Kazoo,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
enum AclArg {
    #[default]
    Open,
    Creator,
    CreatorRead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnLost {
    Term,
    Kill,
    Ignore,
}

/// How a revocable hold ends COMMAND when asked to let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum OnRevoke {
    Term,
    Kill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutex,
    Read,
    Write,
    Semaphore(u32),
    Simple,
}

impl KindArgs {
    /// The kind asked for, if any.
    fn asked(&self) -> Option<Kind> {
        if self.read {
            Some(Kind::Read)
        } else if self.write {
            Some(Kind::Write)
        } else if let Some(n) = self.semaphore {
            Some(Kind::Semaphore(n))
        } else if self.simple {
            Some(Kind::Simple)
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
fn command() -> clap::Command {
    let quiet = |sub: clap::Command, args: &[&str]| {
        args.iter()
            .fold(sub, |sub, a| sub.mut_arg(*a, |arg| arg.hide(true)))
    };
    Cli::command()
        .mut_subcommand("holders", |s| quiet(s, &["verbose"]))
        .mut_subcommand("revoke", |s| {
            quiet(s, &["verbose", "read", "write", "semaphore", "simple"])
        })
}

/// The parsed command line of `argv`, by [`command`].
fn parse_args(argv: Vec<String>) -> Result<Cli, clap::Error> {
    use clap::FromArgMatches;
    let mut matches = command().try_get_matches_from(argv)?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// The manual page `page` (zklock, zklock-holders, zklock-revoke) in roff; None if there is no
/// such page. Every page it cites is one of these (`zklock help` has none).
fn manual_page(page: &str) -> Option<Vec<u8>> {
    let mut cmd = command().disable_help_subcommand(true);
    cmd.build();
    let cmd = match page {
        "zklock" => cmd,
        _ => cmd
            .get_subcommands()
            .find(|s| s.get_display_name() == Some(page))?
            .clone(),
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out).ok()?;
    Some(out)
}

/// The options that take a value (so that a value is never taken for a subcommand).
const TAKES_VALUE: &[&str] = &[
    "--hosts",
    "--protocol",
    "--session-timeout",
    "--holder-id",
    "--server-tick-ms",
    "--acl",
    "--tls-ca",
    "--tls-cert",
    "--tls-key",
    "--tls-key-password-file",
    "--sasl-user",
    "--sasl-password-file",
    "--digest-user",
    "--digest-password-file",
    "--timeout",
    "-w",
    "--wait",
    "--semaphore",
    "-E",
    "--conflict-exit-code",
    "--on-lost",
    "--kill-after",
    "-c",
    "--command",
];

/// Puts a subcommand given after options (`zklock --hosts H holders PATH`, as 0.2 took it)
/// first, where the parser looks for it. A lock path starts with '/', so the first operand
/// named `holders` or `revoke` is the subcommand.
fn subcommand_first(mut argv: Vec<String>) -> Vec<String> {
    let mut i = 1;
    while i < argv.len() {
        let a = argv[i].as_str();
        if a == "--" || (!a.starts_with('-') && a != "holders" && a != "revoke") {
            break;
        }
        if a == "holders" || a == "revoke" {
            let sub = argv.remove(i);
            argv.insert(1, sub);
            break;
        }
        i += if TAKES_VALUE.contains(&a) { 2 } else { 1 };
    }
    argv
}

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
        let Some(out) = manual_page(page) else {
            return usage(&format!(
                "no manual page {page:?} (zklock, zklock-holders, zklock-revoke)"
            ));
        };
        let _ = std::io::stdout().write_all(&out);
        return ExitCode::SUCCESS;
    }
    match cli.sub {
        Some(Sub::Holders(a)) => with_client(&a.conn, None, &a.path, |c| holders(c, &a)),
        Some(Sub::Revoke(a)) => with_client(&a.conn, None, &a.path, |c| revoke(c, &a)),
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
            with_client(&a.conn, connect, &path, |c| run(c, &a, &path, started))
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("zklock: {msg}\nTry `zklock --help`.");
    ExitCode::from(EXIT_USAGE)
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

/// The library's hints that name its API, and the command's options for them.
const IN_COMMAND_WORDS: [(&str, &str); 7] = [
    ("Tls::ca_file", "--tls-ca"),
    ("Tls::identity_files", "--tls-cert and --tls-key"),
    ("Tls::key_password", "--tls-key-password-file"),
    ("Options::tls", "--tls"),
    ("Options::sasl", "--sasl-user"),
    ("Options::auth", "--digest-user"),
    ("a TLS client certificate", "--tls-cert"),
];

/// The exit status for an error of the library, whose message goes to stderr with its hints
/// in the command's words (`--tls-ca` where the library says `Tls::ca_file`).
fn fail(e: &zklock::Error) -> ExitCode {
    let mut msg = e.to_string();
    for (api, option) in IN_COMMAND_WORDS {
        msg = msg.replace(api, option);
    }
    eprintln!("zklock: {msg}");
    match e {
        zklock::Error::InvalidArgument(_) => ExitCode::from(EXIT_USAGE),
        zklock::Error::AuthFailed(_) => ExitCode::from(EXIT_NOPERM),
        e if is_no_auth(e) => ExitCode::from(EXIT_NOPERM),
        _ => ExitCode::from(EXIT_UNAVAILABLE),
    }
}

/// Whether the servers refused a request by the node's ACL (ZooKeeper's NoAuth).
fn is_no_auth(e: &zklock::Error) -> bool {
    matches!(e, zklock::Error::ZooKeeper(_))
        && std::error::Error::source(e)
            .and_then(|s| s.downcast_ref::<zookeeper_client::Error>())
            .is_some_and(|z| matches!(z, zookeeper_client::Error::NoAuth))
}

/// The environment variables that hold passwords: read by zklock, never passed on to COMMAND.
const PASSWORD_VARS: [&str; 3] = [
    "ZKL_SASL_PASSWORD",
    "ZKL_DIGEST_PASSWORD",
    "ZKL_TLS_KEY_PASSWORD",
];

/// A password: the content of `file` (one trailing newline stripped) when one is named, else
/// the environment variable `var`, else None. `Err`: the usage error.
fn password(file: Option<&Path>, var: &str) -> Result<Option<String>, String> {
    if let Some(f) = file {
        let mut pw = std::fs::read_to_string(f)
            .map_err(|e| format!("cannot read the password file {}: {e}", f.display()))?;
        if pw.ends_with('\n') {
            pw.pop();
            if pw.ends_with('\r') {
                pw.pop();
            }
        }
        return Ok(Some(pw));
    }
    Ok(std::env::var(var).ok())
}

impl Secure {
    /// `opts` with the TLS and credentials asked for. `Err`: the usage error, said in words
    /// that tell where a missing piece goes.
    fn apply(&self, mut opts: Options) -> Result<Options, String> {
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(
                "--tls-cert and --tls-key go together (a certificate and its private \
                 key; or ZKL_TLS_CERT and ZKL_TLS_KEY)"
                    .into(),
            );
        }
        if self.tls_key_password_file.is_some() && self.tls_key.is_none() {
            return Err("--tls-key-password-file is the password of --tls-key, not given".into());
        }
        if self.tls || self.tls_ca.is_some() || self.tls_cert.is_some() {
            let mut tls = Tls::new();
            if let Some(ca) = &self.tls_ca {
                tls = tls.ca_file(ca);
            }
            if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
                tls = tls.identity_files(cert, key);
                let pw = password(
                    self.tls_key_password_file.as_deref(),
                    "ZKL_TLS_KEY_PASSWORD",
                )?;
                match pw {
                    Some(pw) => tls = tls.key_password(pw),
                    // Said here in the command's words (the library reads the key at connect).
                    None if std::fs::read_to_string(key)
                        .is_ok_and(|k| k.contains("ENCRYPTED PRIVATE KEY")) =>
                    {
                        return Err(format!(
                            "the key {} is encrypted: put its password in a file named by \
                             --tls-key-password-file (or ZKL_TLS_KEY_PASSWORD_FILE), or in the \
                             environment variable ZKL_TLS_KEY_PASSWORD",
                            key.display()
                        ));
                    }
                    None => {}
                }
            }
            opts = opts.tls(tls);
        }
        if let Some(user) = self.user("--sasl-user", &self.sasl_user)? {
            let pw = password(self.sasl_password_file.as_deref(), "ZKL_SASL_PASSWORD")?
                .ok_or_else(|| missing("--sasl-user", user, "SASL"))?;
            opts = opts.sasl(Sasl::digest_md5(user, pw));
        } else if self.sasl_password_file.is_some() {
            return Err("--sasl-password-file without --sasl-user (or ZKL_SASL_USER)".into());
        }
        if let Some(user) = self.user("--digest-user", &self.digest_user)? {
            if user.contains(':') {
                return Err(format!(
                    "--digest-user {user:?}: a digest user has no ':' in it"
                ));
            }
            let pw = password(self.digest_password_file.as_deref(), "ZKL_DIGEST_PASSWORD")?
                .ok_or_else(|| missing("--digest-user", user, "DIGEST"))?;
            opts = opts.auth("digest", format!("{user}:{pw}"));
        } else if self.digest_password_file.is_some() {
            return Err("--digest-password-file without --digest-user (or ZKL_DIGEST_USER)".into());
        }
        Ok(opts)
    }

    /// A user given to `flag`, refused when empty.
    fn user<'a>(&self, flag: &str, user: &'a Option<String>) -> Result<Option<&'a str>, String> {
        match user.as_deref() {
            Some("") => Err(format!("{flag}: the user name is empty")),
            u => Ok(u),
        }
    }
}

/// The usage error of a user without a password: where to put it.
fn missing(flag: &str, user: &str, what: &str) -> String {
    let lower = what.to_lowercase();
    format!(
        "{flag} {user} needs a password: put it in a file named by --{lower}-password-file \
         (or ZKL_{what}_PASSWORD_FILE), or in the environment variable ZKL_{what}_PASSWORD; \
         never on the command line, where ps shows it"
    )
}

/// The kind to list or revoke: the one asked for, else the one the path's nodes show (with
/// their protocol). `Err(exit code)` when it cannot be told.
fn kind_at(client: &Client, path: &str, asked: Option<Kind>) -> Result<Option<Kind>, ExitCode> {
    if let Some(k) = asked {
        return Ok(Some(k));
    }
    let found = client.lock_kind(path).map_err(|e| fail(&e))?;
    let (kind, protocol) = match found {
        LockKind::Free => return Ok(None),
        LockKind::Mutex(p) => (Kind::Mutex, p),
        LockKind::ReadWrite(p) => (Kind::Write, p),
        LockKind::Semaphore(p, n) => (Kind::Semaphore(n.unwrap_or(1)), p),
        LockKind::Simple => (Kind::Simple, Protocol::Curator),
        LockKind::Unknown(why) => {
            eprintln!("zklock: cannot tell what lock {path} is: {why}");
            return Err(ExitCode::from(EXIT_UNKNOWN_LAYOUT));
        }
        other => {
            eprintln!("zklock: cannot tell what lock {path} is ({other:?})");
            return Err(ExitCode::from(EXIT_UNKNOWN_LAYOUT));
        }
    };
    client.set_protocol(protocol);
    Ok(Some(kind))
}

/// `zklock holders PATH` (`--json`: one JSON array per listing, an object per participant;
/// `--watch`: list again on every change of the queue, driven by a ZooKeeper watch).
fn holders(client: &Client, args: &HoldersArgs) -> ExitCode {
    let kind = match kind_at(client, &args.path, args.kind.asked()) {
        Ok(k) => k,
        Err(code) => return code,
    };
    let mut out = std::io::stdout();
    // The last listing printed: a watch that fires for a change already shown prints nothing.
    let mut shown: Option<Vec<zklock::Participant>> = None;
    let mut kind = kind;
    loop {
        let lock = match kind.map(|k| make_lock(client, &args.path, k)).transpose() {
            Ok(l) => l,
            Err(e) => return fail(&e),
        };
        // Watch first, then list: a change after the listing is never missed.
        let change = if args.watch {
            let queue = lock
                .as_ref()
                .map_or_else(|| args.path.clone(), |l| l.queue_path());
            match client.watch_children(&queue) {
                Ok((_, w)) => Some(w),
                Err(e) => return fail(&e),
            }
        } else {
            None
        };
        let list = match &lock {
            Some(l) => match l.participants() {
                Ok(list) => list,
                Err(e) => return fail(&e),
            },
            None => Vec::new(),
        };
        let hidden = list.iter().filter(|p| p.hidden).count();
        if shown.as_ref() != Some(&list) {
            print_participants(&mut out, &list, kind, args);
            if hidden > 0 {
                say_hidden(client, &args.path, hidden);
            }
            shown = Some(list);
        }
        let Some(mut change) = change else {
            return ExitCode::from(if hidden > 0 { EXIT_NOPERM } else { 0 });
        };
        if let Err(e) = change.wait(None) {
            return fail(&e);
        }
        if kind.is_none() || args.kind.asked().is_none() {
            // A free path may have become a lock of any kind.
            kind = match kind_at(client, &args.path, args.kind.asked()) {
                Ok(k) => k,
                Err(code) => return code,
            };
        }
    }
}

/// Says on stderr that the ACL of `n` nodes of the lock hides their holder ids from this
/// client, and whom the servers take it for.
fn say_hidden(client: &Client, path: &str, n: usize) {
    let who = client
        .identities()
        .map(|ids| ids.join(", "))
        .unwrap_or_else(|e| format!("unknown ({e})"));
    eprintln!(
        "zklock: {path}: not authorized to read {n} of the lock's nodes (shown with holder id \
         \"?\"): their ACL does not grant it to this client, which the servers know as {who} (a \
         creator-only ACL grants rights to the identity that created the node only)"
    );
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn print_participants(
    out: &mut impl Write,
    list: &[zklock::Participant],
    kind: Option<Kind>,
    args: &HoldersArgs,
) {
    let shows_mode = matches!(kind, Some(Kind::Read | Kind::Write));
    let queue = !matches!(kind, Some(Kind::Semaphore(_) | Kind::Simple));
    let now = now_ms();
    // How long each has held (a holder) or waited (a waiter), by its node's creation.
    let age = |p: &zklock::Participant| (now - p.created_ms).max(0);
    // A holder id the node's ACL hides: "?".
    let id = |p: &zklock::Participant| {
        if p.hidden {
            "?".to_string()
        } else {
            p.holder_id.clone()
        }
    };
    let text = if args.json {
        let items: Vec<_> = list
            .iter()
            .map(|p| {
                serde_json::json!({
                    "role": if p.is_holder { "holder" } else { "waiting" },
                    "sequence": if queue { Some(p.sequence) } else { None },
                    "mode": if shows_mode { Some(if p.is_reader { "read" } else { "write" }) } else { None },
                    "holder_id": if p.hidden { None } else { Some(&p.holder_id) },
                    "node": if queue { Some(&p.node) } else { None },
                    "since_ms": p.created_ms,
                    "for_ms": age(p),
                })
            })
            .collect();
        format!("{}\n", serde_json::Value::Array(items))
    } else {
        let mut t = String::new();
        for p in list {
            let role = if p.is_holder { "holder" } else { "waiting" };
            let for_s = format!("{:.1}s", age(p) as f64 / 1000.0);
            if !queue {
                t.push_str(&format!("{role}\t{}\t{for_s}\n", id(p)));
            } else if shows_mode {
                let mode = if p.is_reader { "read" } else { "write" };
                t.push_str(&format!(
                    "{role}\t{}\t{mode}\t{}\t{}\t{for_s}\n",
                    p.sequence,
                    id(p),
                    p.node
                ));
            } else {
                t.push_str(&format!(
                    "{role}\t{}\t{}\t{}\t{for_s}\n",
                    p.sequence,
                    id(p),
                    p.node
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

/// `zklock revoke PATH [NODE]`: writes Curator's revocation request into the holders' nodes
/// (or NODE's), printing each node asked, and saying on stderr whether its holder listens (a
/// zklock holder that made its lock revocable marks its node so).
fn revoke(client: &Client, args: &RevokeArgs) -> ExitCode {
    let lock = match kind_at(client, &args.path, args.kind.asked()) {
        Ok(Some(k)) => match make_lock(client, &args.path, k) {
            Ok(l) => Some(l),
            Err(e) => return fail(&e),
        },
        Ok(None) if args.node.is_none() => {
            eprintln!("zklock: {}: nobody to ask (no lock there)", args.path);
            return ExitCode::SUCCESS;
        }
        Ok(None) => None,
        // NODE is asked whatever the path holds.
        Err(_) if args.node.is_some() => None,
        Err(code) => return code,
    };
    // Who listens, by node path, read before asking (the request overwrites the mark).
    let listens: std::collections::HashMap<String, bool> = match &lock {
        Some(l) => match l.participants() {
            Ok(list) => list
                .into_iter()
                .map(|p| (format!("{}/{}", l.queue_path(), p.node), p.revocable))
                .collect(),
            Err(e) => return fail(&e),
        },
        None => Default::default(),
    };
    let asked = match (&args.node, &lock) {
        (Some(node), _) => {
            let full = if node.starts_with('/') {
                node.clone()
            } else {
                format!(
                    "{}/{node}",
                    lock.as_ref()
                        .map_or_else(|| args.path.clone(), |l| l.queue_path())
                        .trim_end_matches('/')
                )
            };
            match client.request_revoke(&full) {
                Ok(true) => vec![full],
                Ok(false) => Vec::new(),
                Err(e) => return fail(&e),
            }
        }
        (None, Some(l)) => match l.revoke_holders() {
            Ok(nodes) => nodes,
            Err(e) => return fail(&e),
        },
        (None, None) => Vec::new(),
    };
    if asked.is_empty() {
        eprintln!("zklock: {}: nobody to ask (no holder)", args.path);
    }
    for n in asked {
        println!("{n}");
        match listens.get(&n) {
            Some(true) => eprintln!("zklock: {n}: asked (its holder listens)"),
            Some(false) => eprintln!(
                "zklock: {n}: asked; the holder did not make its lock revocable, so it will \
                 not let go (only a Curator holder could still hear it: its makeRevocable \
                 leaves no mark)"
            ),
            None => eprintln!("zklock: {n}: asked (whether its holder listens is unknown)"),
        }
    }
    ExitCode::SUCCESS
}

/// The lock of a kind, as the one trait every recipe implements.
fn make_lock(client: &Client, path: &str, kind: Kind) -> zklock::Result<Box<dyn Lockable>> {
    Ok(match kind {
        Kind::Mutex => Box::new(Mutex::new(client, path)?),
        Kind::Read => Box::new(ReadWriteLock::new(client, path)?.read_lock()),
        Kind::Write => Box::new(ReadWriteLock::new(client, path)?.write_lock()),
        Kind::Semaphore(n) => Box::new(Semaphore::new(client, path, n)?),
        Kind::Simple => Box::new(SimpleLock::new(client, path)?),
    })
}

/// `zklock PATH COMMAND...`.
fn run(client: &Client, args: &RunArgs, path: &str, started: std::time::Instant) -> ExitCode {
    let lock = match make_lock(client, path, args.kind.asked().unwrap_or(Kind::Mutex)) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    // Revocable from the start: the hold's node says so as soon as it is held.
    let (revoke_tx, revoke_rx) = mpsc::channel::<()>();
    if args.revocable.is_some() {
        if let Err(e) = lock.make_revocable(Box::new(move || {
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
                Some(t) => format!("not acquired within {:?}", t),
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
    sys::process::die_with_parent(&mut cmd);
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
    let status = wait_child(
        &mut child, &lost_rx, &revoke_rx, &signals, client, args, path,
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

/// Whether signal `o` went to zklock's whole process group (a Ctrl-C or Ctrl-\ typed at the
/// terminal, a hangup, a supervisor's `kill -- -PGID`): the kernel sent it, or the group's
/// witness got it too. A signal sent to zklock alone and one sent to its group look the same to
/// zklock (same si_code, same sender); only the witness, a process of the group that zklock
/// never signals, tells them apart. The witness is renewed after each signal it got.
fn sent_to_my_group(o: &SignalOrigin, witness: &mut Option<GroupWitness>) -> bool {
    let Some(w) = witness else {
        return o.from_kernel;
    };
    // The kernel marks the signal pending in every process of the group before kill(2)
    // returns; zklock reads it later than that, but looks twice more on a busy machine.
    let mut got = w.got(o.signal);
    for _ in 0..2 {
        if got || o.from_kernel {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
        got = w.got(o.signal);
    }
    if got {
        if let Err(e) = w.renew() {
            eprintln!("zklock: cannot renew the process group's witness: {e}");
            *witness = None;
        }
    }
    got || o.from_kernel
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
    signals: &CaughtSignals,
    client: &Client,
    args: &RunArgs,
    path: &str,
) -> std::io::Result<(std::process::ExitStatus, Ended)> {
    let mut ended = Ended::ByItself;
    let mut termed_at: Option<std::time::Instant> = None;
    let pid = child.id();
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
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok((s, ended));
        }
        while let Some(o) = signals.next(Some(Duration::ZERO)) {
            let sig = o.signal;
            if sent_to_my_group(&o, &mut witness) && sys::process::in_my_process_group(pid) {
                if args.conn.verbose {
                    eprintln!("zklock: signal {sig} went to the process group: {pid} got it too");
                }
                continue;
            }
            if args.conn.verbose {
                eprintln!("zklock: passing signal {sig} on to {pid}");
            }
            sys::process::send_signal(pid, sig);
        }
        if let (Some(t), Some(after)) = (termed_at, args.kill_after) {
            if t.elapsed() >= after {
                eprintln!("zklock: {pid} still runs {after:?} after SIGTERM; killing it (SIGKILL)");
                let _ = child.kill();
                termed_at = None;
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
                    sys::process::send_signal(pid, SIGTERM);
                    termed_at = Some(std::time::Instant::now());
                }
            }
        }
        let lost = ended == Ended::Lost;
        if !lost && lost_rx.recv_timeout(Duration::from_millis(20)).is_ok() {
            ended = Ended::Lost;
            let why = match client.state() {
                SessionState::Closed => "the ZooKeeper session was closed",
                SessionState::Expired => "the ZooKeeper session expired",
                _ => "no answer from ZooKeeper within the session's lease",
            };
            match args.on_lost {
                OnLost::Term => {
                    eprintln!("zklock: lost the lock on {path} ({why}); sending SIGTERM to {pid}");
                    sys::process::send_signal(pid, SIGTERM);
                    termed_at = Some(std::time::Instant::now());
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
            std::thread::sleep(Duration::from_millis(20));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Cli, clap::Error> {
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
    fn a_subcommand_after_options_is_found() {
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            subcommand_first(v(&["zklock", "--hosts", "h:1", "-v", "holders", "/p"])),
            v(&["zklock", "holders", "--hosts", "h:1", "-v", "/p"])
        );
        // A value that happens to be `holders` stays a value; a path stops the search.
        assert_eq!(
            subcommand_first(v(&["zklock", "--holder-id", "holders", "/p", "revoke"])),
            v(&["zklock", "--holder-id", "holders", "/p", "revoke"])
        );
    }

    #[test]
    fn secure_flags_take_files_never_passwords() {
        let dir = tempfile::tempdir().unwrap();
        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\n").unwrap();
        let pw = pw.to_str().unwrap();
        let c = parse(&[
            "--tls-ca",
            "ca.pem",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "c.key",
            "--sasl-user",
            "bob",
            "--sasl-password-file",
            pw,
            "--digest-user",
            "app",
            "--digest-password-file",
            pw,
            "--acl",
            "creator-read",
            "/p",
            "true",
        ])
        .unwrap();
        let sec = &c.run.conn.secure;
        assert_eq!(sec.tls_ca.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(sec.sasl_user.as_deref(), Some("bob"));
        assert_eq!(c.run.conn.acl, AclArg::CreatorRead);
        let opts = format!("{:?}", sec.apply(Options::default()).unwrap());
        // The options carry TLS, SASL and digest, and print no password.
        assert!(opts.contains("ca.pem") && opts.contains("bob"), "{opts}");
        assert!(opts.contains("digest:<redacted>"), "{opts}");
        assert!(!opts.contains("s3cret"), "{opts}");
        // One trailing newline is stripped, and only one.
        assert_eq!(
            password(Some(Path::new(pw)), "ZKL_NO_SUCH_VAR").unwrap(),
            Some("s3cret".into())
        );
        let two = dir.path().join("two");
        std::fs::write(&two, "a b\r\n\n").unwrap();
        assert_eq!(password(Some(&two), "X").unwrap(), Some("a b\r\n".into()));
        // No option takes a password itself.
        for flag in [
            "--sasl-password",
            "--digest-password",
            "--tls-key-password",
            "--password",
        ] {
            assert!(parse(&[flag, "x", "/p", "true"]).is_err(), "{flag}");
        }
        // Usage errors that say where a missing piece goes.
        let err = |v: &[&str]| {
            parse(v)
                .unwrap()
                .run
                .conn
                .secure
                .apply(Options::default())
                .unwrap_err()
        };
        let e = err(&[
            "--sasl-user",
            "bob",
            "--sasl-password-file",
            "/nonexistent/pw",
            "/p",
            "true",
        ]);
        assert!(e.contains("/nonexistent/pw"), "{e}");
        let e = err(&["--tls-cert", "c.pem", "/p", "true"]);
        assert!(e.contains("--tls-key"), "{e}");
        let e = err(&["--sasl-password-file", pw, "/p", "true"]);
        assert!(e.contains("--sasl-user"), "{e}");
        let e = err(&[
            "--digest-user",
            "a:b",
            "--digest-password-file",
            pw,
            "/p",
            "true",
        ]);
        assert!(e.contains("':'"), "{e}");
        // A value that happens to be a subcommand's name stays a value.
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let argv = v(&["zklock", "--sasl-user", "holders", "/p", "true"]);
        assert_eq!(subcommand_first(argv.clone()), argv);
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

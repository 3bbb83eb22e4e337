//! One real ZooKeeper server for a whole test run, or for the tests of another language:
//! prints its connect string on the first line of stdout, then what a client needs to reach it
//! as `name=value` lines, then an empty line; then serves until its standard input closes or
//! the process that started it ends, whichever comes first (and kills the server then).
//!
//! `scripts/run-tests.sh` starts it with `--until-parent-exits` and hands the address to every
//! test process as `ZKLOCK_TEST_SERVER` (read by [`TestingServer::shared`]); the Python
//! package's tests start the secured ones.
//!
//! ```text
//! cargo run --features testing --example testing_server [-- OPTIONS]
//!   --until-parent-exits
//!                      serve until the process that started it ends (or it is killed), and
//!                      never read standard input: for a shell script, whose every child
//!                      would inherit the write end of a pipe to our stdin (a stray child of a
//!                      test then kept the server up after the script had ended)
//!   --while-used DIR   serve while it is used, for the tests of one target directory
//!                      (tests/it/common): a test process attaching to DIR/address touches
//!                      DIR/used under DIR/lock and holds a shared lock on DIR/users for its
//!                      life; once no process holds that and DIR/used is a minute old,
//!                      removes DIR/address under DIR/lock and ends
//!   --idle S           with --while-used: that minute is S seconds
//!   --tls need|want|none
//!                      a TLS-only client port (ssl.clientAuth need: mutual TLS), certificates
//!                      made for the run; prints ca=, cert= and key= (a client certificate, CN
//!                      "client", and its key: PEM files)
//!   --sasl USER:PW     a server that requires SASL DIGEST-MD5, knowing USER (repeatable)
//!   --kerberos NAME    a server that requires Kerberos (SASL GSSAPI), with a real MIT KDC of
//!                      its own, and a principal NAME@ZKLOCK.TEST with a keytab (repeatable);
//!                      the connect string is localhost:PORT (the host of the servers'
//!                      principal); prints krb5_conf= (KRB5_CONFIG), realm=, kdc_dir= (the
//!                      KDC's directory: a place for credential caches) and keytab.NAME= (a
//!                      keytab file) for each NAME
//! ```

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use zklock::testing::{ClientAuth, TestingKdc, TestingServer};

fn usage(why: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{why}; usage: testing_server [--until-parent-exits | --while-used DIR [--idle S]] \
             [--tls need|want|none] \
             [--sasl USER:PASSWORD]... [--kerberos NAME]..."
        ),
    )
}

/// Returns when the process `starter` that started this one ends (this one is then
/// re-parented), or, with `read_stdin`, when standard input closes (EOF or an error alike),
/// whichever comes first.
fn wait_for_the_end(starter: u32, read_stdin: bool) {
    let (ended, end) = mpsc::channel::<()>();
    let parent_gone = ended.clone();
    std::thread::spawn(move || {
        while std::os::unix::process::parent_id() == starter {
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = parent_gone.send(());
    });
    if read_stdin {
        std::thread::spawn(move || {
            let mut sink = [0u8; 64];
            while matches!(std::io::stdin().read(&mut sink), Ok(n) if n > 0) {}
            let _ = ended.send(());
        });
    }
    let _ = end.recv();
}

/// How long a `--while-used` server waits, unused, before it ends (`--idle`).
const IDLE: Duration = Duration::from_secs(60);

/// Returns once no test process uses the server (none holds its shared lock on `dir/users`)
/// and `dir/used` is older than `idle`, with `dir/address` removed under `dir/lock`: a test
/// that takes the lock after that starts another. (A test's own connections say nothing: one
/// may use the server for minutes with none open between its steps.)
fn serve_while_used(dir: &Path, idle: Duration) -> std::io::Result<()> {
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let lock = std::fs::File::create(dir.join("lock"))?;
        lock.lock()?;
        let users = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("users"))?;
        if users.try_lock().is_err() {
            continue;
        }
        let unused = std::fs::metadata(dir.join("used"))
            .and_then(|m| m.modified())
            .map(|t| t.elapsed().unwrap_or_default() > idle)
            .unwrap_or(true);
        if unused {
            std::fs::remove_file(dir.join("address"))?;
            return Ok(());
        }
    }
}

fn main() -> std::io::Result<()> {
    // Before the server's start, which takes seconds: a starter gone by then is noticed too.
    let starter = std::os::unix::process::parent_id();
    let mut tls = None;
    let mut users: Vec<(String, String)> = Vec::new();
    let mut principals: Vec<String> = Vec::new();
    let mut read_stdin = true;
    let mut while_used: Option<PathBuf> = None;
    let mut idle = IDLE;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--until-parent-exits" => read_stdin = false,
            "--while-used" => {
                while_used = Some(
                    args.next()
                        .ok_or_else(|| usage("--while-used takes a directory"))?
                        .into(),
                )
            }
            "--idle" => {
                idle = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .map(Duration::from_secs)
                    .ok_or_else(|| usage("--idle takes seconds"))?
            }
            "--tls" => {
                tls = Some(match args.next().as_deref() {
                    Some("need") => ClientAuth::Need,
                    Some("want") => ClientAuth::Want,
                    Some("none") => ClientAuth::None,
                    _ => return Err(usage("--tls takes need, want or none")),
                })
            }
            "--sasl" => {
                let spec = args
                    .next()
                    .ok_or_else(|| usage("--sasl takes USER:PASSWORD"))?;
                let (user, pw) = spec
                    .split_once(':')
                    .ok_or_else(|| usage("--sasl takes USER:PASSWORD"))?;
                users.push((user.to_string(), pw.to_string()));
            }
            "--kerberos" => {
                principals.push(args.next().ok_or_else(|| usage("--kerberos takes NAME"))?)
            }
            other => return Err(usage(&format!("unknown argument {other:?}"))),
        }
    }
    let mut lines = Vec::new();
    let secured = [tls.is_some(), !users.is_empty(), !principals.is_empty()];
    if secured.iter().filter(|&&on| on).count() > 1 {
        return Err(usage("--tls, --sasl and --kerberos: one of them"));
    }
    // Kept to the end: the KDC serves the clients' tickets while the server runs.
    let mut kdc = None;
    let server = match (tls, users.is_empty()) {
        (None, true) if !principals.is_empty() => {
            let k = TestingKdc::start()?;
            let server = TestingServer::start_kerberos(&k)?;
            lines.push(format!("krb5_conf={}", k.krb5_conf().display()));
            lines.push(format!("realm={}", k.realm()));
            lines.push(format!("kdc_dir={}", k.dir().display()));
            for name in &principals {
                let p = k.add_principal(name)?;
                lines.push(format!("keytab.{name}={}", p.keytab_path().display()));
            }
            kdc = Some(k);
            server
        }
        (Some(_), false) => unreachable!("refused above"),
        (Some(auth), true) => {
            let server = TestingServer::start_tls(auth)?;
            let certs = server.certs().expect("a TLS server has certificates");
            let client = certs.client("client")?;
            lines.push(format!("ca={}", certs.ca_path().display()));
            lines.push(format!("cert={}", client.cert_path().display()));
            lines.push(format!("key={}", client.key_path().display()));
            server
        }
        (None, false) => {
            let users: Vec<(&str, &str)> = users
                .iter()
                .map(|(u, p)| (u.as_str(), p.as_str()))
                .collect();
            TestingServer::start_sasl(&users)?
        }
        (None, true) => TestingServer::start()?,
    };
    // All at once: a reader that waits for the first bytes finds the whole first line.
    let mut text = format!("{}\n", server.connect_string());
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    drop(out);
    match while_used {
        Some(dir) => serve_while_used(&dir, idle)?,
        None => wait_for_the_end(starter, read_stdin),
    }
    drop(server);
    drop(kdc);
    Ok(())
}

//! The README's demo: several processes take turns on one ZooKeeper lock, each printing its
//! holder id and fencing token; one is killed while holding, and the lock passes on once the
//! server expires its session.
//!
//! `demo [HOSTS]` starts a local ZooKeeper (on a free port) when none answers at HOSTS
//! (default 127.0.0.1:2181). `demo worker ...` is one participant (the tests use it too).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zklock::{Client, Mutex, Options};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// One participant: `worker --hosts H --path P --rounds N [--hold-ms M] [--counter F]
/// [--history F] [--session-ms T] [--name NAME] [--report-loss]`.
fn worker(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let hosts = arg(args, "--hosts").ok_or("--hosts")?;
    let path = arg(args, "--path").unwrap_or_else(|| "/demo/lock".into());
    let rounds: u32 = arg(args, "--rounds")
        .unwrap_or_else(|| "3".into())
        .parse()?;
    let hold = Duration::from_millis(
        arg(args, "--hold-ms")
            .unwrap_or_else(|| "300".into())
            .parse()?,
    );
    let session = Duration::from_millis(
        arg(args, "--session-ms")
            .unwrap_or_else(|| "3000".into())
            .parse()?,
    );
    let mut opts = Options::default().session_timeout(session);
    if let Some(n) = arg(args, "--name") {
        opts = opts.holder_id(format!("{n}@{}", std::process::id()));
    }
    let client = Client::connect(&hosts, opts)?;
    let mutex = Mutex::new(&client, &path)?;
    let out = std::io::stdout();
    for round in 1..=rounds {
        let guard = mutex.lock()?;
        writeln!(
            out.lock(),
            "HOLD {} token={} round={round}",
            client.holder_id(),
            guard.fencing_token()
        )?;
        if let Some(f) = arg(args, "--history") {
            let mut h = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(f)?;
            writeln!(h, "{} {}", guard.fencing_token(), client.holder_id())?;
        }
        if let Some(f) = arg(args, "--counter") {
            // A non-atomic read-modify-write that only mutual exclusion keeps exact.
            let n: u64 = std::fs::read_to_string(&f)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            std::thread::sleep(Duration::from_millis(1));
            std::fs::write(&f, format!("{}\n", n + 1))?;
        }
        std::thread::sleep(hold);
        if args.iter().any(|a| a == "--report-loss") {
            // After a pause (SIGSTOP) past expiry: does this holder learn the lock is lost?
            let lost = guard.wait_lost(Some(Duration::from_secs(15)));
            writeln!(out.lock(), "LOST lost={lost} is_held={}", guard.is_held())?;
            let r = guard.unlock();
            writeln!(out.lock(), "UNLOCK {r:?}")?;
            continue;
        }
        writeln!(out.lock(), "FREE {} round={round}", client.holder_id())?;
        guard.unlock()?;
    }
    Ok(())
}

fn answers(hosts: &str) -> bool {
    let first = hosts.split(['/', ',']).next().unwrap_or(hosts);
    let Ok(addr) = std::net::ToSocketAddrs::to_socket_addrs(first).map(|mut a| a.next()) else {
        return false;
    };
    let Some(addr) = addr else { return false };
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut buf = String::new();
    s.write_all(b"ruok").is_ok()
        && std::io::Read::read_to_string(&mut s, &mut buf).is_ok()
        && buf == "imok"
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        return worker(&args);
    }
    let mut hosts = args
        .first()
        .cloned()
        .unwrap_or_else(|| "127.0.0.1:2181".into());
    let _server;
    if !answers(&hosts) {
        println!("no ZooKeeper answers at {hosts}: starting a local one");
        let s = zklock::testing::TestingServer::start()?;
        hosts = s.connect_string();
        _server = s;
    }
    let path = format!("/zklock-demo/{}", std::process::id());
    println!("ZooKeeper at {hosts}; 4 processes take turns on {path} (session timeout 3 s)\n");
    let exe = std::env::current_exe()?;
    let (tx, rx) = std::sync::mpsc::channel::<(usize, String)>();
    let mut children = Vec::new();
    for i in 0..4 {
        let mut child = Command::new(&exe)
            .args([
                "worker",
                "--hosts",
                &hosts,
                "--path",
                &path,
                "--rounds",
                "3",
                "--hold-ms",
                "400",
            ])
            .args(["--name", &format!("worker-{i}")])
            .stdout(Stdio::piped())
            .spawn()?;
        let out = child.stdout.take().unwrap();
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send((i, line));
            }
        });
        children.push(child);
    }
    drop(tx);
    let start = Instant::now();
    let mut killed_at: Option<Instant> = None;
    let mut last_token = 0i64;
    for (i, line) in rx {
        let t = start.elapsed().as_secs_f64();
        println!("{t:6.2}s  {line}");
        if let Some(tok) = line
            .split("token=")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse::<i64>().ok())
        {
            assert!(tok > last_token, "fencing tokens must increase");
            last_token = tok;
            if let Some(k) = killed_at.take() {
                println!("        ^ the lock passed on {:.2}s after the holder was killed (its session expired)", k.elapsed().as_secs_f64());
            }
            if i == 1 && killed_at.is_none() && line.contains("round=2") {
                children[1].kill()?;
                killed_at = Some(Instant::now());
                println!(
                    "{t:6.2}s  *** killed worker-1 (pid {}) while it holds the lock ***",
                    children[1].id()
                );
            }
        }
    }
    for mut c in children {
        let _ = c.wait();
    }
    println!("\ndone: every holder got a larger fencing token than the one before");
    Ok(())
}

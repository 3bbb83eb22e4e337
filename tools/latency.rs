//! Round trips through the blocking facade, and what TCP_NODELAY is worth, measured against
//! one server in one run: `cargo run --release --features testing --example latency [HOSTS]`
//! (starts a local ZooKeeper when HOSTS is not given).

use std::time::{Duration, Instant};

use zklock::testing::{Admin, TestingServer};
use zklock::{Client, Mutex, Options};

fn p50(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(n: usize, mut f: impl FnMut(usize)) -> Duration {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i);
        v.push(t.elapsed());
    }
    p50(v)
}

fn cycle_p50(hosts: &str, nodelay: bool, n: usize) -> Duration {
    let c = Client::connect(hosts, Options::default().tcp_nodelay(nodelay)).unwrap();
    let m = Mutex::new(&c, &format!("/latency/lock-{nodelay}")).unwrap();
    for _ in 0..100 {
        m.lock().unwrap().unlock().unwrap();
    }
    time(n, |_| m.lock().unwrap().unlock().unwrap())
}

fn main() {
    let server;
    let hosts = match std::env::args().nth(1) {
        Some(h) => h,
        None => {
            server = TestingServer::start().expect("start ZooKeeper (scripts/install-deps.sh)");
            server.connect_string()
        }
    };
    let n = 1000;
    let admin = Admin::connect(&hosts).unwrap();
    admin.delete_recursive("/latency").unwrap();
    admin.create("/latency", b"").unwrap();
    for i in 0..100 {
        admin.create(&format!("/latency/warm{i}"), b"").unwrap();
        admin.delete(&format!("/latency/warm{i}")).unwrap();
    }
    let create = time(n, |i| {
        admin.create(&format!("/latency/n{i}"), b"x").unwrap()
    });
    let delete = time(n, |i| admin.delete(&format!("/latency/n{i}")).unwrap());
    let list = time(n, |_| {
        admin.children("/latency").unwrap();
    });
    println!("through the facade, p50 of {n} calls each, ZooKeeper at {hosts}:");
    println!("  create        {:>7.0} µs", create.as_secs_f64() * 1e6);
    println!("  get_children  {:>7.0} µs", list.as_secs_f64() * 1e6);
    println!("  delete        {:>7.0} µs", delete.as_secs_f64() * 1e6);
    // Interleave the two settings to share the machine's noise.
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        on.push(cycle_p50(&hosts, true, n / 2));
        off.push(cycle_p50(&hosts, false, n / 2));
    }
    let (on, off) = (p50(on), p50(off));
    println!("uncontended mutex acquire+release (create+list pipelined, then delete), p50:");
    println!("  TCP_NODELAY set       {:>7.0} µs", on.as_secs_f64() * 1e6);
    println!(
        "  TCP_NODELAY not set   {:>7.0} µs",
        off.as_secs_f64() * 1e6
    );
    println!(
        "  ratio set/not set     {:>7.2}",
        on.as_secs_f64() / off.as_secs_f64()
    );
    println!(
        "  cycle / (create + delete) {:>5.2}  (1.00 = one round trip for create+list)",
        on.as_secs_f64() / (create + delete).as_secs_f64()
    );
}

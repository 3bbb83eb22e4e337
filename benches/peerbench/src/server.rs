//! Probes of the server under test through its four-letter words (watches, packets, load), and
//! this process's own memory.

use super::*;

pub(crate) fn four_letter(cmd: &str) -> String {
    let cs = connect_string();
    let first = cs.split(',').next().unwrap_or_default();
    let first = first.split('/').next().unwrap_or_default();
    let mut out = String::new();
    if let Ok(mut s) = TcpStream::connect(first) {
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.write_all(cmd.as_bytes());
        let _ = s.read_to_string(&mut out);
    }
    out
}

pub(crate) fn mntr_lines() -> Vec<(String, String)> {
    four_letter("mntr")
        .lines()
        .filter_map(|l| {
            l.split_once('\t')
                .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// Sum of watchers the server triggered (mntr `zk_sum_node_*_watch_count`).
pub(crate) fn server_watch_triggers() -> i64 {
    mntr_lines()
        .iter()
        .filter(|(k, _)| k.starts_with("zk_sum_node_") && k.ends_with("_watch_count"))
        .map(|(_, v)| v.parse::<f64>().unwrap_or(0.0) as i64)
        .sum()
}

/// mntr `zk_watch_count`: data + child watches armed.
pub(crate) fn server_watch_count() -> i64 {
    mntr_lines()
        .iter()
        .find(|(k, _)| k == "zk_watch_count")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(-1)
}

/// wchs "Total watches" (data watches only in 3.8).
pub(crate) fn server_watches_armed() -> i64 {
    four_letter("wchs")
        .lines()
        .find(|l| l.contains("Total watches"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// W4's "queue formed": the server's armed-watch count unchanged for 1 s (four polls 250 ms
/// apart), at most `limit`. Returns the count.
pub(crate) fn wait_queue_formed(limit: Duration) -> i64 {
    let t = Instant::now();
    let (mut prev, mut stable) = (-1, 0);
    while t.elapsed() < limit {
        let w = server_watch_count();
        stable = if w == prev { stable + 1 } else { 0 };
        prev = w;
        if stable >= 4 && t.elapsed() > Duration::from_secs(1) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    prev
}

/// mntr `zk_packets_received`: every packet the server has read from its clients.
pub(crate) fn server_packets_received() -> i64 {
    mntr_lines()
        .iter()
        .find(|(k, _)| k == "zk_packets_received")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(-1)
}

/// One sample of the server's load: (now_ns, CPU seconds of the server process `BENCH_ZK_PID`
/// (utime + stime), if given and readable, mntr `zk_packets_received`).
pub(crate) type LoadSample = (u64, Option<f64>, i64);

pub(crate) fn server_load_sample() -> LoadSample {
    let cpu = std::env::var("BENCH_ZK_PID").ok().and_then(|pid| {
        let st = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let f: Vec<&str> = st.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
        // /proc counts in USER_HZ clock ticks, 100 a second on Linux
        Some(ticks / 100.0)
    });
    (now_ns(), cpu, server_packets_received())
}

/// The server's load between two samples, into `m`: `<prefix>_server_cpu_pct` (% of one core),
/// `<prefix>_server_pkts_per_s` and `<prefix>_s` (the window).
pub(crate) fn server_load(a: LoadSample, b: LoadSample, prefix: &str, m: &mut Obj) {
    let dt = b.0.saturating_sub(a.0) as f64 / 1e9;
    let cpu = match (a.1, b.1) {
        (Some(x), Some(y)) if dt > 0.0 => J::Num(r1(100.0 * (y - x) / dt)),
        _ => J::Null,
    };
    m.put(&format!("{prefix}_server_cpu_pct"), cpu);
    m.put(
        &format!("{prefix}_server_pkts_per_s"),
        if dt > 0.0 {
            J::Num(r1((b.2 - a.2) as f64 / dt))
        } else {
            J::Null
        },
    );
    m.num(&format!("{prefix}_s"), r2(dt));
}

/// (VmRSS KiB, Threads) of this process.
pub(crate) fn proc_status() -> (i64, i64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        s.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1)
    };
    (field("VmRSS:"), field("Threads:"))
}

/// Resident memory of this process, bytes (VmRSS).
pub(crate) fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

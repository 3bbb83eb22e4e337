//! TLS beside plaintext in one process (issue 27): the connect time, W1 and W2 against a
//! plaintext and a TLS-only server in alternating rounds.

use super::*;

/// The connect time: `Client::connect` until the session is established, `n` connects after 2
/// unrecorded ones, each client closed before the next. With `tick` the options say the
/// servers' tick (`Options::server_tick_time`), so the connect does not ask the server for it
/// (`conf`, over TLS a handshake of its own). Emits a `CONNECT` row, returns its metrics.
pub(crate) fn connect_time(b: &Bench, n: usize, tick: Option<Duration>) -> J {
    let options = match tick {
        Some(t) => b.options.clone().server_tick_time(t),
        None => b.options.clone(),
    };
    let one = || {
        let t = now_ns();
        let c = Client::connect(&b.hosts, options.clone()).unwrap_or_else(|e| {
            log!("connect failed: {e}");
            std::process::exit(1)
        });
        let dt = now_ns() - t;
        c.close();
        dt
    };
    for _ in 0..2 {
        one();
    }
    let xs: Vec<u64> = (0..n).map(|_| one()).collect();
    let mut met = Obj::new();
    lat_summary(&mut met, "connect", &xs);
    let met = met.take();
    emit(
        b.recipe.name(),
        "CONNECT",
        b.params(Obj::new().int("connects", n).int("warmup", 2).put(
            "tick",
            J::Str(if tick.is_some() { "given" } else { "asked" }.into()),
        )),
        met.clone(),
    );
    met
}

/// One round of the TLS mode: per transport (0 plaintext, 1 TLS), the metrics of its
/// `CONNECT` rows (the tick asked, the tick given), `W1` and `W2` rows.
pub(crate) struct TlsRound {
    pub(crate) connect: [J; 2],
    pub(crate) connect_given: [J; 2],
    pub(crate) w1: [J; 2],
    pub(crate) w2: [J; 2],
}

/// `peerbench TLS [clients]` (issue 27's benchmark: TLS beside plaintext in one run). Starts two
/// servers with the same settings (`zklock::testing`: a plaintext `TestingServer::start()` and
/// a TLS-only `TestingServer::start_tls(ClientAuth::None)`, server-authenticated: the client
/// has only the CA), then runs `BENCH_TLS_ROUNDS` (2) rounds; in each, the connect time
/// (`BENCH_TLS_CONNECTS`, 20 connects), W1 and W2 with `clients` (8) sessions, each against
/// one server then the other, the order alternating from round to round (`BENCH_TLS_FIRST`:
/// `plain` or `tls` first in round 1). Every measurement is a row (params `transport`, `round`);
/// then one `TLS` row: TLS ÷ plaintext per round, median over rounds, and the targets (W1 p50
/// at most 1.25×, W2 at least 0.85×). The handshake cost per connect is the TLS connect time
/// less the plaintext one.
pub(crate) fn tls(recipe: Recipe, clients: usize) {
    use zklock::testing::{ClientAuth, TestingServer};
    if recipe == Recipe::Ffi {
        log!("the TLS mode runs through the Rust API (the C ABI's connect takes no options here)");
        std::process::exit(3);
    }
    let rounds: usize = env_num("BENCH_TLS_ROUNDS", 2).max(1);
    let connects: usize = env_num("BENCH_TLS_CONNECTS", 20).max(1);
    let first = env_str("BENCH_TLS_FIRST", "plain");
    let tls_first = match first.as_str() {
        "plain" => false,
        "tls" => true,
        o => {
            log!("BENCH_TLS_FIRST must be plain or tls, not {o:?}");
            std::process::exit(2)
        }
    };
    let started = |what: &str, r: std::io::Result<TestingServer>| {
        r.unwrap_or_else(|e| {
            log!("start the {what} server: {e}");
            std::process::exit(1)
        })
    };
    let plain_server = started("plaintext", TestingServer::start());
    let tls_server = started("TLS", TestingServer::start_tls(ClientAuth::None));
    let certs = tls_server.certs().expect("a TLS server has certificates");
    let options = Options::default().session_timeout(Duration::from_secs(10));
    let mut benches = [
        Bench {
            recipe,
            hosts: plain_server.connect_string(),
            options: options.clone(),
            tags: Vec::new(),
        },
        Bench {
            recipe,
            hosts: tls_server.connect_string(),
            options: options.tls(zklock::Tls::new().ca_file(certs.ca_path())),
            tags: Vec::new(),
        },
    ];
    const NAMES: [&str; 2] = ["plain", "tls"];
    log!(
        "TLS beside plaintext: {} and {}, {rounds} round(s), {connects} connects, W1, W2 with {clients} clients",
        benches[0].hosts,
        benches[1].hosts
    );
    let mut done: Vec<TlsRound> = Vec::new();
    for r in 0..rounds {
        let order = if (r % 2 == 1) == tls_first {
            [0, 1]
        } else {
            [1, 0]
        };
        for (i, b) in benches.iter_mut().enumerate() {
            b.tags = vec![
                ("transport".into(), J::Str(NAMES[i].into())),
                ("round".into(), J::Int(r as i64 + 1)),
            ];
        }
        let step = |f: &dyn Fn(&Bench) -> J| {
            let mut out = [J::Null, J::Null];
            for i in order {
                out[i] = f(&benches[i]);
            }
            out
        };
        done.push(TlsRound {
            connect: step(&|b| connect_time(b, connects, None)),
            connect_given: step(&|b| connect_time(b, connects, Some(SERVER_TICK))),
            w1: step(&|b| w1(b)),
            w2: step(&|b| w2(b, clients)),
        });
    }

    // per transport: the median over rounds; TLS ÷ plaintext: per round, then the median
    let both = |f: &dyn Fn(&TlsRound) -> &[J; 2], k: &str| -> [Option<f64>; 2] {
        [0, 1].map(|i| median(done.iter().filter_map(|r| f(r)[i].get(k)).collect()))
    };
    let ratio = |f: &dyn Fn(&TlsRound) -> &[J; 2], k: &str| -> Option<f64> {
        median(
            done.iter()
                .filter_map(|r| Some(f(r)[1].get(k)? / f(r)[0].get(k).filter(|&x| x > 0.0)?))
                .collect(),
        )
    };
    let w1p50 = both(&|r| &r.w1, "cycle_p50_us");
    let w1p99 = both(&|r| &r.w1, "cycle_p99_us");
    let w2 = both(&|r| &r.w2, "acq_per_s");
    let conn = both(&|r| &r.connect, "connect_p50_us");
    let w1_ratio = ratio(&|r| &r.w1, "cycle_p50_us");
    let w1_p99_ratio = ratio(&|r| &r.w1, "cycle_p99_us");
    let w2_ratio = ratio(&|r| &r.w2, "acq_per_s");
    let conn_given = both(&|r| &r.connect_given, "connect_p50_us");
    let extra = |f: &dyn Fn(&TlsRound) -> &[J; 2]| {
        median(
            done.iter()
                .filter_map(|r| {
                    Some(f(r)[1].get("connect_p50_us")? - f(r)[0].get("connect_p50_us")?)
                })
                .collect(),
        )
    };
    let handshake = extra(&|r| &r.connect);
    let handshake_given = extra(&|r| &r.connect_given);
    let opt = |x: Option<f64>, scale: f64, round: fn(f64) -> f64| match x {
        Some(x) => J::Num(round(x / scale)),
        None => J::Null,
    };
    let met = Obj::new()
        .put("w1_p50_plain_us", opt(w1p50[0], 1.0, r1))
        .put("w1_p50_tls_us", opt(w1p50[1], 1.0, r1))
        .put("w1_p50_ratio", opt(w1_ratio, 1.0, r2))
        .put("w1_p99_plain_us", opt(w1p99[0], 1.0, r1))
        .put("w1_p99_tls_us", opt(w1p99[1], 1.0, r1))
        .put("w1_p99_ratio", opt(w1_p99_ratio, 1.0, r2))
        .put("w2_acq_per_s_plain", opt(w2[0], 1.0, r1))
        .put("w2_acq_per_s_tls", opt(w2[1], 1.0, r1))
        .put("w2_ratio", opt(w2_ratio, 1.0, r2))
        .put("connect_plain_ms", opt(conn[0], 1e3, r2))
        .put("connect_tls_ms", opt(conn[1], 1e3, r2))
        .put("handshake_ms", opt(handshake, 1e3, r2))
        .put("connect_tick_given_plain_ms", opt(conn_given[0], 1e3, r2))
        .put("connect_tick_given_tls_ms", opt(conn_given[1], 1e3, r2))
        .put("handshake_tick_given_ms", opt(handshake_given, 1e3, r2))
        .put(
            "w1_target_met",
            w1_ratio.map_or(J::Null, |x| J::Bool(x <= 1.25)),
        )
        .put(
            "w2_target_met",
            w2_ratio.map_or(J::Null, |x| J::Bool(x >= 0.85)),
        )
        .take();
    log!(
        "TLS ÷ plaintext: W1 p50 {:.2}× (target ≤ 1.25), W1 p99 {:.2}×, W2 {clients} clients {:.2}× (target ≥ 0.85); \
         connect {:.2} ms vs {:.2} ms (TLS costs {:.2} ms; {:.2} ms with the tick given)",
        w1_ratio.unwrap_or(f64::NAN),
        w1_p99_ratio.unwrap_or(f64::NAN),
        w2_ratio.unwrap_or(f64::NAN),
        conn[1].unwrap_or(f64::NAN) / 1e3,
        conn[0].unwrap_or(f64::NAN) / 1e3,
        handshake.unwrap_or(f64::NAN) / 1e3,
        handshake_given.unwrap_or(f64::NAN) / 1e3
    );
    let params = Obj::new()
        .int("clients", clients)
        .int("rounds", rounds)
        .int("connects", connects)
        .put("first", J::Str(first))
        .int("iters", env_num::<usize>("BENCH_ITERS", 2000))
        .num("duration_s", env_num("BENCH_DURATION", 10.0))
        .put("client_auth", J::Str("none".into()))
        .take();
    emit(recipe.name(), "TLS", params, met);
    drop(benches);
    drop(tls_server);
    drop(plain_server);
}

/// The `tickTime` of `zklock::testing`'s servers, for the connects that say it.
pub(crate) const SERVER_TICK: Duration = Duration::from_millis(500);

/// The median (mean of the middle two for an even count); `None` for no values.
pub(crate) fn median(mut xs: Vec<f64>) -> Option<f64> {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(xs[n / 2]),
        _ => Some((xs[n / 2 - 1] + xs[n / 2]) / 2.0),
    }
}

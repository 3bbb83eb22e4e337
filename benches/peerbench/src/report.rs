//! The results: a tiny JSON writer, percentiles and latency summaries, one JSON line per
//! result on stdout.

use super::*;

#[derive(Clone)]
pub(crate) enum J {
    Null,
    Bool(bool),
    Int(i64),
    Num(f64),
    Str(String),
    Obj(Vec<(String, J)>),
}

impl J {
    pub(crate) fn write(&self, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Int(i) => out.push_str(&i.to_string()),
            J::Num(x) if x.is_finite() => out.push_str(&format!("{x:?}")),
            J::Num(_) => out.push_str("null"),
            J::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            J::Obj(kv) => {
                out.push('{');
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    J::Str(k.clone()).write(out);
                    out.push_str(": ");
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Builds a JSON object: `obj![("k", J::Int(1)), ...]`.
pub(crate) struct Obj(pub(crate) Vec<(String, J)>);

impl Obj {
    pub(crate) fn new() -> Obj {
        Obj(Vec::new())
    }
    pub(crate) fn put(&mut self, k: &str, v: J) -> &mut Obj {
        self.0.push((k.to_string(), v));
        self
    }
    pub(crate) fn int(&mut self, k: &str, v: impl TryInto<i64>) -> &mut Obj {
        self.put(k, J::Int(v.try_into().unwrap_or(i64::MAX)))
    }
    pub(crate) fn num(&mut self, k: &str, v: f64) -> &mut Obj {
        self.put(k, J::Num(v))
    }
    pub(crate) fn take(&mut self) -> J {
        J::Obj(std::mem::take(&mut self.0))
    }
}

impl J {
    /// A number of an object: `metrics.get("cycle_p50_us")`.
    pub(crate) fn get(&self, k: &str) -> Option<f64> {
        let J::Obj(kv) = self else { return None };
        kv.iter()
            .find(|(key, _)| key == k)
            .and_then(|(_, v)| match v {
                J::Int(i) => Some(*i as f64),
                J::Num(x) => Some(*x),
                _ => None,
            })
    }
}

pub(crate) fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(crate) fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// The harness's percentile: the k-th smallest with k = round(p/100·n + 0.5) − 1.
pub(crate) fn pct(sorted: &[u64], p: f64) -> u64 {
    let n = sorted.len();
    let k = ((p / 100.0 * n as f64 + 0.5).round() as i64 - 1).clamp(0, n as i64 - 1);
    sorted[k as usize]
}

pub(crate) fn lat_summary(m: &mut Obj, prefix: &str, xs: &[u64]) {
    let keys = ["p50", "p99", "mean", "max"].map(|s| format!("{prefix}_{s}_us"));
    if xs.is_empty() {
        for k in &keys {
            m.put(k, J::Null);
        }
        return;
    }
    let mut s = xs.to_vec();
    s.sort_unstable();
    let mean = s.iter().map(|&x| x as f64).sum::<f64>() / s.len() as f64;
    m.num(&keys[0], r1(pct(&s, 50.0) as f64 / 1e3));
    m.num(&keys[1], r1(pct(&s, 99.0) as f64 / 1e3));
    m.num(&keys[2], r1(mean / 1e3));
    m.num(&keys[3], r1(*s.last().unwrap() as f64 / 1e3));
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Local-free ISO timestamp (UTC).
pub(crate) fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // civil_from_days (H. Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub(crate) fn emit(recipe: &str, workload: &str, params: J, metrics: J) {
    let lang = if recipe == "ffi" {
        "rust (C ABI)"
    } else {
        "rust"
    };
    let rec = Obj::new()
        .put("impl", J::Str("zklock".into()))
        .put("recipe", J::Str(recipe.into()))
        .put("workload", J::Str(workload.into()))
        .put("params", params)
        .put("metrics", metrics)
        .put("lib_version", J::Str(env!("CARGO_PKG_VERSION").into()))
        .put("lang", J::Str(lang.into()))
        .put("host", J::Str(hostname()))
        .put("ts", J::Str(timestamp()))
        .put("run_id", J::Str(env_str("BENCH_RUN_ID", "")))
        .take();
    let mut s = String::new();
    rec.write(&mut s);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{s}");
    let _ = out.flush();
}

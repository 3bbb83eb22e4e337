//! `cargo run -p zklock-model --example count -- HORIZON [BUG]`: one check, its state count
//! and trace.
fn main() {
    let mut args = std::env::args().skip(1);
    let h: u8 = args.next().expect("HORIZON").parse().expect("a number");
    let bug = args
        .next()
        .map(|b| zklock_model::Bug::named(&b).expect("a bug's name"));
    let mut c = zklock_model::Config::new(bug, false);
    c.horizon = h;
    let t = std::time::Instant::now();
    let o = zklock_model::check(c, 2);
    println!("horizon {h}: {} states in {:?}", o.states, t.elapsed());
    if let Some((p, tr)) = o.violation {
        println!("\"{p}\" violated:\n{tr}");
    }
}

//! The hold model, checked by a model checker (`model/`, stateright): today's rules must pass,
//! and every seeded bug (a rule the library once had, put back) must be found with a trace.
//!
//! `cargo test --test model` runs it all and prints the states explored;
//! `ZKLOCK_MODEL_SEED_BUG=<name>` runs one seeded variant and fails with its trace;
//! `ZKLOCK_MODEL_SEED_BUG=list` prints the names; `ZKLOCK_MODEL_BOUND=large` checks a longer
//! clock and one more fault (the long run).

use zklock_model::{check, Bug, Config};

fn large() -> bool {
    std::env::var("ZKLOCK_MODEL_BOUND").is_ok_and(|b| b == "large")
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn the_hold_model_holds_and_every_seeded_bug_is_found() {
    let asked = std::env::var("ZKLOCK_MODEL_SEED_BUG").ok();
    if asked.as_deref() == Some("list") {
        for b in Bug::ALL {
            println!("{}", b.name());
        }
        return;
    }
    if let Some(name) = asked {
        let bug = Bug::named(&name).unwrap_or_else(|| {
            panic!("no seeded bug named {name} (ZKLOCK_MODEL_SEED_BUG=list names them)")
        });
        let o = check(Config::new(Some(bug), large()), threads());
        match o.violation {
            Some((property, trace)) => panic!(
                "{name}: \"{property}\" violated ({} states explored):\n{trace}",
                o.states
            ),
            None => panic!("{name}: not found in {} states", o.states),
        }
    }
    let today = check(Config::new(None, large()), threads());
    println!("today's rules: {} states explored", today.states);
    if let Some((property, trace)) = today.violation {
        panic!("today's rules violate \"{property}\":\n{trace}");
    }
    assert!(
        today.not_vacuous,
        "the model never had both clients hold in turn"
    );
    for bug in Bug::ALL {
        let o = check(Config::new(Some(bug), large()), threads());
        match o.violation {
            Some((property, trace)) => {
                println!(
                    "seeded bug {}: \"{property}\" violated ({} states):\n{trace}",
                    bug.name(),
                    o.states
                )
            }
            None => panic!(
                "seeded bug {} not found in {} states: the model misses it",
                bug.name(),
                o.states
            ),
        }
    }
}

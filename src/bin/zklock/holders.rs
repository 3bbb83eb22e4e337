//! `zklock holders` and `zklock revoke`: the lock's participants, and the requests to let go.

use std::io::Write;
use std::process::ExitCode;

use zklock::{Client, LockKind, Protocol};

use crate::cli::{HoldersArgs, Kind, RevokeArgs};
use crate::exit_codes::{fail, EXIT_NOPERM, EXIT_UNKNOWN_LAYOUT};
use crate::make_lock;

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
        LockKind::Election => (Kind::Election, Protocol::Curator),
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
pub(crate) fn holders(client: &Client, args: &HoldersArgs) -> ExitCode {
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
                // A free path that has children now became a lock after our look at it (its
                // holder would be missed until the next change): look again.
                Ok((children, w)) if lock.is_none() && !children.is_empty() => {
                    match kind_at(client, &args.path, args.kind.asked()) {
                        Ok(Some(k)) => {
                            kind = Some(k);
                            continue;
                        }
                        // Children that make no lock: the watch tells of their next change.
                        Ok(None) => Some(w),
                        Err(code) => return code,
                    }
                }
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
pub(crate) fn revoke(client: &Client, args: &RevokeArgs) -> ExitCode {
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
        (None, Some(l)) => match l.as_revocable().map(|r| r.revoke_holders()) {
            Some(Ok(nodes)) => nodes,
            Some(Err(e)) => return fail(&e),
            None => {
                eprintln!(
                    "zklock: {}: its holders cannot be asked to let go (a semaphore's cannot)",
                    args.path
                );
                return ExitCode::from(crate::exit_codes::EXIT_USAGE);
            }
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

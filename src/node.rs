//! Lock-node naming per protocol (Curator / kazoo), sequence parsing, and the unique id that
//! lets a create that lost its reply find its node again (Curator's "protected" mode).

/// How lock nodes are named, so that other ZooKeeper clients can share a lock path.
///
/// Whatever the protocol, zklock orders contenders by the *superset* rule: every child whose
/// name ends in a (possibly signed) 10-digit sequence number is a contender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// Apache Curator's `InterProcessMutex` / `InterProcessReadWriteLock` names
    /// (`_c_<uuid>-lock-<seq>`, `_c_<uuid>-__WRIT__<seq>`, `_c_<uuid>-__READ__<seq>`).
    #[default]
    Curator,
    /// Python kazoo's `Lock` / `WriteLock` / `ReadLock` names
    /// (`<hex>__lock__<seq>`, `<hex>__rlock__<seq>`).
    Kazoo,
}

/// The kind of lock found at a path ([`Client::lock_kind`](crate::Client::lock_kind)), from
/// the names of its nodes: what `zklock holders` lists without being told.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockKind {
    /// Nothing there: no node at the path, or a node without children (nobody holds or waits).
    Free,
    /// A mutex (or a semaphore mutex) in the given naming.
    Mutex(Protocol),
    /// A read-write lock in the given naming.
    ReadWrite(Protocol),
    /// A semaphore, in Curator's layout (`leases`, `locks`) or kazoo's (its size as the path's
    /// data, lease nodes under it); its lease count when the layout stores it (kazoo's).
    Semaphore(Protocol, Option<u32>),
    /// A simple lock: an ephemeral node at the path itself.
    Simple,
    /// A leader election in Curator's `LeaderLatch` layout (one under the kazoo protocol is a
    /// kazoo lock: [`LockKind::Mutex`]).
    Election,
    /// Children that are no lock layout zklock knows; the text says what was found.
    Unknown(String),
}

/// The kind of lock a path's node and children show (`ephemeral`: the path's node is one;
/// `data`: its data).
pub(crate) fn classify(children: &[String], ephemeral: bool, data: &[u8]) -> LockKind {
    if ephemeral {
        return LockKind::Simple;
    }
    if children.is_empty() {
        return LockKind::Free;
    }
    let has = |pat: &str| children.iter().any(|c| c.contains(pat));
    let contenders: Vec<&String> = children.iter().filter(|c| sequence(c).is_some()).collect();
    if children.iter().any(|c| c == "leases" || c == "locks")
        && children
            .iter()
            .all(|c| c == "leases" || c == "locks" || c == "lease")
    {
        return LockKind::Semaphore(Protocol::Curator, None);
    }
    if has("__WRIT__") || has("__READ__") {
        return LockKind::ReadWrite(Protocol::Curator);
    }
    if has("__rlock__") {
        return LockKind::ReadWrite(Protocol::Kazoo);
    }
    if contenders.len() == children.len() {
        if has("-latch-") {
            return LockKind::Election;
        }
        if has("-lock-") {
            return LockKind::Mutex(Protocol::Curator);
        }
        if has("__lock__") {
            // kazoo's Lock and WriteLock name their nodes alike: a mutex as far as holding goes.
            return LockKind::Mutex(Protocol::Kazoo);
        }
    }
    // kazoo's Semaphore keeps its size in the path's data and a lease node per holder.
    if let Some(n) = std::str::from_utf8(data)
        .ok()
        .and_then(|d| d.trim().parse::<u32>().ok())
    {
        return LockKind::Semaphore(Protocol::Kazoo, Some(n));
    }
    let mut names: Vec<&str> = children.iter().map(String::as_str).take(3).collect();
    if children.len() > 3 {
        names.push("...");
    }
    LockKind::Unknown(format!(
        "its children ({}) are no lock layout zklock knows (Curator or kazoo mutex, read-write lock or semaphore, or a simple lock)",
        names.join(", ")
    ))
}

/// What a participant's node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Exclusive lock (mutex).
    Lock,
    /// Exclusive half of a read-write lock.
    Write,
    /// Shared half of a read-write lock.
    Read,
    /// A participant of a leader election (Curator's `LeaderLatch`; kazoo's `Election` is a
    /// kazoo lock).
    Latch,
}

/// A fresh unique id of one acquire attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttemptId(uuid::Uuid);

impl AttemptId {
    pub(crate) fn new() -> AttemptId {
        AttemptId(uuid::Uuid::new_v4())
    }

    /// The text of the id as it appears in the node name under `protocol`.
    pub(crate) fn text(&self, protocol: Protocol) -> String {
        match protocol {
            Protocol::Curator => self.0.hyphenated().to_string(),
            Protocol::Kazoo => self.0.simple().to_string(),
        }
    }

    /// The node name prefix (before the server appends the sequence number).
    pub(crate) fn prefix(&self, protocol: Protocol, kind: Kind) -> String {
        let id = self.text(protocol);
        match (protocol, kind) {
            (Protocol::Curator, Kind::Lock) => format!("_c_{id}-lock-"),
            (Protocol::Curator, Kind::Write) => format!("_c_{id}-__WRIT__"),
            (Protocol::Curator, Kind::Read) => format!("_c_{id}-__READ__"),
            (Protocol::Curator, Kind::Latch) => format!("_c_{id}-latch-"),
            (Protocol::Kazoo, Kind::Lock | Kind::Write | Kind::Latch) => format!("{id}__lock__"),
            (Protocol::Kazoo, Kind::Read) => format!("{id}__rlock__"),
        }
    }
}

/// The read node a participant holding the write node `write_name` takes to downgrade: a
/// non-sequential `<read prefix><the write node's sequence digits>` (as Curator 5.5+ does,
/// CURATOR-621). `None` if `write_name` is not a write node of `protocol` with a number.
pub(crate) fn downgrade_name(write_name: &str, protocol: Protocol) -> Option<String> {
    let marker = match protocol {
        Protocol::Curator => "__WRIT__",
        Protocol::Kazoo => "__lock__",
    };
    let seq = write_name
        .rfind(marker)
        .map(|i| &write_name[i + marker.len()..])
        .filter(|s| sequence(&format!("x{s}")).is_some())?;
    Some(format!(
        "{}{seq}",
        AttemptId::new().prefix(protocol, Kind::Read)
    ))
}

/// What a revocation request writes into the holder's node (Curator's `REVOKE_MESSAGE`).
pub(crate) const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Whether a node's data asks its holder to let go: Curator's message, or (in a simple lock's
/// node) the message followed by the attempt id it was written for ([`revoke_request`]).
pub(crate) fn is_revoke_request(data: &[u8]) -> bool {
    data == REVOKE_MESSAGE
        || data.starts_with(REVOKE_MESSAGE)
            && simple_lock_parts(data).0.as_bytes() == REVOKE_MESSAGE
}

/// What a revocation request writes into a node with data `data`, and the witness the write
/// must be checked against: a simple lock's node keeps its attempt id (so a later request
/// still finds the hold's witness), and is written only while that witness exists.
pub(crate) fn revoke_request(node_path: &str, data: &[u8]) -> (Vec<u8>, Option<String>) {
    match simple_lock_parts(data) {
        (_, Some(attempt)) => {
            let mut message = REVOKE_MESSAGE.to_vec();
            message.extend_from_slice(ATTEMPT_MARK.as_bytes());
            message.extend_from_slice(attempt.as_bytes());
            (message, Some(witness_path(node_path, &attempt)))
        }
        (_, None) => (REVOKE_MESSAGE.to_vec(), None),
    }
}

/// Appended to a lock node's data by a holder that listens for revocation requests (that made
/// its lock revocable), so that whoever asks can tell it will hear: Curator's `makeRevocable`
/// leaves no such mark, and a request overwrites it.
pub(crate) const REVOCABLE_MARK: &str = "\nzklock-revocable";

/// `data` without the revocable mark, and whether it had it.
pub(crate) fn revocable_parts(data: &[u8]) -> (&[u8], bool) {
    match data.strip_suffix(REVOCABLE_MARK.as_bytes()) {
        Some(rest) => (rest, true),
        None => (data, false),
    }
}

/// `data` with the revocable mark.
pub(crate) fn with_revocable_mark(data: &[u8]) -> Vec<u8> {
    let mut marked = revocable_parts(data).0.to_vec();
    marked.extend_from_slice(REVOCABLE_MARK.as_bytes());
    marked
}

/// The holder id in a queue node's data, and whether its holder listens for revocation.
pub(crate) fn holder_parts(data: &[u8]) -> (String, bool) {
    let (rest, revocable) = revocable_parts(data);
    (
        std::str::from_utf8(rest).unwrap_or_default().to_string(),
        revocable,
    )
}

/// Between the holder id and the attempt id in a simple lock's node data.
pub(crate) const ATTEMPT_MARK: &str = "\nzklock-attempt:";

/// A simple lock node's data: the holder id, then the id of the attempt that made it.
pub(crate) fn simple_lock_data(holder_id: &str, attempt: &str) -> Vec<u8> {
    format!("{holder_id}{ATTEMPT_MARK}{attempt}").into_bytes()
}

/// The holder id and the attempt id in a simple lock node's data (the attempt id is absent
/// from nodes made by zklock before 0.3, and after a revocation request overwrote the data).
pub(crate) fn simple_lock_parts(data: &[u8]) -> (String, Option<String>) {
    let text = String::from_utf8_lossy(revocable_parts(data).0);
    match text.split_once(ATTEMPT_MARK) {
        Some((holder, attempt)) => (holder.to_string(), Some(attempt.to_string())),
        None => (text.into_owned(), None),
    }
}

/// The witness of a simple-lock hold: an ephemeral sibling of the lock node whose name carries
/// the attempt's id, created with the lock node in one `multi` and deleted with it in one
/// `multi` that first checks it exists. No other hold can meet that check, so a delete (or a
/// revocation request) applied late, after the node changed hands, fails whole
/// (`docs/hold-model.md`, "One release path").
pub(crate) fn witness_path(lock_path: &str, attempt: &str) -> String {
    format!("{lock_path}.witness-{attempt}")
}

/// The name prefix of a new lease node of a semaphore in Curator's layout (`_c_<uuid>-lease-`).
pub(crate) fn lease_prefix() -> String {
    format!("_c_{}-lease-", AttemptId::new().text(Protocol::Curator))
}

/// Where a semaphore keeps its guarding mutex and its leases: Curator `P/locks` and `P/leases`,
/// kazoo `P-__lock__` (a sibling) and `P` itself.
pub(crate) fn semaphore_layout(path: &str, protocol: Protocol) -> (String, String) {
    match protocol {
        Protocol::Curator => (format!("{path}/locks"), format!("{path}/leases")),
        Protocol::Kazoo => (format!("{path}-__lock__"), path.to_string()),
    }
}

/// The sequence number at the end of a child's name, as the server wrote it (`%010d` of the
/// parent's signed 32-bit counter: `0000000042`, and after the wrap `-000000005` or
/// `-2147483648`; or 19 digits for 64-bit sequences), placed in queue order. `None` for names
/// that are not contenders.
///
/// The counter wraps from 2147483647 to -2147483648 and goes on counting up, so the creation
/// order is the counter's order modulo 2³²: negative numbers come *after* the positive ones
/// (a node created after the wrap must never sort ahead of the holder).
pub(crate) fn sequence(name: &str) -> Option<i64> {
    let b = name.as_bytes();
    let digits = b.iter().rev().take_while(|c| c.is_ascii_digit()).count();
    let signed = |start: usize| start >= 1 && b[start - 1] == b'-';
    if digits >= 19 {
        return name[b.len() - 19..].parse().ok();
    }
    let (start, negative) = match digits {
        // `-` and 9 digits: a negative number in the 10-character field.
        9 if signed(b.len() - 9) => (b.len() - 9, true),
        // 10 digits: negative only if the `-` before them is a sign, not a separator: a sign
        // follows a non-alphanumeric character (Curator's `lock--2147483648`, kazoo's
        // `__lock__-2147483648`); after a letter or digit it separates (Curator's
        // `lock-0000000001`, the C recipe's `x-<session>-0000000001`).
        n if n >= 10 => {
            let start = b.len() - 10;
            let sign = signed(start) && (start < 2 || !b[start - 2].is_ascii_alphanumeric());
            (start, sign)
        }
        _ => return None,
    };
    let value: i64 = name[start..].parse().ok()?;
    let value = if negative { -value } else { value };
    // Creation order of the 32-bit counter (see above).
    Some(value.rem_euclid(1 << 32))
}

/// Whether a contender's node is a reader (shared) under any protocol we know.
pub(crate) fn is_reader(name: &str) -> bool {
    name.contains("__READ__") || name.contains("__rlock__")
}

/// Whether a contender's node may be (or become) a writer that downgrades, which puts a read
/// node *ahead* of later waiters: Curator's write and read nodes, kazoo's read nodes, and kazoo's
/// `__lock__` nodes (a kazoo-named writer cannot be told from a kazoo mutex).
pub(crate) fn may_downgrade(name: &str) -> bool {
    name.contains("__WRIT__") || is_reader(name) || name.contains("__lock__")
}

/// Whether sequence number `a` (from [`sequence`]) was given before `b`. The 32-bit counter
/// wraps again and again (after 2³² changes under one parent, `-0000000001` is followed by
/// `0000000000`), so its numbers compare as serial numbers (RFC 1982): `a` is before `b` when
/// `b` is less than 2³¹ steps ahead of it. Numbers of one queue are always far closer than that.
/// 64-bit sequences (19 digits) compare as integers.
pub(crate) fn seq_before(a: i64, b: i64) -> bool {
    const WRAP: i64 = 1 << 32;
    if (0..WRAP).contains(&a) && (0..WRAP).contains(&b) {
        (b as u32).wrapping_sub(a as u32) as i32 > 0
    } else {
        a < b
    }
}

/// [`seq_before`] as an ordering.
pub(crate) fn seq_cmp(a: i64, b: i64) -> std::cmp::Ordering {
    if a == b {
        std::cmp::Ordering::Equal
    } else if seq_before(a, b) {
        std::cmp::Ordering::Less
    } else {
        std::cmp::Ordering::Greater
    }
}

/// A contender: a child of the lock path with a sequence number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contender {
    pub(crate) name: String,
    pub(crate) seq: i64,
}

/// The contenders among `children`, in queue order (by sequence number in creation order, then
/// name).
pub(crate) fn contenders(children: Vec<String>) -> Vec<Contender> {
    let mut v: Vec<Contender> = children
        .into_iter()
        .filter_map(|name| sequence(&name).map(|seq| Contender { name, seq }))
        .collect();
    v.sort_by(|a, b| seq_cmp(a.seq, b.seq).then_with(|| a.name.cmp(&b.name)));
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_revocable_mark_comes_off_every_layout() {
        use super::*;
        let marked = with_revocable_mark(b"host:1");
        assert_eq!(holder_parts(&marked), ("host:1".to_string(), true));
        assert_eq!(with_revocable_mark(&marked), marked, "marked once");
        assert_eq!(holder_parts(b"host:1"), ("host:1".to_string(), false));
        let simple = with_revocable_mark(&simple_lock_data("host:1", "a1"));
        assert_eq!(
            simple_lock_parts(&simple),
            ("host:1".to_string(), Some("a1".to_string()))
        );
        let (request, _) = revoke_request("/p", &simple);
        assert!(is_revoke_request(&request));
        assert!(!is_revoke_request(&simple));
    }

    #[test]
    fn every_layout_is_told_apart_and_foreign_children_are_named() {
        let v = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(classify(&[], true, b"id"), LockKind::Simple);
        assert_eq!(classify(&[], false, b""), LockKind::Free);
        assert_eq!(
            classify(&v(&["_c_0f-lock-0000000001"]), false, b""),
            LockKind::Mutex(Protocol::Curator)
        );
        assert_eq!(
            classify(
                &v(&["ab__lock__0000000003", "cd__lock__0000000004"]),
                false,
                b""
            ),
            LockKind::Mutex(Protocol::Kazoo)
        );
        assert_eq!(
            classify(
                &v(&["_c_1-__READ__0000000001", "_c_2-__WRIT__0000000002"]),
                false,
                b""
            ),
            LockKind::ReadWrite(Protocol::Curator)
        );
        assert_eq!(
            classify(&v(&["ab__rlock__0000000001"]), false, b""),
            LockKind::ReadWrite(Protocol::Kazoo)
        );
        assert_eq!(
            classify(&v(&["leases", "locks"]), false, b""),
            LockKind::Semaphore(Protocol::Curator, None)
        );
        assert_eq!(
            classify(&v(&["0123abcd"]), false, b"3"),
            LockKind::Semaphore(Protocol::Kazoo, Some(3))
        );
        match classify(&v(&["config", "users"]), false, b"") {
            LockKind::Unknown(why) => assert!(why.contains("config, users"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    use super::*;

    #[test]
    fn parses_sequences_of_every_peer() {
        assert_eq!(sequence("_c_0f8a-lock-0000000042"), Some(42));
        assert_eq!(sequence("abcdef__lock__0000000007"), Some(7));
        assert_eq!(sequence("abcdef__rlock__0000000010"), Some(10));
        assert_eq!(sequence("x-72057594037927936-0000000003"), Some(3));
        assert_eq!(sequence("_c_u-__WRIT__0000000100"), Some(100));
        assert_eq!(sequence("leases"), None);
        assert_eq!(sequence("lock-123"), None);
        assert_eq!(sequence("lock_123456789"), None);
    }

    /// After 2³¹ changes under a parent the server's counter wraps: names carry negative numbers
    /// written as `%010d` does (`-000000005`, `-2147483648`), for every naming scheme.
    #[test]
    fn parses_negative_sequences_as_the_server_writes_them() {
        let wrap = 1i64 << 32;
        assert_eq!(sequence("k__lock__-2147483648"), Some(wrap - 2147483648));
        assert_eq!(sequence("k__lock__-2147483647"), Some(wrap - 2147483647));
        assert_eq!(sequence("k__rlock__-000000005"), Some(wrap - 5));
        assert_eq!(sequence("_c_u-lock--000000005"), Some(wrap - 5));
        assert_eq!(sequence("_c_u-lock--2147483648"), Some(wrap - 2147483648));
        assert_eq!(sequence("_c_u-__WRIT__-000000001"), Some(wrap - 1));
        assert_eq!(sequence("x-72057594037927936--000000003"), Some(wrap - 3));
        // Positive numbers keep their value; a separator is not a sign.
        assert_eq!(sequence("_c_u-lock-2147483647"), Some(2147483647));
        assert_eq!(sequence("x-7-0000000003"), Some(3));
    }

    /// Nodes made after the wrap queue *behind* the ones made before it, in creation order.
    #[test]
    fn orders_across_the_wrap_in_creation_order() {
        let c = contenders(vec![
            // Numbers of one queue are close (a queue spanning 2³¹ numbers cannot be ordered).
            "_c_d-lock--2147483646".into(),
            "_c_b-lock--2147483648".into(),
            "_c_a-lock-2147483647".into(),
            "_c_c-lock--2147483647".into(),
            "_c_z-lock-2147483646".into(),
        ]);
        let names: Vec<_> = c.iter().map(|c| &c.name[3..4]).collect();
        assert_eq!(names, vec!["z", "a", "b", "c", "d"]);
    }

    /// The counter wraps every 2³² changes: after the second wrap (`-0000000001` then
    /// `0000000000`) nodes still queue in creation order.
    #[test]
    fn orders_across_the_second_wrap_in_creation_order() {
        let c = contenders(vec![
            "_c_c-lock-0000000000".into(),
            "_c_a-lock--000000002".into(),
            "_c_d-lock-0000000001".into(),
            "_c_b-lock--000000001".into(),
        ]);
        let names: Vec<_> = c.iter().map(|c| &c.name[3..4]).collect();
        assert_eq!(names, vec!["a", "b", "c", "d"]);
        assert!(seq_before(sequence("x__lock__-000000001").unwrap(), 0));
        assert!(!seq_before(0, sequence("x__lock__-000000001").unwrap()));
    }

    #[test]
    fn orders_by_number_not_text() {
        let c = contenders(vec![
            "b__lock__0000000010".into(),
            "_c_a-lock-0000000009".into(),
            "locks".into(),
            "x-1-0000000002".into(),
        ]);
        let names: Vec<_> = c.iter().map(|c| c.seq).collect();
        assert_eq!(names, vec![2, 9, 10]);
    }

    #[test]
    fn names_match_the_peers() {
        let id = AttemptId::new();
        let c = id.prefix(Protocol::Curator, Kind::Lock);
        assert!(c.starts_with("_c_") && c.ends_with("-lock-") && c.len() == 3 + 36 + 6);
        let k = id.prefix(Protocol::Kazoo, Kind::Read);
        assert!(k.ends_with("__rlock__") && k.len() == 32 + 9);
        assert!(is_reader(&format!("{k}0000000001")));
        assert!(!is_reader(&id.prefix(Protocol::Kazoo, Kind::Write)));
    }
}

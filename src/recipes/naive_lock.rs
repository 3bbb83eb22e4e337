// src/recipes/naive_lock.rs: the protocol only. (Compiled and run by the tests: `mod
// naive_lock` in src/recipes/mod.rs is `#[cfg(test)]`; a real recipe's module is not.)
use std::sync::Arc;

use zookeeper_client as zk;

use super::attempt::Attempt;
use super::front::Lock;
use super::guard::{Guard, GuardNoSend};
use super::hold::Hold;
use super::participants::{Owner, Policy};
use super::raw::{Participant, Recipe};
use crate::deadline::Deadline;
use crate::error::Result;
use crate::node::{self, AttemptId, Kind};
use crate::session::Client;
use crate::wait::Signal;

// 1. The raw type: what the protocol needs, nothing of who holds.
/// The recipe of [`NaiveLock`]: a queue of ephemeral-sequential nodes that never waits.
#[derive(Clone)]
pub struct RawNaiveLock {
    client: Client,
    path: String,
}

// 2. The protocol: one attempt, and who is queued. Reentrancy, cancel, statistics,
//    revocation, the lease's proof and the guard are the front's; the create's parents, the
//    recovery of a lost reply and the removal of a node that did not become the hold are the
//    attempt's.
impl Recipe for RawNaiveLock {
    type GuardMarker = GuardNoSend;
    const NAME: &'static str = "NaiveLock";

    fn path(&self) -> &str {
        &self.path
    }

    fn client(&self) -> &Client {
        &self.client
    }

    /// Queues a node: held if it is first, else busy (`None`: the node goes as `mine` drops).
    fn attempt(&self, d: Deadline, signal: &Arc<Signal>) -> Result<Option<Hold>> {
        let protocol = self.client.protocol();
        let a = Attempt::begin(&self.client, protocol, d, signal)?;
        let name = AttemptId::new().prefix(protocol, Kind::Lock);
        let data = self.client.holder_id().as_bytes();
        let mine = a.create(&self.path, &name, data, true, a.d)?;
        let listed = a
            .session
            .retry(a.d, || a.session.zk.list_children(&self.path));
        let queue = node::contenders(listed.map_err(|e| a.session.record_end_and_map(e))?);
        if queue.first().is_some_and(|c| c.name == mine.name()) {
            Ok(Some(mine.into_hold()))
        } else {
            Ok(None)
        }
    }

    /// The queue, first one holding.
    fn participants(&self) -> Result<Vec<Participant>> {
        let s = self.client.session()?;
        let listed = s.retry(s.one_call(), || s.zk.list_children(&self.path));
        let queue = match listed {
            Ok(children) => node::contenders(children),
            Err(zk::Error::NoNode) => Vec::new(),
            Err(e) => return Err(s.record_end_and_map(e)),
        };
        Ok(queue
            .into_iter()
            .enumerate()
            .map(|(i, c)| Participant {
                sequence: c.seq,
                node: c.name,
                holder_id: String::new(),
                hidden: false,
                is_holder: i == 0,
                is_reader: false,
                created_ms: 0,
                revocable: false,
            })
            .collect())
    }
}

// 3. The front: a type alias, its guard, and a constructor that says who the participant is
//    (`Owner`) and how often it may hold (`Policy`).
/// A lock that never waits: held if its node is first in the queue.
pub type NaiveLock = Lock<RawNaiveLock>;
/// Holds a [`NaiveLock`]; releases on drop.
pub type NaiveLockGuard<'a> = Guard<'a, NaiveLock>;

impl NaiveLock {
    /// A naive lock at `path`.
    pub fn new(client: &Client, path: &str) -> Result<NaiveLock> {
        crate::path::validate_path(path)?;
        let raw = RawNaiveLock {
            client: client.clone(),
            path: path.to_string(),
        };
        Ok(Lock::from_raw(
            raw,
            Owner::Handle,
            Policy::Once,
            "naive lock",
        ))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::{Lockable, Options};

    /// The example holds, refuses a second holder, leaves no node of a failed attempt, and
    /// hands over after a release: against a real server.
    #[test]
    fn the_add_a_recipe_example_is_a_lock() {
        let server = crate::testing::TestingServer::shared();
        let client = Client::connect(&server.connect_string(), Options::default()).unwrap();
        let path = format!("/naive-lock/{}", uuid::Uuid::new_v4());
        let (one, two) = (
            NaiveLock::new(&client, &path).unwrap(),
            NaiveLock::new(&client, &path).unwrap(),
        );
        let held: NaiveLockGuard = one.try_lock().unwrap().expect("the first attempt holds");
        assert!(held.is_held());
        assert!(two.try_lock().unwrap().is_none(), "a second holder at once");
        assert_eq!(
            one.participants().unwrap().len(),
            1,
            "a failed attempt's node stayed"
        );
        drop(held);
        assert!(
            two.try_lock().unwrap().is_some(),
            "not handed over after a release"
        );
    }
}

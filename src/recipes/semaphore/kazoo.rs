//! The semaphore in kazoo's layout (`Semaphore`): `P-__lock__` (a sibling of P) is a kazoo lock
//! guarding the count, leases are ephemeral `P/<uuid hex>`, and N is stored as P's data (checked
//! against ours); the lock holder creates its lease node only while fewer than N exist
//! (watching P's children until then).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use zookeeper_client as zk;

use super::leases::{list_watch, wait, Leases};
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::node::{AttemptId, Protocol};
use crate::recipes::hold::Hold;
use crate::recipes::protected::{create_ephemeral, create_parents_of};
use crate::session::Session;
use crate::wait::Signal;

impl Leases {
    /// kazoo: create our lease node only while fewer than N exist (a try-once attempt,
    /// `try_once`, never waits for that: its `d` is its pinned instant).
    pub(super) fn take_kazoo(
        &self,
        session: &Arc<Session>,
        d: Deadline,
        try_once: bool,
        signal: &Arc<Signal>,
    ) -> Result<Option<Hold>> {
        let name = AttemptId::new().text(Protocol::Kazoo);
        let data = self.client.holder_id().as_bytes();
        loop {
            let Some((children, watcher)) = list_watch(session, &self.dir, d)? else {
                // P was deleted meanwhile: lay it out again.
                self.ensure_kazoo_root(session, d)?;
                continue;
            };
            if children.len() < self.max_leases as usize {
                let (name, token) =
                    create_ephemeral(&self.client, session, &self.dir, &name, data, false, d)?;
                return Ok(Some(Hold::new(session.clone(), self.child(&name), token)));
            }
            if try_once {
                return Ok(None);
            }
            if !wait(session, watcher, d, signal)? {
                return Ok(None);
            }
        }
    }

    /// kazoo keeps N as P's data: create P (persistent, as kazoo does) holding N, or check the N
    /// stored there.
    pub(super) fn ensure_kazoo_root(&self, session: &Arc<Session>, d: Deadline) -> Result<()> {
        let opts = self.client.create_options(zk::CreateMode::Persistent);
        let n = self.max_leases.to_string();
        // Parents are made again when the servers' container reaper removed an emptied one
        // between their create and ours (`PARENT_TRIES` times at most).
        let mut parents_made = 0;
        loop {
            if let Some(e) = session.ended_error() {
                return Err(e);
            }
            // Creating P again after a lost reply is harmless: NodeExists then checks its data.
            match session.retry(d, || session.zk.create(&self.path, n.as_bytes(), &opts)) {
                Ok(_) => break,
                Err(zk::Error::NoNode) if parents_made < crate::recipes::PARENT_TRIES => {
                    create_parents_of(&self.client, session, &self.path, d, self.protocol)?;
                    parents_made += 1;
                }
                Err(zk::Error::NodeExists) => {
                    match session.retry(d, || session.zk.get_data(&self.path)) {
                        Ok((data, _)) => {
                            // Like kazoo: non-numeric data is ignored (the node may serve other uses).
                            if let Some(stored) = std::str::from_utf8(&data)
                                .ok()
                                .and_then(|s| s.trim().parse::<i64>().ok())
                            {
                                if stored != i64::from(self.max_leases) {
                                    return Err(Error::invalid(format!(
                                        "inconsistent max leases at {}: {stored} stored, {} expected",
                                        self.path, self.max_leases
                                    )));
                                }
                            }
                            break;
                        }
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => return Err(session.record_end_and_map(e)),
                    }
                }
                Err(e) => return Err(session.record_end_and_map(e)),
            }
        }
        self.root_checked.store(true, Ordering::Release);
        Ok(())
    }
}

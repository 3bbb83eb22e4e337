//! The semaphore in kazoo's layout (`Semaphore`): `P-__lock__` (a sibling of P) is a kazoo lock
//! guarding the count, leases are ephemeral `P/<uuid hex>`, and N is stored as P's data (checked
//! against ours); the lock holder creates its lease node only while fewer than N exist
//! (watching P's children until then).

use std::sync::atomic::Ordering;

use zookeeper_client as zk;

use super::leases::{list_watch, wait, Leases};
use crate::error::{Error, Result};
use crate::node::{AttemptId, Protocol};
use crate::recipes::attempt::Attempt;
use crate::recipes::hold::Hold;

impl Leases {
    /// kazoo: create our lease node only while fewer than N exist (a try-once attempt never
    /// waits for that).
    pub(super) fn take_kazoo(&self, a: &Attempt) -> Result<Option<Hold>> {
        let (session, d) = (&a.session, a.d);
        let name = AttemptId::new().text(Protocol::Kazoo);
        let data = self.client.holder_id().as_bytes();
        loop {
            let Some((children, watcher)) = list_watch(session, &self.dir, d)? else {
                // P was deleted meanwhile: lay it out again.
                self.ensure_kazoo_root(a)?;
                continue;
            };
            if children.len() < self.max_leases as usize {
                let made = a.create(&self.dir, &name, data, false, d)?;
                return Ok(Some(made.into_hold()));
            }
            if a.try_once {
                return Ok(None);
            }
            if !wait(session, watcher, d, &a.signal)? {
                return Ok(None);
            }
        }
    }

    /// kazoo keeps N as P's data: create P (persistent, as kazoo does) holding N, or check the N
    /// stored there.
    pub(super) fn ensure_kazoo_root(&self, a: &Attempt) -> Result<()> {
        let (session, d) = (&a.session, a.d);
        let opts = self.client.create_options(zk::CreateMode::Persistent);
        let n = self.max_leases.to_string();
        a.with_parents(&[crate::path::parent(&self.path)], d, || loop {
            if let Some(e) = session.ended_error() {
                return Err(e);
            }
            // Creating P again after a lost reply is harmless: NodeExists then checks its data.
            match session.retry(d, || session.zk.create(&self.path, n.as_bytes(), &opts)) {
                Ok(_) => return Ok(Some(())),
                Err(zk::Error::NoNode) => return Ok(None),
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
                            return Ok(Some(()));
                        }
                        Err(zk::Error::NoNode) => continue,
                        Err(e) => return Err(session.record_end_and_map(e)),
                    }
                }
                Err(e) => return Err(session.record_end_and_map(e)),
            }
        })?;
        self.root_checked.store(true, Ordering::Release);
        Ok(())
    }
}

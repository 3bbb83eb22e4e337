//! Direct node operations for tests: look at and tamper with what the recipes left on the
//! server (delete a waiter's node by hand, delete a lock's parent, count children).

use std::time::Duration;

use zookeeper_client as zk;

use crate::error::Result;
use crate::session::{Client, Options};

/// A session for inspecting and tampering with nodes in tests.
///
/// ```no_run
/// let admin = zklock::testing::Admin::connect("127.0.0.1:2181").unwrap();
/// let kids = admin.children("/locks/a").unwrap();
/// ```
pub struct Admin {
    client: Client,
}

/// What tests want to know of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Creation zxid.
    pub czxid: i64,
    /// Owner session of an ephemeral node (0 if persistent).
    pub ephemeral_owner: i64,
    /// The node's data.
    pub data: Vec<u8>,
}

impl Admin {
    /// Connects an admin session to `hosts`.
    pub fn connect(hosts: &str) -> Result<Admin> {
        let client = Client::connect(
            hosts,
            Options::default().session_timeout(Duration::from_secs(10)),
        )?;
        Ok(Admin { client })
    }

    /// The children of `path` (names), sorted; empty if `path` does not exist.
    pub fn children(&self, path: &str) -> Result<Vec<String>> {
        let s = self.client.session()?;
        match s.call(s.zk.list_children(path), crate::Deadline::Forever) {
            Ok(mut v) => {
                v.sort();
                Ok(v)
            }
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(s.record_end_and_map(e)),
        }
    }

    /// The node at `path`, if it exists.
    pub fn node(&self, path: &str) -> Result<Option<NodeInfo>> {
        let s = self.client.session()?;
        match s.call(s.zk.get_data(path), crate::Deadline::Forever) {
            Ok((data, stat)) => Ok(Some(NodeInfo {
                czxid: stat.czxid,
                ephemeral_owner: stat.ephemeral_owner,
                data,
            })),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(s.record_end_and_map(e)),
        }
    }

    /// Deletes `path` and everything under it; Ok if it does not exist.
    pub fn delete_recursive(&self, path: &str) -> Result<()> {
        for c in self.children(path)? {
            self.delete_recursive(&format!("{path}/{c}"))?;
        }
        let s = self.client.session()?;
        match s.call(s.zk.delete(path, None), crate::Deadline::Forever) {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            Err(e) => Err(s.record_end_and_map(e)),
        }
    }

    /// Deletes one node (any version); Ok if it does not exist.
    pub fn delete(&self, path: &str) -> Result<()> {
        let s = self.client.session()?;
        match s.call(s.zk.delete(path, None), crate::Deadline::Forever) {
            Ok(()) | Err(zk::Error::NoNode) => Ok(()),
            Err(e) => Err(s.record_end_and_map(e)),
        }
    }

    /// Creates a persistent node (parents must exist).
    pub fn create(&self, path: &str, data: &[u8]) -> Result<()> {
        let s = self.client.session()?;
        let opts = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        s.wait(s.zk.create(path, data, &opts), crate::Deadline::Forever)
            .map(|_| ())
    }
}

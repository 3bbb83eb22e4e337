//! Partitions of an ensemble: each pair of members talks through proxied links
//! ([`LinkProxy`]) that an isolated member's partition holds or drops.

use std::collections::BTreeMap;

use super::TestingCluster;
use crate::testing::link::{LinkMode, LinkProxy};

/// The proxied links from member `from` to member `to` (its quorum and its election port).
pub(super) struct Link {
    pub(super) from: usize,
    pub(super) to: usize,
    pub(super) quorum: LinkProxy,
    pub(super) election: LinkProxy,
}

impl Link {
    /// Puts both proxies in `mode`. Leaving [`LinkMode::Drop`] closes their connections first
    /// (bytes were lost mid-stream), so the members connect again.
    fn set_mode(&self, mode: LinkMode) {
        for p in [&self.quorum, &self.election] {
            if p.mode() == LinkMode::Drop && mode != LinkMode::Drop {
                p.cut_all();
            }
            p.set_mode(mode);
        }
    }
}

impl TestingCluster {
    /// Partitions member `i` from every other member, as a real network partition does: its
    /// quorum and election links, in both directions, stop forwarding but keep every byte sent
    /// (in order) and stay open, and connections made meanwhile are accepted and held too
    /// (they reach their target at the heal). Clients' connections to member `i` are
    /// untouched. [`TestingCluster::heal`] delivers what was held, so a request that member
    /// `i` forwarded to the leader during the partition can still be applied after it: the
    /// members' own timeouts (syncLimit × tickTime, 2.5 s here) decide whether anyone is still
    /// listening by then.
    ///
    /// # Panics
    /// If the cluster was not started by [`TestingCluster::start_partitionable`].
    pub fn isolate(&self, i: usize) {
        self.partition(i, LinkMode::Hold);
    }

    /// As [`TestingCluster::isolate`], but the links black-hole: bytes sent during the
    /// partition are dropped (connections stay open; those made meanwhile are never
    /// forwarded), and [`TestingCluster::heal`] closes the links' connections, so the members
    /// connect again. Nothing sent during the partition arrives after it.
    ///
    /// # Panics
    /// If the cluster was not started by [`TestingCluster::start_partitionable`].
    pub fn isolate_dropping(&self, i: usize) {
        self.partition(i, LinkMode::Drop);
    }

    fn partition(&self, i: usize, mode: LinkMode) {
        assert!(
            !self.links.is_empty() || self.members.len() == 1,
            "isolate needs a cluster from TestingCluster::start_partitionable"
        );
        let mut isolated = self.isolated.lock().unwrap_or_else(|e| e.into_inner());
        isolated.insert(i, mode);
        self.apply_modes(&isolated);
    }

    /// Sets each link's mode from the members isolated now: a link with an end isolated by
    /// [`TestingCluster::isolate_dropping`] drops, else one with an isolated end holds.
    fn apply_modes(&self, isolated: &BTreeMap<usize, LinkMode>) {
        for l in &self.links {
            let ends = [isolated.get(&l.from), isolated.get(&l.to)];
            let mode = if ends.contains(&Some(&LinkMode::Drop)) {
                LinkMode::Drop
            } else if ends.iter().any(|e| e.is_some()) {
                LinkMode::Hold
            } else {
                LinkMode::Open
            };
            l.set_mode(mode);
        }
    }

    /// Ends the partition of member `i`. After [`TestingCluster::isolate`] its links deliver
    /// everything they held, in order, then forward as before (a connection whose end closed
    /// meanwhile gets what that end sent before closing, then the close). After
    /// [`TestingCluster::isolate_dropping`] their connections are closed, so the members
    /// connect again. A link to another member that is still isolated stays partitioned.
    pub fn heal(&self, i: usize) {
        let mut isolated = self.isolated.lock().unwrap_or_else(|e| e.into_inner());
        isolated.remove(&i);
        self.apply_modes(&isolated);
    }

    /// The members isolated now.
    pub fn isolated(&self) -> Vec<usize> {
        self.isolated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .copied()
            .collect()
    }

    /// Bytes that member `i` sent to other members (quorum and election traffic) and that
    /// its partition holds now: e.g. a request it forwarded to the leader during
    /// [`TestingCluster::isolate`]. 0 when the cluster is not partitionable.
    pub fn held_from(&self, i: usize) -> usize {
        self.links
            .iter()
            .map(|l| {
                let p = [&l.quorum, &l.election];
                if l.from == i {
                    p.iter().map(|p| p.held_bytes(true)).sum()
                } else if l.to == i {
                    p.iter().map(|p| p.held_bytes(false)).sum()
                } else {
                    0
                }
            })
            .sum()
    }
}

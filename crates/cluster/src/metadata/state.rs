//! The site's metadata as the Raft state machine holds it: the members and
//! the partition table, and the one function that applies a [`Command`].
//!
//! [`SiteMetadata::apply`] is pure and deterministic: every node applies the
//! same commands in the same order and must reach the same state, so it
//! reads no clock, no randomness and nothing outside `self`. A command that
//! breaks a rule is *refused* (a [`Refused`] outcome, committed like any
//! other entry) and changes nothing.
//!
//! Invariants after every command:
//! - every node the table names is a member (a member holding a copy
//!   cannot be removed);
//! - a partition's replicas are distinct and never its primary;
//! - `in_sync` is a subset of `replicas` and names no dead member;
//! - epochs only grow. Any change to the table bumps the table epoch by one
//!   and stamps every partition it changed with the new table epoch, so a
//!   partition's epoch is unique site-wide and fences whoever acts on an
//!   older assignment. A command that changes nothing bumps nothing.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::site_acl::{AclChange, SiteAcl};
use super::waiting::{DiskCopy, Report, Waiting};

/// A node's id in the metadata group (Raft needs an integer; the node's
/// configured name travels in [`Member::name`]).
pub type NodeId = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberState {
    Active,
    /// Draining: keeps serving what it holds until its partitions moved.
    Leaving,
    /// Declared dead by failure detection; out of every in-sync set.
    Dead,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The node's configured name (`node.id`).
    pub name: String,
    /// Node-to-node address.
    pub cluster_addr: SocketAddr,
    /// Address Redis clients use (what MOVED points to).
    pub client_addr: String,
    /// Address of its TLS client port, if it has one (what MOVED and
    /// CLUSTER SLOTS name to clients connected over TLS).
    #[serde(default)]
    pub tls_client_addr: Option<String>,
    pub state: MemberState,
}

impl Member {
    /// The address to give a client: its TLS port's to a client over TLS
    /// when it has one.
    pub fn client_addr_for(&self, tls: bool) -> &str {
        match &self.tls_client_addr {
            Some(a) if tls => a,
            _ => &self.client_addr,
        }
    }
}

/// Who holds one partition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub primary: NodeId,
    pub replicas: Vec<NodeId>,
    /// The replicas that have every write the primary acknowledged; a
    /// failover may promote only one of these without losing writes.
    pub in_sync: Vec<NodeId>,
    pub epoch: u64,
    /// A planned handover: the in-sync replica this partition's primary is
    /// to hand it to. The primary fences writes, waits until its replicas
    /// have everything, and commits the switch itself (see
    /// `cluster::handover`); anything that takes the node out of
    /// `in_sync` cancels it.
    #[serde(default)]
    pub moving_to: Option<NodeId>,
}

impl Assignment {
    pub fn new(primary: NodeId, replicas: Vec<NodeId>, in_sync: Vec<NodeId>) -> Assignment {
        Assignment {
            primary,
            replicas,
            in_sync,
            epoch: 0,
            moving_to: None,
        }
    }

    pub fn holds(&self, node: NodeId) -> bool {
        self.primary == node || self.replicas.contains(&node)
    }

    fn same_owners(&self, other: &Assignment) -> bool {
        self.primary == other.primary
            && self.replicas == other.replicas
            && self.in_sync == other.in_sync
            && self.moving_to == other.moving_to
    }

    /// A handover whose target is no longer an in-sync replica is void.
    fn drop_void_handover(&mut self) {
        if self.moving_to.is_some_and(|n| !self.in_sync.contains(&n)) {
            self.moving_to = None;
        }
    }

    /// Whether switching from `old` to `self` can be committed right away:
    /// the primary stays, or moves to a replica that was in sync. Anything
    /// else gives the partition to a node that may lack acknowledged writes
    /// (a migration must bring the data there first).
    pub fn safe_from(&self, old: &Assignment) -> bool {
        self.primary == old.primary || old.in_sync.contains(&self.primary)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Table {
    pub epoch: u64,
    /// Indexed by partition number.
    pub partitions: Vec<Assignment>,
}

/// Everything the metadata group agrees on. `table` is None until the site
/// is formed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SiteMetadata {
    pub members: BTreeMap<NodeId, Member>,
    pub table: Option<Table>,
    /// Random, chosen when the site forms: a site formed again (every node
    /// started without its data) has another one, which tells remote
    /// sites' WAN publishers to re-sync it. 0 until formed.
    pub data_incarnation: u64,
    /// Partitions every copy of which went down, waiting for one with
    /// every acknowledged write ([`super::waiting`]).
    #[serde(default)]
    pub waiting: BTreeMap<u16, Waiting>,
    /// What each member that restarted with its disk loaded from it;
    /// forgotten when it is marked dead again.
    #[serde(default)]
    pub restarted: BTreeMap<NodeId, Report>,
    /// The site's ACL users ([`super::site_acl`]).
    #[serde(default)]
    pub acl: SiteAcl,
    /// What members prove to each other's client ports to run internal
    /// commands (WANAPPLY, BACKUPJOB...); random, set once (0: not yet).
    #[serde(default)]
    pub internal_token: [u64; 2],
}

/// A change to the metadata, proposed through Raft.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Forms the site: its first members and table (epochs start at 1).
    /// Refused once formed, so every seed may propose it.
    Form {
        members: BTreeMap<NodeId, Member>,
        partitions: Vec<Assignment>,
        /// The proposer's random pick; the first Form committed sets it.
        data_incarnation: u64,
    },
    /// A new member, or a known one coming back (its addresses updated,
    /// active again).
    AddMember {
        id: NodeId,
        name: String,
        cluster_addr: SocketAddr,
        client_addr: String,
        tls_client_addr: Option<String>,
    },
    /// A node that is not a seed asks to join: it gets the id of the
    /// member with its cluster address if there is one (a restart), else
    /// one above every current id (at most [`MAX_MEMBER_ID`]). The outcome
    /// is that id, not an epoch.
    Join {
        name: String,
        cluster_addr: SocketAddr,
        client_addr: String,
        tls_client_addr: Option<String>,
    },
    MarkLeaving {
        id: NodeId,
    },
    /// Also takes the member out of every in-sync set.
    MarkDead {
        id: NodeId,
    },
    /// A member restarted with local persistence: dead (as [`Command::MarkDead`])
    /// until the leader makes it active again, with the copies it loaded.
    Restarted {
        id: NodeId,
        copies: Vec<DiskCopy>,
        /// They came back whole with every write acknowledged to it
        /// (`persist::Recovered::complete`).
        whole: bool,
    },
    /// The operator gives up on dead member `id`: no partition waits for
    /// its data any more.
    Revoke {
        id: NodeId,
    },
    /// Waiting partitions given to the member chosen for each (its only
    /// copy), compare-and-set on the table epoch.
    Resolve {
        partitions: Vec<(u16, NodeId)>,
        expected_epoch: u64,
    },
    /// Refused while the member still holds a copy of any partition.
    RemoveMember {
        id: NodeId,
    },
    /// Replaces the whole table (a rebalance), compare-and-set on the
    /// table epoch. The `epoch` fields of `partitions` are ignored.
    SetTable {
        partitions: Vec<Assignment>,
        expected_epoch: u64,
    },
    /// Replaces one partition's owners, compare-and-set on its epoch.
    SetPartition {
        partition: u16,
        primary: NodeId,
        replicas: Vec<NodeId>,
        in_sync: Vec<NodeId>,
        expected_epoch: u64,
    },
    RemoveFromInSync {
        partition: u16,
        node: NodeId,
        expected_epoch: u64,
    },
    AddToInSync {
        partition: u16,
        node: NodeId,
        expected_epoch: u64,
    },
    /// Partitions restarted empty (every copy was lost): the site's data
    /// is not what remote sites delivered to it any more.
    NewDataIncarnation {
        value: u64,
    },
    /// [`Command::AddToInSync`] for many replicas at once (one metadata
    /// entry for the hundreds that finish their snapshots together after a
    /// failover): each is applied or refused on its own; the command is
    /// refused only when all are, with the first refusal.
    AddManyToInSync {
        entries: Vec<InSyncEntry>,
    },
    /// A change to the site's ACL users, on top of the current ones (or,
    /// while the site has none, on top of `base`, the proposer's users as
    /// an ACL file). `pubsub_all`: the proposer's `acl-pubsub-default`.
    ChangeAcl {
        change: AclChange,
        base: Vec<u8>,
        pubsub_all: bool,
    },
    /// Sets [`SiteMetadata::internal_token`] if it is not set yet.
    SetInternalToken {
        token: [u64; 2],
    },
}

/// One replica proposed into a partition's in-sync set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InSyncEntry {
    pub partition: u16,
    pub node: NodeId,
    pub expected_epoch: u64,
}

/// Why a command changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refused {
    #[error("the site is not formed yet")]
    NotFormed,
    #[error("the site is already formed")]
    AlreadyFormed,
    #[error("stale epoch: expected {expected}, current {current}")]
    StaleEpoch { expected: u64, current: u64 },
    #[error("no partition {0}")]
    NoSuchPartition(u16),
    #[error("the table has {got} partitions, the site {want}")]
    PartitionCount { want: usize, got: usize },
    #[error("node {0} is not a member")]
    UnknownMember(NodeId),
    #[error("node {0} is dead")]
    DeadMember(NodeId),
    #[error("node {0} is not dead")]
    NotDead(NodeId),
    #[error("node {0} still holds partitions")]
    StillHolds(NodeId),
    #[error("partition {partition}: {reason}")]
    Invalid { partition: u16, reason: String },
    #[error("the site has no free node id (ids go up to {MAX_MEMBER_ID})")]
    Full,
    #[error("the name {name:?} is member {id}'s, at another address")]
    NameTaken { name: String, id: NodeId },
    #[error("the cluster address {addr} is member {id}'s ({name:?}), which is not dead")]
    AddressTaken {
        addr: SocketAddr,
        id: NodeId,
        name: String,
    },
    /// An ACL change the users refuse (its Redis error text).
    #[error("{0}")]
    Acl(String),
}

/// The highest node id: per-member state (replication buffers, acks) is
/// sized by it.
pub const MAX_MEMBER_ID: NodeId = 32;

/// What applying a command returns: the epoch it left (the partition's for
/// partition commands, the table's otherwise; 0 before the site formed).
pub type Outcome = Result<u64, Refused>;

fn invalid(partition: usize, reason: &str) -> Refused {
    Refused::Invalid {
        partition: partition as u16,
        reason: reason.to_string(),
    }
}

impl SiteMetadata {
    pub fn is_formed(&self) -> bool {
        self.table.is_some()
    }

    /// Members that can take new work.
    pub fn active_members(&self) -> Vec<NodeId> {
        self.members
            .iter()
            .filter(|(_, m)| m.state == MemberState::Active)
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn apply(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::Form {
                members,
                partitions,
                data_incarnation,
            } => self.form(members, partitions, *data_incarnation),
            Command::AddMember {
                id,
                name,
                cluster_addr,
                client_addr,
                tls_client_addr,
            } => {
                let member = Member {
                    name: name.clone(),
                    cluster_addr: *cluster_addr,
                    client_addr: client_addr.clone(),
                    tls_client_addr: tls_client_addr.clone(),
                    state: MemberState::Active,
                };
                self.members.insert(*id, member);
                Ok(self.table_epoch())
            }
            Command::Join {
                name,
                cluster_addr,
                client_addr,
                tls_client_addr,
            } => {
                if self.table.is_none() {
                    return Err(Refused::NotFormed);
                }
                // A name is one member's: a second process calling itself
                // by a member's name cannot take its place.
                if let Some((id, _)) = self
                    .members
                    .iter()
                    .find(|(_, m)| m.name == *name && m.cluster_addr != *cluster_addr)
                {
                    return Err(Refused::NameTaken {
                        name: name.clone(),
                        id: *id,
                    });
                }
                // An address is one member's too: a process claiming a
                // live member's address under another name would take its
                // slots' clients (MOVED names its client address). Only a
                // dead member's place may be taken by a new name.
                if let Some((id, m)) = self.members.iter().find(|(_, m)| {
                    m.cluster_addr == *cluster_addr
                        && m.name != *name
                        && m.state != MemberState::Dead
                }) {
                    return Err(Refused::AddressTaken {
                        addr: *cluster_addr,
                        id: *id,
                        name: m.name.clone(),
                    });
                }
                let known = self
                    .members
                    .iter()
                    .find(|(_, m)| m.cluster_addr == *cluster_addr)
                    .map(|(id, _)| *id);
                let id = match known {
                    Some(id) => id,
                    None => self.members.keys().next_back().map_or(1, |id| id + 1),
                };
                if id > MAX_MEMBER_ID {
                    return Err(Refused::Full);
                }
                let state = self
                    .members
                    .get(&id)
                    .map_or(MemberState::Active, |m| m.state);
                let m = Member {
                    name: name.clone(),
                    cluster_addr: *cluster_addr,
                    client_addr: client_addr.clone(),
                    tls_client_addr: tls_client_addr.clone(),
                    state,
                };
                self.members.insert(id, m);
                Ok(id)
            }
            Command::MarkLeaving { id } => {
                let m = self
                    .members
                    .get_mut(id)
                    .ok_or(Refused::UnknownMember(*id))?;
                if m.state == MemberState::Dead {
                    return Err(Refused::DeadMember(*id));
                }
                m.state = MemberState::Leaving;
                Ok(self.table_epoch())
            }
            Command::MarkDead { id } => {
                self.restarted.remove(id);
                self.mark_dead(*id)
            }
            Command::Restarted { id, copies, whole } => {
                self.restarted(*id, copies, *whole)?;
                Ok(self.table_epoch())
            }
            Command::Revoke { id } => {
                self.revoke(*id)?;
                Ok(self.table_epoch())
            }
            Command::Resolve {
                partitions,
                expected_epoch,
            } => self.resolve(partitions, *expected_epoch),
            Command::NewDataIncarnation { value } => {
                if self.table.is_none() {
                    return Err(Refused::NotFormed);
                }
                self.data_incarnation = (*value).max(1);
                Ok(self.table_epoch())
            }
            Command::RemoveMember { id } => {
                if !self.members.contains_key(id) {
                    return Err(Refused::UnknownMember(*id));
                }
                if self
                    .table
                    .as_ref()
                    .is_some_and(|t| t.partitions.iter().any(|a| a.holds(*id)))
                {
                    return Err(Refused::StillHolds(*id));
                }
                self.members.remove(id);
                // Gone for good: nothing waits for its disk.
                self.restarted.remove(id);
                for w in self.waiting.values_mut() {
                    w.complete.retain(|n| n != id);
                }
                Ok(self.table_epoch())
            }
            Command::SetTable {
                partitions,
                expected_epoch,
            } => self.set_table(partitions, *expected_epoch),
            Command::SetPartition {
                partition,
                primary,
                replicas,
                in_sync,
                expected_epoch,
            } => {
                let proposed = Assignment::new(*primary, replicas.clone(), in_sync.clone());
                self.validate(*partition as usize, &proposed)?;
                self.change_partition(*partition, *expected_epoch, |a| {
                    a.primary = proposed.primary;
                    a.replicas = proposed.replicas;
                    a.in_sync = proposed.in_sync;
                    a.moving_to = None;
                })
            }
            Command::RemoveFromInSync {
                partition,
                node,
                expected_epoch,
            } => self.change_partition(*partition, *expected_epoch, |a| {
                a.in_sync.retain(|n| n != node);
                a.drop_void_handover();
            }),
            Command::AddToInSync {
                partition,
                node,
                expected_epoch,
            } => self.add_to_in_sync(*partition, *node, *expected_epoch),
            Command::ChangeAcl {
                change,
                base,
                pubsub_all,
            } => self
                .acl
                .apply(change, base, *pubsub_all)
                .map_err(|e| Refused::Acl(e.to_string())),
            Command::SetInternalToken { token } => {
                if self.internal_token == [0, 0] {
                    self.internal_token = *token;
                }
                Ok(self.table_epoch())
            }
            Command::AddManyToInSync { entries } => {
                let mut first_refusal = None;
                let mut added = false;
                for e in entries {
                    match self.add_to_in_sync(e.partition, e.node, e.expected_epoch) {
                        Ok(_) => added = true,
                        Err(r) => {
                            first_refusal.get_or_insert(r);
                        }
                    }
                }
                match first_refusal {
                    Some(r) if !added => Err(r),
                    _ => Ok(self.table_epoch()),
                }
            }
        }
    }

    fn add_to_in_sync(&mut self, partition: u16, node: NodeId, expected_epoch: u64) -> Outcome {
        let a = self.assignment(partition)?;
        if !a.replicas.contains(&node) {
            return Err(invalid(partition as usize, "only a replica can be in sync"));
        }
        if self
            .members
            .get(&node)
            .is_some_and(|m| m.state == MemberState::Dead)
        {
            return Err(Refused::DeadMember(node));
        }
        self.change_partition(partition, expected_epoch, |a| {
            if !a.in_sync.contains(&node) {
                a.in_sync.push(node);
            }
        })
    }

    fn table_epoch(&self) -> u64 {
        self.table.as_ref().map_or(0, |t| t.epoch)
    }

    fn assignment(&self, partition: u16) -> Result<&Assignment, Refused> {
        let table = self.table.as_ref().ok_or(Refused::NotFormed)?;
        table
            .partitions
            .get(partition as usize)
            .ok_or(Refused::NoSuchPartition(partition))
    }

    fn form(
        &mut self,
        members: &BTreeMap<NodeId, Member>,
        partitions: &[Assignment],
        incarnation: u64,
    ) -> Outcome {
        if self.table.is_some() {
            return Err(Refused::AlreadyFormed);
        }
        if partitions.is_empty() || partitions.len() > keyspace::slot::SLOTS as usize {
            let want = partitions.len().clamp(1, keyspace::slot::SLOTS as usize);
            return Err(Refused::PartitionCount {
                want,
                got: partitions.len(),
            });
        }
        let mut formed = SiteMetadata {
            members: self.members.clone(),
            table: None,
            data_incarnation: incarnation.max(1),
            waiting: BTreeMap::new(),
            restarted: BTreeMap::new(),
            acl: self.acl.clone(),
            internal_token: self.internal_token,
        };
        formed
            .members
            .extend(members.iter().map(|(id, m)| (*id, m.clone())));
        for (p, a) in partitions.iter().enumerate() {
            formed.validate(p, a)?;
        }
        let partitions = partitions
            .iter()
            .map(|a| Assignment {
                epoch: 1,
                moving_to: None,
                ..a.clone()
            })
            .collect();
        formed.table = Some(Table {
            epoch: 1,
            partitions,
        });
        *self = formed;
        Ok(1)
    }

    pub(super) fn mark_dead(&mut self, id: NodeId) -> Outcome {
        let before = self
            .table
            .as_ref()
            .map(|t| t.partitions.clone())
            .unwrap_or_default();
        let epoch = self.mark_dead_only(id)?;
        self.note_down(id, &before);
        Ok(epoch)
    }

    fn mark_dead_only(&mut self, id: NodeId) -> Outcome {
        let m = self
            .members
            .get_mut(&id)
            .ok_or(Refused::UnknownMember(id))?;
        m.state = MemberState::Dead;
        let Some(table) = self.table.as_mut() else {
            return Ok(0);
        };
        let next = table.epoch + 1;
        let mut changed = false;
        for a in table
            .partitions
            .iter_mut()
            .filter(|a| a.in_sync.contains(&id))
        {
            a.in_sync.retain(|n| *n != id);
            a.drop_void_handover();
            a.epoch = next;
            changed = true;
        }
        if changed {
            table.epoch = next;
        }
        Ok(table.epoch)
    }

    fn set_table(&mut self, partitions: &[Assignment], expected_epoch: u64) -> Outcome {
        let table = self.table.as_ref().ok_or(Refused::NotFormed)?;
        if table.epoch != expected_epoch {
            return Err(Refused::StaleEpoch {
                expected: expected_epoch,
                current: table.epoch,
            });
        }
        if partitions.len() != table.partitions.len() {
            return Err(Refused::PartitionCount {
                want: table.partitions.len(),
                got: partitions.len(),
            });
        }
        for (p, a) in partitions.iter().enumerate() {
            self.validate(p, a)?;
        }
        let Some(table) = self.table.as_mut() else {
            return Err(Refused::NotFormed);
        };
        let next = table.epoch + 1;
        let mut changed = false;
        let mut served = Vec::new();
        for (p, (cur, new)) in table.partitions.iter_mut().zip(partitions).enumerate() {
            let mut new = new.clone();
            new.drop_void_handover();
            if !cur.same_owners(&new) {
                if new.primary != cur.primary {
                    served.push((p as u16, new.primary));
                }
                *cur = Assignment { epoch: next, ..new };
                changed = true;
            }
        }
        if changed {
            table.epoch = next;
        }
        let epoch = table.epoch;
        // A waiting partition given to a live member (a failover on a site
        // that does not wait for disks) waits no more.
        for (p, primary) in served {
            if self
                .members
                .get(&primary)
                .is_some_and(|m| m.state != MemberState::Dead)
            {
                self.waiting.remove(&p);
            }
        }
        Ok(epoch)
    }

    /// Compare-and-set on one partition's epoch; bumps it if `change`
    /// changed anything.
    fn change_partition(
        &mut self,
        partition: u16,
        expected_epoch: u64,
        change: impl FnOnce(&mut Assignment),
    ) -> Outcome {
        let table = self.table.as_mut().ok_or(Refused::NotFormed)?;
        let a = table
            .partitions
            .get_mut(partition as usize)
            .ok_or(Refused::NoSuchPartition(partition))?;
        if a.epoch != expected_epoch {
            return Err(Refused::StaleEpoch {
                expected: expected_epoch,
                current: a.epoch,
            });
        }
        let before = a.clone();
        change(a);
        if !a.same_owners(&before) {
            table.epoch += 1;
            a.epoch = table.epoch;
        }
        Ok(a.epoch)
    }

    /// The rules every assignment obeys (see the module doc).
    fn validate(&self, p: usize, a: &Assignment) -> Result<(), Refused> {
        let member = |id: &NodeId| self.members.get(id).ok_or(Refused::UnknownMember(*id));
        member(&a.primary)?;
        for (i, b) in a.replicas.iter().enumerate() {
            member(b)?;
            if *b == a.primary {
                return Err(invalid(p, "the primary is also a replica"));
            }
            if a.replicas[..i].contains(b) {
                return Err(invalid(p, "a replica is listed twice"));
            }
        }
        for (i, s) in a.in_sync.iter().enumerate() {
            if !a.replicas.contains(s) {
                return Err(invalid(p, "an in-sync node is not a replica"));
            }
            if a.in_sync[..i].contains(s) {
                return Err(invalid(p, "an in-sync node is listed twice"));
            }
            if member(s)?.state == MemberState::Dead {
                return Err(Refused::DeadMember(*s));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn member(n: NodeId) -> Member {
        Member {
            name: format!("n{n}"),
            cluster_addr: format!("127.0.0.1:{}", 17000 + n).parse().unwrap(),
            client_addr: format!("127.0.0.1:{}", 7000 + n),
            tls_client_addr: None,
            state: MemberState::Active,
        }
    }

    fn assignment(primary: NodeId, replicas: &[NodeId]) -> Assignment {
        Assignment::new(primary, replicas.to_vec(), replicas.to_vec())
    }

    /// Three members, two partitions: 1 (replica 2) and 2 (replica 3).
    fn formed() -> SiteMetadata {
        let mut s = SiteMetadata::default();
        let members = (1..=3).map(|n| (n, member(n))).collect();
        let out = s.apply(&Command::Form {
            members,
            partitions: vec![assignment(1, &[2]), assignment(2, &[3])],
            data_incarnation: 7,
        });
        assert_eq!(out, Ok(1));
        s
    }

    #[test]
    fn form_once() {
        let mut s = formed();
        assert_eq!(
            s.apply(&Command::Form {
                members: BTreeMap::new(),
                partitions: vec![],
                data_incarnation: 9
            }),
            Err(Refused::AlreadyFormed)
        );
        // The first Form committed chose the site's data incarnation.
        assert_eq!(s.data_incarnation, 7);
        let t = s.table.as_ref().unwrap();
        assert!(t.partitions.iter().all(|a| a.epoch == 1));
        let mut fresh = SiteMetadata::default();
        let bad = Command::Form {
            members: BTreeMap::new(),
            partitions: vec![assignment(1, &[])],
            data_incarnation: 7,
        };
        assert_eq!(fresh.apply(&bad), Err(Refused::UnknownMember(1)));
        assert_eq!(fresh, SiteMetadata::default());
    }

    #[test]
    fn set_partition_is_compare_and_set_on_the_partition_epoch() {
        let mut s = formed();
        let set = |expected_epoch| Command::SetPartition {
            partition: 0,
            primary: 2,
            replicas: vec![1, 3],
            in_sync: vec![3],
            expected_epoch,
        };
        assert_eq!(s.apply(&set(1)), Ok(2));
        assert_eq!(s.table.as_ref().unwrap().epoch, 2);
        assert_eq!(
            s.apply(&set(1)),
            Err(Refused::StaleEpoch {
                expected: 1,
                current: 2
            })
        );
        // The same owners again change nothing and bump nothing.
        assert_eq!(s.apply(&set(2)), Ok(2));
        // The other partition kept its epoch, and its own compare-and-set.
        let t = s.table.as_ref().unwrap();
        assert_eq!(
            (t.partitions[0].epoch, t.partitions[1].epoch, t.epoch),
            (2, 1, 2)
        );
        let cmd = Command::RemoveFromInSync {
            partition: 1,
            node: 3,
            expected_epoch: 1,
        };
        assert_eq!(s.apply(&cmd), Ok(3));
        assert_eq!(
            s.table.as_ref().unwrap().partitions[1].in_sync,
            Vec::<NodeId>::new()
        );
    }

    #[test]
    fn invalid_assignments_are_refused() {
        let mut s = formed();
        let set = |primary, replicas: Vec<NodeId>, in_sync: Vec<NodeId>| Command::SetPartition {
            partition: 0,
            primary,
            replicas,
            in_sync,
            expected_epoch: 1,
        };
        let before = s.clone();
        assert_eq!(
            s.apply(&set(9, vec![], vec![])),
            Err(Refused::UnknownMember(9))
        );
        assert!(matches!(
            s.apply(&set(1, vec![1], vec![])),
            Err(Refused::Invalid { .. })
        ));
        assert!(matches!(
            s.apply(&set(1, vec![2, 2], vec![])),
            Err(Refused::Invalid { .. })
        ));
        assert!(matches!(
            s.apply(&set(1, vec![2], vec![3])),
            Err(Refused::Invalid { .. })
        ));
        let cmd = Command::AddToInSync {
            partition: 0,
            node: 3,
            expected_epoch: 1,
        };
        assert!(matches!(s.apply(&cmd), Err(Refused::Invalid { .. })));
        let cmd = Command::RemoveFromInSync {
            partition: 7,
            node: 3,
            expected_epoch: 1,
        };
        assert_eq!(s.apply(&cmd), Err(Refused::NoSuchPartition(7)));
        assert_eq!(s, before);
    }

    #[test]
    fn in_sync_round_trip() {
        let mut s = formed();
        assert_eq!(
            s.apply(&Command::RemoveFromInSync {
                partition: 0,
                node: 2,
                expected_epoch: 1
            }),
            Ok(2)
        );
        // Removing again is a no-op at the same epoch.
        assert_eq!(
            s.apply(&Command::RemoveFromInSync {
                partition: 0,
                node: 2,
                expected_epoch: 2
            }),
            Ok(2)
        );
        assert_eq!(
            s.apply(&Command::AddToInSync {
                partition: 0,
                node: 2,
                expected_epoch: 2
            }),
            Ok(3)
        );
        assert_eq!(s.table.as_ref().unwrap().partitions[0].in_sync, vec![2]);
    }

    #[test]
    fn many_replicas_enter_their_in_sync_sets_in_one_command_each_on_its_own() {
        let mut s = formed();
        for p in 0..2 {
            let epoch = s.table.as_ref().unwrap().partitions[p].epoch;
            let replica = s.table.as_ref().unwrap().partitions[p].replicas[0];
            s.apply(&Command::RemoveFromInSync {
                partition: p as u16,
                node: replica,
                expected_epoch: epoch,
            })
            .unwrap();
        }
        let t = s.table.clone().unwrap();
        let entry = |p: usize, epoch: u64| InSyncEntry {
            partition: p as u16,
            node: t.partitions[p].replicas[0],
            expected_epoch: epoch,
        };
        // One stale entry is refused, the other applied: the command counts.
        let many = Command::AddManyToInSync {
            entries: vec![entry(0, t.partitions[0].epoch), entry(1, 0)],
        };
        assert_eq!(s.apply(&many), Ok(t.epoch + 1));
        let after = s.table.as_ref().unwrap();
        assert_eq!(after.partitions[0].in_sync, t.partitions[0].replicas);
        assert!(after.partitions[1].in_sync.is_empty());
        // All refused: the first refusal, and nothing changes.
        let before = s.clone();
        let many = Command::AddManyToInSync {
            entries: vec![
                entry(1, 0),
                InSyncEntry {
                    partition: 7,
                    node: 2,
                    expected_epoch: 1,
                },
            ],
        };
        assert!(matches!(s.apply(&many), Err(Refused::StaleEpoch { .. })));
        assert_eq!(s, before);
    }

    #[test]
    fn a_dead_member_leaves_every_in_sync_set_and_cannot_be_removed_while_it_holds_copies() {
        let mut s = formed();
        assert_eq!(s.apply(&Command::MarkDead { id: 3 }), Ok(2));
        let t = s.table.as_ref().unwrap();
        assert_eq!((t.partitions[0].epoch, t.partitions[1].epoch), (1, 2));
        assert!(t.partitions[1].in_sync.is_empty());
        assert_eq!(
            s.apply(&Command::AddToInSync {
                partition: 1,
                node: 3,
                expected_epoch: 2
            }),
            Err(Refused::DeadMember(3))
        );
        assert_eq!(
            s.apply(&Command::MarkLeaving { id: 3 }),
            Err(Refused::DeadMember(3))
        );
        assert_eq!(
            s.apply(&Command::RemoveMember { id: 3 }),
            Err(Refused::StillHolds(3))
        );
        let cmd = Command::SetPartition {
            partition: 1,
            primary: 2,
            replicas: vec![1],
            in_sync: vec![],
            expected_epoch: 2,
        };
        assert_eq!(s.apply(&cmd), Ok(3));
        assert_eq!(s.apply(&Command::RemoveMember { id: 3 }), Ok(3));
        assert!(!s.members.contains_key(&3));
        // It comes back as a new member.
        let m = member(3);
        let cmd = Command::AddMember {
            id: 3,
            name: m.name,
            cluster_addr: m.cluster_addr,
            client_addr: m.client_addr,
            tls_client_addr: None,
        };
        assert_eq!(s.apply(&cmd), Ok(3));
        assert_eq!(s.active_members(), vec![1, 2, 3]);
    }

    #[test]
    fn join_gives_the_next_id_or_the_old_one_and_stops_at_the_limit() {
        let mut s = SiteMetadata::default();
        let join = |port: u64| Command::Join {
            name: format!("j{port}"),
            cluster_addr: format!("127.0.0.1:{port}").parse().unwrap(),
            client_addr: String::new(),
            tls_client_addr: None,
        };
        assert_eq!(s.apply(&join(9001)), Err(Refused::NotFormed));
        let mut s = formed();
        assert_eq!(s.apply(&join(9001)), Ok(4));
        assert_eq!(s.apply(&join(9001)), Ok(4), "a restart keeps its id");
        // Another name at a live member's address: refused (it would
        // take that member's clients); once the member is dead, its place.
        let before = s.clone();
        assert!(matches!(
            s.apply(&join(17002)),
            Err(Refused::AddressTaken { id: 2, .. })
        ));
        assert_eq!(s, before);
        s.members.get_mut(&2).unwrap().state = MemberState::Dead;
        assert_eq!(
            s.apply(&join(17002)),
            Ok(2),
            "a dead seed's address keeps the seed's id"
        );
        assert_eq!(s.members[&2].name, "j17002");
        for want in 5..=MAX_MEMBER_ID {
            assert_eq!(s.apply(&join(9000 + want)), Ok(want));
        }
        let before = s.clone();
        assert_eq!(s.apply(&join(1)), Err(Refused::Full));
        assert_eq!(s, before);
    }

    #[test]
    fn a_join_under_a_members_name_from_another_address_is_refused() {
        let mut s = formed();
        let name = s.members[&2].name.clone();
        let join = |port: u16| Command::Join {
            name: name.clone(),
            cluster_addr: SocketAddr::from(([127, 0, 0, 1], port)),
            client_addr: String::new(),
            tls_client_addr: None,
        };
        let before = s.clone();
        assert_eq!(
            s.apply(&join(9999)),
            Err(Refused::NameTaken {
                name: name.clone(),
                id: 2
            })
        );
        assert_eq!(s, before);
        let own = s.members[&2].cluster_addr.port();
        assert_eq!(
            s.apply(&join(own)),
            Ok(2),
            "the member itself, at its own address, rejoins"
        );
    }

    #[test]
    fn a_handover_is_void_once_its_target_is_not_in_sync() {
        let mut s = formed();
        let mut t = s.table.clone().unwrap().partitions;
        t[0].moving_to = Some(2);
        t[1].moving_to = Some(1); // not a replica of partition 1: void at once
        assert_eq!(
            s.apply(&Command::SetTable {
                partitions: t,
                expected_epoch: 1
            }),
            Ok(2)
        );
        let parts = &s.table.as_ref().unwrap().partitions;
        assert_eq!(
            (parts[0].moving_to, parts[1].moving_to, parts[1].epoch),
            (Some(2), None, 1)
        );
        assert_eq!(s.apply(&Command::MarkDead { id: 2 }), Ok(3));
        assert_eq!(s.table.as_ref().unwrap().partitions[0].moving_to, None);
    }

    fn arb_command() -> impl Strategy<Value = Command> {
        let node = 0u64..5;
        let nodes = proptest::collection::vec(0u64..5, 0..4);
        prop_oneof![
            node.clone().prop_map(|id| Command::MarkDead { id }),
            node.clone().prop_map(|id| Command::MarkLeaving { id }),
            node.clone().prop_map(|id| Command::RemoveMember { id }),
            node.clone().prop_map(|id| {
                let m = member(id);
                Command::AddMember {
                    id,
                    name: m.name,
                    cluster_addr: m.cluster_addr,
                    client_addr: m.client_addr,
                    tls_client_addr: None,
                }
            }),
            node.clone().prop_map(|id| {
                let m = member(id + 3);
                Command::Join {
                    name: m.name,
                    cluster_addr: m.cluster_addr,
                    client_addr: m.client_addr,
                    tls_client_addr: None,
                }
            }),
            (0u16..3, node.clone(), nodes.clone(), nodes, 0u64..6).prop_map(
                |(partition, primary, replicas, in_sync, expected_epoch)| {
                    Command::SetPartition {
                        partition,
                        primary,
                        replicas,
                        in_sync,
                        expected_epoch,
                    }
                }
            ),
            (0u16..3, node.clone(), 0u64..6).prop_map(|(partition, node, expected_epoch)| {
                Command::RemoveFromInSync {
                    partition,
                    node,
                    expected_epoch,
                }
            }),
            (0u16..3, node.clone(), 0u64..6).prop_map(|(partition, node, expected_epoch)| {
                Command::AddToInSync {
                    partition,
                    node,
                    expected_epoch,
                }
            }),
            proptest::collection::vec((0u16..3, node.clone(), 0u64..6), 0..4).prop_map(|v| {
                Command::AddManyToInSync {
                    entries: v
                        .into_iter()
                        .map(|(partition, node, expected_epoch)| InSyncEntry {
                            partition,
                            node,
                            expected_epoch,
                        })
                        .collect(),
                }
            }),
            (node.clone(), 0u64..4).prop_map(|(id, seq)| Command::Restarted {
                id,
                whole: seq % 2 == 0,
                copies: (0..3)
                    .map(|partition| crate::metadata::DiskCopy {
                        partition,
                        next_seq: seq + u64::from(partition),
                        hlc: 1,
                        site: 1,
                    })
                    .collect(),
            }),
            node.clone().prop_map(|id| Command::Revoke { id }),
            (0u16..3, node, 0u64..8).prop_map(|(p, n, expected_epoch)| Command::Resolve {
                partitions: vec![(p, n)],
                expected_epoch,
            }),
        ]
    }

    proptest! {
        #[test]
        fn invariants_hold_after_any_commands(cmds in proptest::collection::vec(arb_command(), 0..40)) {
            let mut s = formed();
            for cmd in &cmds {
                let before = s.clone();
                let out = s.apply(cmd);
                if out.is_err() {
                    prop_assert_eq!(&s, &before, "a refused command changed the state");
                }
                let t = s.table.as_ref().unwrap();
                let old = before.table.as_ref().unwrap();
                prop_assert!(t.epoch >= old.epoch);
                for (p, w) in &s.waiting {
                    prop_assert!((*p as usize) < t.partitions.len());
                    prop_assert!(w.complete.iter().all(|n| s.members.contains_key(n)));
                }
                for (a, o) in t.partitions.iter().zip(&old.partitions) {
                    prop_assert!(s.members.contains_key(&a.primary));
                    prop_assert!(a.replicas.iter().all(|b| s.members.contains_key(b) && *b != a.primary));
                    prop_assert!(a.in_sync.iter().all(|n| a.replicas.contains(n)));
                    prop_assert!(a.in_sync.iter().all(|n| s.members[n].state != MemberState::Dead));
                    prop_assert!(a.moving_to.is_none_or(|n| a.in_sync.contains(&n)));
                    prop_assert!(a.epoch <= t.epoch);
                    if a != o {
                        prop_assert!(a.epoch > o.epoch && a.epoch == t.epoch);
                    }
                }
            }
        }
    }
}

//! The metadata group end to end: members in one process on loopback, each
//! with its own store directory, talking over real TCP. Waits poll the
//! members' state against deadlines; nothing sleeps and hopes.
//!
//! The tests run on tokio's single-threaded test runtime, so nothing runs
//! between two statements without an `.await` (a restarted member's
//! recovered state can be read before any peer reaches it).

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

use super::*;

const SITE: u16 = 9;
const PARTITIONS: u16 = 8;
const LEADER_WITHIN: Duration = Duration::from_secs(5);
const APPLIED_WITHIN: Duration = Duration::from_secs(10);

struct Site {
    dir: tempfile::TempDir,
    seeds: Vec<Seed>,
    members: Vec<Option<Metadata>>,
    tweak: fn(&mut MetadataConfig),
}

fn no_tweak(_: &mut MetadataConfig) {}

impl Site {
    fn config(&self, id: NodeId) -> MetadataConfig {
        let mut c = MetadataConfig::new(id, SITE, self.dir_of(id));
        c.heartbeat = Duration::from_millis(100);
        c.election_timeout = Duration::from_millis(500);
        c.propose_timeout = Duration::from_secs(10);
        (self.tweak)(&mut c);
        c
    }

    fn dir_of(&self, id: NodeId) -> PathBuf {
        self.dir.path().join(format!("n{id}"))
    }

    /// Three members, formed (every seed calls `form`, as nodes will).
    async fn form(tweak: fn(&mut MetadataConfig)) -> Site {
        let mut listeners = Vec::new();
        let mut seeds = Vec::new();
        for id in 1..=3u64 {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            seeds.push(Seed {
                id,
                raft_addr: l.local_addr().unwrap().to_string(),
                name: format!("n{id}"),
                cluster_addr: format!("127.0.0.1:{}", 17000 + id).parse().unwrap(),
                client_addr: format!("127.0.0.1:{}", 7000 + id),
                tls_client_addr: None,
            });
            listeners.push(l);
        }
        let mut site = Site {
            dir: tempfile::tempdir().unwrap(),
            seeds,
            members: Vec::new(),
            tweak,
        };
        for (i, l) in listeners.into_iter().enumerate() {
            let m = Metadata::start(site.config(i as u64 + 1), Some(l))
                .await
                .unwrap();
            site.members.push(Some(m));
        }
        let (a, b, c) = (site.member(1), site.member(2), site.member(3));
        let seeds = &site.seeds;
        let (ra, rb, rc) = tokio::join!(
            a.form(seeds, PARTITIONS, 1),
            b.form(seeds, PARTITIONS, 1),
            c.form(seeds, PARTITIONS, 1)
        );
        ra.unwrap();
        rb.unwrap();
        rc.unwrap();
        site
    }

    fn member(&self, id: NodeId) -> &Metadata {
        self.members[id as usize - 1]
            .as_ref()
            .expect("member is running")
    }

    fn running(&self) -> Vec<&Metadata> {
        self.members.iter().flatten().collect()
    }

    async fn stop(&mut self, id: NodeId) {
        let m = self.members[id as usize - 1]
            .take()
            .expect("member is running");
        m.shutdown().await;
    }

    async fn restart(&mut self, id: NodeId) -> &Metadata {
        let l = TcpListener::bind(&self.seeds[id as usize - 1].raft_addr)
            .await
            .unwrap();
        let m = Metadata::start(self.config(id), Some(l)).await.unwrap();
        self.members[id as usize - 1] = Some(m);
        self.member(id)
    }

    /// The leader every running member agrees on.
    async fn leader(&self) -> NodeId {
        let deadline = Instant::now() + LEADER_WITHIN;
        loop {
            let running = self.running();
            let seen: Vec<Option<NodeId>> = running.iter().map(|m| m.leader()).collect();
            if let Some(Some(l)) = seen.first() {
                if seen.iter().all(|s| *s == Some(*l)) && running.iter().any(|m| m.id() == *l) {
                    return *l;
                }
            }
            assert!(
                Instant::now() < deadline,
                "no agreed leader within {LEADER_WITHIN:?}: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Waits until every running member has applied a table at `epoch`,
    /// and returns it (the same everywhere).
    async fn all_at(&self, epoch: u64) -> Table {
        let mut tables = Vec::new();
        for m in self.running() {
            let s = m
                .wait_for(APPLIED_WITHIN, |s| {
                    s.table.as_ref().is_some_and(|t| t.epoch >= epoch)
                })
                .await;
            let s = s.unwrap_or_else(|| {
                panic!(
                    "member {} did not reach epoch {epoch}: {:?}",
                    m.id(),
                    m.current()
                )
            });
            tables.push(s.table.clone().unwrap());
        }
        assert!(
            tables.windows(2).all(|w| w[0] == w[1]),
            "members disagree: {tables:?}"
        );
        tables.pop().unwrap()
    }
}

fn set_p0(
    primary: NodeId,
    replicas: &[NodeId],
    in_sync: &[NodeId],
    expected_epoch: u64,
) -> Command {
    Command::SetPartition {
        partition: 0,
        primary,
        replicas: replicas.to_vec(),
        in_sync: in_sync.to_vec(),
        expected_epoch,
    }
}

#[tokio::test]
async fn three_members_form_a_site_and_see_every_change_alike() {
    let site = Site::form(no_tweak).await;
    let table = site.all_at(1).await;
    let mut expected = rebalance::initial(PARTITIONS, &[1, 2, 3], 1);
    expected.iter_mut().for_each(|a| a.epoch = 1);
    assert_eq!(
        table,
        Table {
            epoch: 1,
            partitions: expected
        }
    );
    for m in site.running() {
        let names: Vec<String> = m
            .current()
            .members
            .values()
            .map(|m| m.name.clone())
            .collect();
        assert_eq!(names, ["n1", "n2", "n3"]);
    }

    let leader = site.leader().await;
    let follower = site.member(if leader == 1 { 2 } else { 1 });
    let mut watch = follower.subscribe();
    // Proposed on a follower: forwarded to the leader.
    assert_eq!(follower.propose(set_p0(2, &[3], &[3], 1)).await.unwrap(), 2);
    let cmd = Command::RemoveFromInSync {
        partition: 0,
        node: 3,
        expected_epoch: 2,
    };
    assert_eq!(site.member(leader).propose(cmd).await.unwrap(), 3);
    // The watch saw the change without anyone asking.
    let seen = tokio::time::timeout(
        APPLIED_WITHIN,
        watch.wait_for(|s| s.table.as_ref().is_some_and(|t| t.epoch == 3)),
    )
    .await
    .expect("the follower's watch saw epoch 3")
    .unwrap()
    .clone();
    let p0 = &seen.table.as_ref().unwrap().partitions[0];
    assert_eq!(
        *p0,
        Assignment {
            epoch: 3,
            ..Assignment::new(2, vec![3], vec![])
        }
    );
    let table = site.all_at(3).await;
    assert_eq!(table.partitions[0], *p0);
    assert!(table.partitions[1..].iter().all(|a| a.epoch == 1));

    // A compare-and-set against an epoch that has moved on is refused and
    // changes nothing.
    match follower.propose(set_p0(1, &[2], &[2], 1)).await {
        Err(MetadataError::Refused(Refused::StaleEpoch {
            expected: 1,
            current: 3,
        })) => {}
        other => panic!("expected a stale-epoch refusal, got {other:?}"),
    }
    let cmd = Command::AddToInSync {
        partition: 0,
        node: 3,
        expected_epoch: 3,
    };
    assert_eq!(follower.propose(cmd).await.unwrap(), 4);
    let table = site.all_at(4).await;
    assert_eq!(table.partitions[0].in_sync, vec![3]);
}

#[tokio::test]
async fn the_survivors_elect_a_new_leader_when_the_leader_dies_and_keep_committing() {
    let mut site = Site::form(no_tweak).await;
    let old = site.leader().await;
    let died = Instant::now();
    site.stop(old).await;
    let new = site.leader().await;
    assert_ne!(new, old);
    eprintln!(
        "new leader {new} {:?} after the old one stopped",
        died.elapsed()
    );

    let survivor = site.running()[0];
    assert_eq!(survivor.propose(set_p0(2, &[3], &[3], 1)).await.unwrap(), 2);
    // Marking it dead takes it out of the in-sync sets: a later epoch.
    let epoch = survivor
        .propose(Command::MarkDead { id: old })
        .await
        .unwrap();
    assert!(epoch > 2);
    let table = site.all_at(epoch).await;
    assert_eq!(table.partitions[0].primary, 2);
    assert!(table.partitions.iter().all(|a| !a.in_sync.contains(&old)));
    for m in site.running() {
        assert_eq!(m.current().members[&old].state, MemberState::Dead);
    }
}

/// Stops a follower, commits ten changes without it, restarts it on its
/// directory and checks it recovered what it had and caught up. Returns
/// the log index it stopped at and the member's snapshot after catching up.
async fn away_and_back(
    tweak: fn(&mut MetadataConfig),
    purged_while_away: bool,
) -> Option<openraft::LogId<NodeId>> {
    let mut site = Site::form(tweak).await;
    let leader = site.leader().await;
    let away = if leader == 3 { 2 } else { 3 };
    assert_eq!(
        site.member(leader)
            .propose(set_p0(2, &[3], &[3], 1))
            .await
            .unwrap(),
        2
    );
    site.all_at(2).await;
    let before = site.member(away).current();
    let away_last = site
        .member(away)
        .raft
        .metrics()
        .borrow()
        .last_log_index
        .unwrap();
    site.stop(away).await;

    // While it is away: in-sync toggles on partition 1 (epochs 3..=12).
    let node = rebalance::initial(PARTITIONS, &[1, 2, 3], 1)[1].replicas[0];
    let mut epoch = 1;
    for i in 0..10 {
        let cmd = if i % 2 == 0 {
            Command::RemoveFromInSync {
                partition: 1,
                node,
                expected_epoch: epoch,
            }
        } else {
            Command::AddToInSync {
                partition: 1,
                node,
                expected_epoch: epoch,
            }
        };
        epoch = site.member(leader).propose(cmd).await.unwrap();
    }
    assert_eq!(epoch, 12);
    if purged_while_away {
        // The leader no longer has the entries the member missed.
        let mut metrics = site.member(leader).raft.metrics();
        let purged_past = metrics.wait_for(|m| m.purged.is_some_and(|p| p.index > away_last));
        let seen = matches!(
            tokio::time::timeout(APPLIED_WITHIN, purged_past).await,
            Ok(Ok(_))
        );
        assert!(seen, "the leader never purged past {away_last}");
        let purged = metrics.borrow().purged.map(|p| p.index);
        eprintln!(
            "member {away} stopped at log index {away_last}; the leader purged up to {purged:?}"
        );
    }

    // Back on the same directory: what it had applied is there before any
    // peer has reached it...
    let back = site.restart(away).await;
    assert_eq!(*back.current(), *before);
    // ...and it catches up with what it missed.
    let table = site.all_at(12).await;
    assert_eq!(table.partitions[1].epoch, 12);
    let snapshot = site.member(away).raft.metrics().borrow().snapshot;
    // And it takes part again: a command proposed on it commits everywhere.
    assert_eq!(
        site.member(away)
            .propose(set_p0(2, &[1], &[], 2))
            .await
            .unwrap(),
        13
    );
    assert_eq!(site.all_at(13).await.partitions[0].replicas, vec![1]);
    snapshot
}

#[tokio::test]
async fn a_restarted_member_recovers_its_log_and_catches_up() {
    let snapshot = away_and_back(no_tweak, false).await;
    assert_eq!(snapshot, None, "recovered and caught up from the log alone");
}

#[tokio::test]
async fn a_member_that_missed_purged_entries_catches_up_from_a_snapshot() {
    // Snapshot every few entries and keep no log behind it.
    let tweak = |c: &mut MetadataConfig| {
        c.snapshot_every = 3;
        c.keep_behind_snapshot = 0;
    };
    assert!(away_and_back(tweak, true).await.is_some());
}

#[tokio::test]
async fn a_fourth_node_joins_the_group_counts_in_its_quorum_and_the_dead_leave_it() {
    let mut site = Site::form(no_tweak).await;
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let seed = Seed {
        id: 4,
        raft_addr: l.local_addr().unwrap().to_string(),
        name: "n4".into(),
        cluster_addr: "127.0.0.1:17004".parse().unwrap(),
        client_addr: "127.0.0.1:7004".into(),
        tls_client_addr: None,
    };
    let fourth = Metadata::start(site.config(4), Some(l)).await.unwrap();
    assert!(!fourth.current().is_formed());
    site.members.push(Some(fourth));
    site.seeds.push(seed.clone());

    // Asked of a member that may not be the leader: forwarded.
    site.member(1)
        .add_voter(4, &seed.raft_addr, APPLIED_WITHIN)
        .await
        .unwrap();
    let cmd = Command::AddMember {
        id: 4,
        name: seed.name.clone(),
        cluster_addr: seed.cluster_addr,
        client_addr: seed.client_addr.clone(),
        tls_client_addr: None,
    };
    site.member(2).propose(cmd).await.unwrap();
    site.all_at(1).await;
    for m in site.running() {
        let seen = m
            .wait_for(APPLIED_WITHIN, |s| s.members.contains_key(&4))
            .await;
        assert!(seen.is_some(), "member {} never saw member 4", m.id());
    }
    let leader = site.leader().await;
    let voters: Vec<NodeId> = site
        .member(leader)
        .raft
        .metrics()
        .borrow()
        .membership_config
        .voter_ids()
        .collect();
    assert_eq!(voters, [1, 2, 3, 4]);
    // Again: nothing changes.
    site.member(4)
        .add_voter(4, &seed.raft_addr, APPLIED_WITHIN)
        .await
        .unwrap();

    // Four voters need three: with the leader gone, nothing commits
    // unless the new member takes part.
    site.stop(leader).await;
    let new = site.leader().await;
    assert_ne!(new, leader);
    let epoch = site
        .member(4)
        .propose(Command::MarkDead { id: leader })
        .await
        .unwrap();
    site.all_at(epoch).await;
    site.member(4).remove_voter(leader).await.unwrap();
    let new = site.leader().await;
    let voters: Vec<NodeId> = site
        .member(new)
        .raft
        .metrics()
        .borrow()
        .membership_config
        .voter_ids()
        .collect();
    assert_eq!(
        voters,
        [1, 2, 3, 4]
            .into_iter()
            .filter(|v| *v != leader)
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn strangers_on_the_metadata_listener_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let _m = Metadata::start(MetadataConfig::new(1, SITE, dir.path()), Some(l))
        .await
        .unwrap();

    let mut other_site = bytes::BytesMut::new();
    rpc::Hello {
        site_id: SITE + 1,
        from: 2,
        to: 1,
    }
    .encode(&mut other_site);
    let mut wrong_node = bytes::BytesMut::new();
    rpc::Hello {
        site_id: SITE,
        from: 2,
        to: 7,
    }
    .encode(&mut wrong_node);
    for hello in [
        &b"*1\r\n$4\r\nPING\r\n"[..],
        b"GET / HTTP/1.1\r\n\r\n",
        &other_site,
        &wrong_node,
    ] {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(hello).await.unwrap();
        let mut buf = [0u8; 64];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("closed promptly");
        assert!(
            matches!(n, Ok(0) | Err(_)),
            "{:?} got an answer",
            String::from_utf8_lossy(hello)
        );
    }
    // A real peer gets the listener's hello back.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let mut hello = bytes::BytesMut::new();
    rpc::Hello {
        site_id: SITE,
        from: 2,
        to: 1,
    }
    .encode(&mut hello);
    s.write_all(&hello).await.unwrap();
    let mut buf = bytes::BytesMut::new();
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some((kind, p)) = rpc::decode_frame(&mut buf).unwrap() {
                return rpc::Hello::decode(kind, p).unwrap();
            }
            assert!(s.read_buf(&mut buf).await.unwrap() > 0);
        }
    })
    .await
    .unwrap();
    assert_eq!(
        answer,
        rpc::Hello {
            site_id: SITE,
            from: 1,
            to: 2
        }
    );
}

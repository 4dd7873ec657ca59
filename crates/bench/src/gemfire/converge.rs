//! Waiting for the two sites of the GemFire workload to converge: site 1's
//! publishers drained, then both sites holding the same objects.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::sites::{sample, Node};
use super::{NodeCounters, Workload};

/// Samples every node once a second from `first` on (handing each sample
/// to `each`) until no site-1 publisher has anything queued for site 2.
pub(super) fn drained(
    nodes: &[Node],
    timeout: Duration,
    first: Instant,
    mut each: impl FnMut(Vec<NodeCounters>),
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut next = first;
    loop {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += Duration::from_secs(1);
        let now = sample(nodes);
        let queued: u64 = nodes
            .iter()
            .zip(&now)
            .filter(|(n, _)| n.site == 1)
            .map(|(_, c)| c.queue)
            .sum();
        each(now);
        if queued == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("site 1 still has {queued} events queued for site 2 after {timeout:?}");
        }
    }
}

/// Every object as a site holds it: field -> value, per key (a blob is
/// one field, ""), pipelined, so a remote site costs a few round trips, not
/// one per object.
fn contents(
    conn: &mut redis::cluster::ClusterConnection,
    w: &Workload,
) -> anyhow::Result<Vec<BTreeMap<String, Vec<u8>>>> {
    let mut all = Vec::with_capacity(w.objects);
    for chunk in (0..w.objects).collect::<Vec<_>>().chunks(200) {
        let mut pipe = redis::cluster::cluster_pipe();
        for i in chunk {
            pipe.cmd(if w.blob { "GET" } else { "HGETALL" })
                .arg(format!("object:{i}"));
        }
        if w.blob {
            let part: Vec<Option<Vec<u8>>> = pipe.query(conn)?;
            all.extend(part.into_iter().map(|v| {
                v.map(|v| BTreeMap::from([(String::new(), v)]))
                    .unwrap_or_default()
            }));
        } else {
            let part: Vec<BTreeMap<String, Vec<u8>>> = pipe.query(conn)?;
            all.extend(part);
        }
    }
    Ok(all)
}

/// Polls until both sites return the same contents for every object.
pub(super) fn wait_identical(
    a: &mut redis::cluster::ClusterConnection,
    b: &mut redis::cluster::ClusterConnection,
    w: &Workload,
    timeout: Duration,
) -> anyhow::Result<()> {
    let (deadline, objects, fields) = (
        Instant::now() + timeout,
        w.objects,
        if w.blob { 1 } else { 4 },
    );
    loop {
        let (x, y) = (contents(a, w)?, contents(b, w)?);
        if x == y && x.iter().all(|h| h.len() == fields) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let differ = x.iter().zip(&y).filter(|(p, q)| p != q).count();
            bail!("sites still differ in {differ} of {objects} objects after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

//! Commands that are not for applications: `WANAPPLY` and `WANSETTLED`
//! (the WAN receiver sends them) and `BACKUPJOB` (`deltagrid backup` sends it). `DEBUG`, for
//! tests, is in [`crate::debug_cmd`].

use commands::args::owned;
use commands::CmdError;

use crate::session::{Reply, Session};

/// `WANAPPLY source-site payload`: changes from a remote site, sent by
/// this site's WAN receiver to the primary of their keys. Replies with
/// one outcome byte per change (see `wan::local::Outcome`).
pub fn wanapply(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let source = commands::args::int(a[1])?;
    if !(1..=u16::MAX as i64).contains(&source) || source == s.node.settings.site_id as i64 {
        return Err(CmdError::other(format!(
            "ERR WANAPPLY from site {source}, which is not a remote site"
        )));
    }
    if let Some(wan) = &s.node.wan {
        wan.check_data_incarnation();
    }
    let cluster = s.node.cluster.as_deref();
    let codes = wan::local::apply_payload(
        &s.node.ks,
        |p| cluster.is_none_or(|c| c.owns(p)),
        &owned(a[2]),
        s.id,
    )
    .map_err(|e| CmdError::other(format!("ERR {e}")))?;
    out.bulk(&codes);
    Ok(())
}

/// `WANSETTLED site-name incarnation payload`: settled marks from remote
/// site `site-name` on a link of this site's data incarnation
/// `incarnation` (see `wan::settled`), sent by this site's WAN receiver to
/// every other node of the site.
pub fn wansettled(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let Some(wan) = s.node.wan.as_ref() else {
        return Err(CmdError::other(
            "ERR WANSETTLED: this node has no WAN replication",
        ));
    };
    let site = String::from_utf8_lossy(a[1]);
    let incarnation = std::str::from_utf8(a[2])
        .ok()
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| CmdError::other("ERR WANSETTLED: the incarnation is not a number"))?;
    let marks = wan::settled::decode_marks(a[3], s.node.ks.partitions() as usize)
        .map_err(|e| CmdError::other(format!("ERR WANSETTLED: {e}")))?;
    wan.settled(&site, &marks, incarnation);
    out.simple("OK");
    Ok(())
}

/// `BACKUPJOB CREATE url id parent|- block-bytes chunk-bytes`, `BACKUPJOB RESTORE
/// url id reverse|forward`, `BACKUPJOB STATUS` (JSON): this node's part
/// of `deltagrid backup create|restore`, which sends them to every node.
pub fn backupjob(s: &mut Session, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
    let text = |i: usize| a.get(i).map(|b| String::from_utf8_lossy(b).into_owned());
    let jobs = &s.node.backups;
    let started = match (text(1).unwrap_or_default().to_ascii_lowercase().as_str(), a.len()) {
        ("status", 2) => {
            out.bulk(serde_json::to_string(&jobs.progress()).unwrap_or_default().as_bytes());
            return Ok(());
        }
        ("create", 7) => {
            let (url, id, parent) = (text(2).unwrap_or_default(), text(3).unwrap_or_default(), text(4));
            let block_bytes = commands::args::int(a[5])?.max(0) as usize;
            let chunk_bytes = commands::args::int(a[6])?.max(0) as usize;
            jobs.start_create(&url, &id, parent.filter(|p| p != "-"), (block_bytes, chunk_bytes))
        }
        ("restore", 5) => {
            let order =
                text(4).unwrap_or_default().parse().map_err(|e: String| CmdError::other(format!("ERR {e}")))?;
            jobs.start_restore(&text(2).unwrap_or_default(), &text(3).unwrap_or_default(), order)
        }
        _ => {
            return Err(CmdError::other(
                "ERR BACKUPJOB CREATE url id parent|- block-bytes chunk-bytes | RESTORE url id order | STATUS",
            ))
        }
    };
    started.map_err(|e| CmdError::other(format!("ERR {e}")))?;
    out.simple("OK");
    Ok(())
}

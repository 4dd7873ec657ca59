//! ACL users in a site: a change made on one member (ACL SETUSER, DELUSER,
//! LOAD) applies here at once, so the connection's next commands see it,
//! and is committed through the site's metadata before its reply leaves
//! ([`commit`]); every member installs what the metadata holds
//! ([`follow`]), so the change holds on every node of the site by the time
//! the client hears OK, and a member that restarts gets the users back
//! from the metadata.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cluster::metadata::site_acl::AclChange;
use cluster::metadata::Command;

use crate::node::Node;

/// A change made on this node, waiting to be committed to the site.
#[derive(Clone, Debug)]
pub struct Pending {
    pub change: AclChange,
    /// This node's users before the change, as an ACL file (what the
    /// site starts from if it had no users of its own yet).
    pub base: Vec<u8>,
}

/// How long a change may take to commit and reach this member.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Commits `changes` to the site's metadata, in order, and waits until
/// this member has installed them. On failure the users go back to what
/// the site holds, and the error says why.
pub async fn commit(node: &Node, changes: Vec<Pending>) -> Result<(), String> {
    let Some(md) = node.cluster.as_ref().and_then(|c| c.metadata.get()) else {
        return Err("this node has not joined its site yet".into());
    };
    for p in changes {
        let base = p.base.clone();
        let cmd = Command::ChangeAcl {
            change: p.change,
            base: p.base,
            pubsub_all: node.users.pubsub_default_all(),
        };
        let version = match md.propose(cmd).await {
            Ok(v) => v,
            Err(e) => {
                // Back to what the site holds (or, while it holds no
                // users, to this node's before the change).
                let meta = md.current();
                if meta.acl.version == 0 {
                    let all = node.users.pubsub_default_all();
                    if let Ok(acl) = acl::Acl::from_file(&base, "before the change", all) {
                        node.users.install(acl);
                    }
                } else {
                    node.users.site_version.store(0, Ordering::Release);
                    install(node, &meta);
                }
                return Err(format!("the site did not commit the ACL change: {e}"));
            }
        };
        if md
            .wait_for(COMMIT_TIMEOUT, |m| m.acl.version >= version)
            .await
            .is_none()
        {
            return Err("the committed ACL change did not reach this node in time".into());
        }
        install(node, &md.current());
        // Every member the site can reach enforces it before the client
        // hears OK (one that cannot be reached catches up from the
        // metadata when it comes back, before it serves again).
        let applied = md.applied_index();
        if let Some(cluster) = &node.cluster {
            if !cluster.members_applied(applied, COMMIT_TIMEOUT).await {
                tracing::warn!(
                    "an ACL change was committed, but not every member confirmed it in time"
                );
            }
        }
    }
    Ok(())
}

/// Installs the site's users when they are newer than this node's.
fn install(node: &Node, meta: &cluster::metadata::SiteMetadata) {
    let site = &meta.acl;
    let users = &node.users;
    if site.version == 0 || site.version <= users.site_version.load(Ordering::Acquire) {
        return;
    }
    users.site_version.store(site.version, Ordering::Release);
    users.install(site.users(users.pubsub_default_all()));
    crate::acl_cmd::enforce(node, site.reloaded);
}

/// Follows the site's metadata for the life of the node, installing each
/// new version of the users.
pub async fn follow(node: Arc<Node>) {
    let Some(cluster) = node.cluster.clone() else {
        return;
    };
    let md = loop {
        if let Some(md) = cluster.metadata.get() {
            break md;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut rx = md.subscribe();
    loop {
        let meta = rx.borrow_and_update().clone();
        install(&node, &meta);
        if rx.changed().await.is_err() {
            return;
        }
    }
}

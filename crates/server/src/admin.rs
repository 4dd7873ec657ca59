//! The admin HTTP endpoint: `/metrics` (Prometheus text), `/health`,
//! `/status` and `/wan/status` (JSON), open to anyone who reaches the port;
//! and requests that change state (`POST /wan/...`, `/cluster/leave`,
//! `/cluster/revoke`), which need `Authorization: Bearer <admin_token>`
//! (the `requirepass` when no `admin_token` is set; open only when neither
//! is). A minimal HTTP/1.1 server: one request per connection, request
//! head capped at 8 KiB, so a misbehaving scraper costs bounded memory.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::node::Node;

const MAX_HEAD: usize = 8 * 1024;

pub async fn serve(node: Arc<Node>, listener: TcpListener) {
    loop {
        if let Ok((stream, _)) = listener.accept().await {
            let node = node.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), handle(node, stream)).await;
            });
        }
    }
}

async fn handle(node: Arc<Node>, mut stream: TcpStream) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 || head.len() + n > MAX_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    if method == "POST" && !authorized(&node, &head) {
        node.metrics
            .admin_refused
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tracing::warn!("admin endpoint: refused {method} {path} without the admin token");
        let body = "this request needs the admin token: Authorization: Bearer <admin_token> (or the requirepass)\n";
        let resp = format!(
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Bearer\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(resp.as_bytes()).await?;
        return stream.shutdown().await;
    }
    let (status, ctype, body) = match (method, path) {
        ("GET", "/wan/status") => match &node.wan {
            Some(w) => (
                "200 OK",
                "application/json",
                serde_json::to_string(&w.status()).unwrap_or_default(),
            ),
            None => (
                "404 Not Found",
                "text/plain",
                "WAN replication is not configured on this node\n".to_string(),
            ),
        },
        ("POST", p) if p.starts_with("/wan/") => wan_control(&node, &p[5..], query),
        ("POST", "/cluster/leave") => cluster_leave(&node, query, false).await,
        ("POST", "/cluster/revoke") => cluster_leave(&node, query, true).await,
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4",
            node.metrics.render(&node.snapshot()),
        ),
        ("GET", "/health") => ("200 OK", "text/plain", "ok\n".to_string()),
        ("GET", "/status") => ("200 OK", "application/json", status_json(&node)),
        ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "method not allowed\n".to_string(),
        ),
    };
    let resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(resp.as_bytes()).await?;
    stream.shutdown().await
}

/// Whether the request head carries the admin token, when one is needed
/// (`admin_token`, else `requirepass`); compared in constant time.
fn authorized(node: &Node, head: &[u8]) -> bool {
    let want = node
        .settings
        .admin_token
        .clone()
        .or_else(|| node.runtime.requirepass.read().clone());
    let Some(want) = want.filter(|t| !t.is_empty()) else {
        return true;
    };
    let head = String::from_utf8_lossy(head);
    let given = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        let value = value.trim();
        (name.trim().eq_ignore_ascii_case("authorization")).then(|| {
            value
                .strip_prefix("Bearer ")
                .unwrap_or("")
                .trim()
                .to_string()
        })
    });
    let Some(given) = given else {
        return false;
    };
    acl::password::constant_time_eq(want.as_bytes(), given.as_bytes())
}

/// `POST /wan/{pause|resume|stop|resync}?target=NAME`.
fn wan_control(node: &Node, action: &str, query: &str) -> (&'static str, &'static str, String) {
    let Some(w) = &node.wan else {
        return (
            "404 Not Found",
            "text/plain",
            "WAN replication is not configured on this node\n".into(),
        );
    };
    let control = match action {
        "pause" => wan::Control::Pause,
        "resume" => wan::Control::Resume,
        "stop" => wan::Control::Stop,
        "resync" => wan::Control::Resync,
        _ => {
            return (
                "404 Not Found",
                "text/plain",
                format!("unknown WAN action {action:?}\n"),
            )
        }
    };
    let name = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("target="))
        .unwrap_or("");
    match w.target(name) {
        Some(t) => {
            t.control(control);
            ("200 OK", "text/plain", format!("{action} {name}: ok\n"))
        }
        None => (
            "404 Not Found",
            "text/plain",
            format!("no WAN target named {name:?}\n"),
        ),
    }
}

/// `POST /cluster/leave?node=NAME`: drains that member out of the site;
/// `POST /cluster/revoke?node=NAME`: no partition waits for that dead
/// member's disk any more.
async fn cluster_leave(
    node: &Node,
    query: &str,
    revoke: bool,
) -> (&'static str, &'static str, String) {
    let Some(c) = &node.cluster else {
        return (
            "404 Not Found",
            "text/plain",
            "this node is not in a site\n".into(),
        );
    };
    let name = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("node="))
        .unwrap_or("");
    let done = if revoke {
        c.revoke(name).await
    } else {
        c.leave(name).await
    };
    match done {
        Ok(msg) => ("200 OK", "text/plain", format!("{msg}\n")),
        Err(e) => ("409 Conflict", "text/plain", format!("{e}\n")),
    }
}

fn status_json(node: &Node) -> String {
    let s = node.snapshot();
    serde_json::json!({
        "node_id": node.settings.node_id,
        "version": env!("CARGO_PKG_VERSION"),
        "redis_version": crate::REDIS_VERSION,
        "site": { "id": node.settings.site_id, "name": node.settings.site_name, "partitions": node.settings.partitions },
        "listen": node.settings.listen.to_string(),
        "uptime_seconds": node.started.elapsed().as_secs(),
        "connected_clients": s.connected_clients,
        "keys": s.keys,
        "keys_with_expiry": s.expires,
        "used_memory": s.used_memory,
        "maxmemory": s.maxmemory,
        "partition_log_bytes": s.log_bytes,
        "changes": {
            "full": s.changes[0], "delta": s.changes[1], "delete": s.changes[2], "expire": s.changes[3],
        },
        "delta_bytes_saved": s.delta_bytes_saved,
        "cluster": node.cluster.as_ref().map(|c| site_json(&c.status())),
    })
    .to_string()
}

fn site_json(s: &cluster::SiteStatus) -> serde_json::Value {
    serde_json::json!({
        "formed": s.formed,
        "migrating": s.migrating,
        "lease": s.lease,
        "handovers": s.handovers,
        "epoch": s.epoch,
        "leader": s.leader,
        "primary_changes": s.primary_changes,
        "waiting": s.waiting.iter().map(|w| serde_json::json!({
            "partition": w.partition,
            "awaits": w.awaits,
        })).collect::<Vec<_>>(),
        "members": s.members.iter().map(|m| serde_json::json!({
            "node_id": m.node_id,
            "cluster_addr": m.cluster_addr,
            "client_addr": m.client_addr,
            "myself": m.myself,
            "connected": m.connected,
            "state": m.state,
            "primaries": m.primaries,
            "backups": m.replicas,
            "in_sync": m.in_sync,
            "replication_pending_bytes": m.pending_bytes,
            "replication_lag_changes": m.lag_changes,
        })).collect::<Vec<_>>(),
    })
}

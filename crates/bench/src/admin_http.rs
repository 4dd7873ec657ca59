//! What the WAN experiments ask a running node's admin HTTP endpoint
//! (`/wan/status`, `/wan/pause`, ...): one request without a body, on its
//! own connection, answered with the body when the status is 200.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{bail, Context};

/// How long a request may take to connect and to be written and answered.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// None: as long as the system takes.
    pub connect: Option<Duration>,
    pub io: Duration,
}

/// The samples taken while a run goes on: a node across a link that is
/// down costs a second and keeps its last counters.
pub const QUICK: Timeouts = Timeouts {
    connect: Some(Duration::from_secs(1)),
    io: Duration::from_secs(5),
};

/// Everything else: the node is expected to answer.
pub const PATIENT: Timeouts = Timeouts {
    connect: None,
    io: Duration::from_secs(10),
};

/// `METHOD path` to the admin endpoint at `addr`; the body on 200, else an
/// error with the endpoint's words (its body, or its status line).
pub fn request(addr: SocketAddr, method: &str, path: &str, t: Timeouts) -> anyhow::Result<String> {
    let mut s = match t.connect {
        Some(limit) => TcpStream::connect_timeout(&addr, limit),
        None => TcpStream::connect(addr),
    }
    .with_context(|| format!("connecting to admin endpoint {addr}"))?;
    s.set_read_timeout(Some(t.io))?;
    s.set_write_timeout(Some(t.io))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut resp = String::new();
    s.take(64 << 20).read_to_string(&mut resp)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    if !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or("");
        let why = Some(body.trim())
            .filter(|b| !b.is_empty())
            .unwrap_or(status);
        bail!("{addr}{path}: {why}");
    }
    Ok(body.to_string())
}

/// `/wan/status` as JSON; None when the node did not answer in time or
/// answered something else.
pub fn wan_status(addr: SocketAddr, t: Timeouts) -> Option<serde_json::Value> {
    request(addr, "GET", "/wan/status", t)
        .ok()
        .and_then(|b| serde_json::from_str(&b).ok())
}

/// A counter of a JSON answer, 0 when it is missing.
pub fn num(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

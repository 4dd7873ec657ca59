//! A client of the admin HTTP endpoint ([`crate::admin`]): one request
//! without a body, on its own connection, answered with the body when the
//! status is 200. The `deltagrid` CLI (cluster, wan, backup commands) and
//! the benchmarks use it; `DELTAGRID_ADMIN_TOKEN` in the environment is
//! sent as the admin token.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long a request may take to connect and to be written and answered.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// None: as long as the system takes.
    pub connect: Option<Duration>,
    pub io: Duration,
}

/// For samples taken while something goes on: a node across a link that
/// is down costs a second.
pub const QUICK: Timeouts = Timeouts {
    connect: Some(Duration::from_secs(1)),
    io: Duration::from_secs(5),
};

/// Everything else: the node is expected to answer.
pub const PATIENT: Timeouts = Timeouts {
    connect: None,
    io: Duration::from_secs(10),
};

/// Bytes of an answer read at most.
const MAX_ANSWER: u64 = 64 << 20;

/// `METHOD path` to the admin endpoint at `addr`; the body on 200, else an
/// error with the endpoint's words (its body, or its status line).
pub fn request(addr: &str, method: &str, path: &str, t: Timeouts) -> Result<String, String> {
    let fail = |e: std::io::Error| format!("admin endpoint {addr}: {e}");
    let mut s = match t.connect {
        Some(limit) => {
            let to = addr
                .to_socket_addrs()
                .map_err(fail)?
                .next()
                .ok_or_else(|| format!("admin endpoint {addr}: no address"))?;
            TcpStream::connect_timeout(&to, limit)
        }
        None => TcpStream::connect(addr),
    }
    .map_err(|e| format!("connecting to admin endpoint {addr}: {e}"))?;
    s.set_read_timeout(Some(t.io)).map_err(fail)?;
    s.set_write_timeout(Some(t.io)).map_err(fail)?;
    // State-changing requests carry the admin token, from the environment.
    let auth = std::env::var("DELTAGRID_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .map_err(fail)?;
    let mut resp = String::new();
    s.take(MAX_ANSWER).read_to_string(&mut resp).map_err(fail)?;
    let (head, body) = resp
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("{addr}{path}: malformed HTTP response"))?;
    if !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or("");
        let why = Some(body.trim())
            .filter(|b| !b.is_empty())
            .unwrap_or(status);
        return Err(format!("{addr}{path}: {why}"));
    }
    Ok(body.to_string())
}

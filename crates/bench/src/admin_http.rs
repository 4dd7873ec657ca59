//! What the WAN experiments ask a running node's admin HTTP endpoint
//! (`/wan/status`, `/wan/pause`, ...): one request without a body, on its
//! own connection, answered with the body when the status is 200.

use std::net::SocketAddr;

pub use server::admin_client::{Timeouts, PATIENT, QUICK};

/// `METHOD path` to the admin endpoint at `addr` (see
/// [`server::admin_client::request`]).
pub fn request(addr: SocketAddr, method: &str, path: &str, t: Timeouts) -> anyhow::Result<String> {
    server::admin_client::request(&addr.to_string(), method, path, t).map_err(anyhow::Error::msg)
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

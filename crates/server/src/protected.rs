//! Protected mode (Redis's, extended to every port): a node refuses to
//! start when a port other hosts can reach lets them in without proof.
//! Each check names the port and what would protect it:
//! - `listen` (and `tls_listen` unless client certificates are required):
//!   the default user needs a password or is off (`requirepass`, aclfile);
//! - `admin_listen`: `admin_token` or `requirepass` (its POST requests);
//! - `cluster_listen` and the seeds: `site.secret` (or TLS between nodes,
//!   once it exists), else a rogue process joins the site;
//! - `wan.listen`: `wan.secret`, else any process injects writes.
//!
//! `protected_mode = false` turns it off (test namespaces, trusted LANs).

use std::net::SocketAddr;

use crate::settings::NodeSettings;
use crate::tls::AuthClients;
use crate::users::Users;

/// Why the node must not start as configured, one line per open port.
pub fn check(s: &NodeSettings, users: &Users) -> Result<(), String> {
    if !s.protected_mode {
        return Ok(());
    }
    let open = |a: &SocketAddr| !a.ip().is_loopback();
    let default = users.current().default_user();
    let default_open = default.enabled() && default.nopass();
    let mut why = Vec::new();
    if default_open && open(&s.listen) {
        why.push(format!(
            "listen {} accepts clients without a password: set requirepass (or an aclfile whose default user has a password or is off)",
            s.listen
        ));
    }
    if let Some(t) = &s.tls {
        if default_open && open(&t.listen) && t.auth_clients != AuthClients::Yes {
            why.push(format!(
                "tls_listen {} accepts clients without a password or a client certificate: set requirepass, or tls_auth_clients = \"yes\"",
                t.listen
            ));
        }
    }
    if let Some(a) = s.admin_listen.filter(open) {
        if s.admin_token.is_none() && s.requirepass.is_none() {
            why.push(format!(
                "admin_listen {a} would take POST /cluster/leave and /wan/... from anyone: set admin_token (or requirepass)"
            ));
        }
    }
    if let Some(c) = &s.cluster {
        let any_open = open(&c.cluster_listen) || c.seeds.iter().any(open);
        if any_open && c.secret.is_none() && c.tls.is_none() {
            why.push(format!(
                "cluster_listen {} (or a seed) is not on loopback and [site] has no secret: any process that reaches it could join the site",
                c.cluster_listen
            ));
        }
    }
    if let Some(w) = &s.wan {
        if w.listen.is_some_and(|a| open(&a)) && w.secret.is_none() && w.tls.is_none() {
            why.push(format!(
                "[wan] listen {} is not on loopback and [wan] has no secret: any process that reaches it could write here",
                w.listen.map(|a| a.to_string()).unwrap_or_default()
            ));
        }
    }
    if why.is_empty() {
        return Ok(());
    }
    Err(format!(
        "protected mode: refusing to start: {}; or set protected_mode = false",
        why.join("; ")
    ))
}

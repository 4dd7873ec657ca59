//! The connection's own commands: PING, AUTH, HELLO (protocol version,
//! authentication, client name) and RESET.

use std::sync::atomic::Ordering;

use commands::args::{is, owned};
use commands::CmdError;

use super::{Reply, Session};
use crate::client_cmd;
use crate::pubsub::commands as pubsub;

impl Session {
    pub(super) fn ping(&mut self, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
        if a.len() > 2 {
            return Err(CmdError::WrongArity("ping".into()));
        }
        if self.subscriptions > 0 && !self.resp3 {
            out.array(2);
            out.bulk(b"pong");
            out.bulk(a.get(1).map_or(&b""[..], |b| b));
        } else if let Some(msg) = a.get(1) {
            out.bulk(msg);
        } else {
            out.simple("PONG");
        }
        Ok(())
    }

    pub(super) fn auth(&mut self, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
        let (user, pass) = match a.len() {
            2 => (&b"default"[..], a[1]),
            3 => (a[1], a[2]),
            _ => return Err(CmdError::Syntax),
        };
        if a.len() == 2 && self.node.users.current().default_user().nopass() {
            return Err(CmdError::AuthNotConfigured);
        }
        self.login(a[0], user, pass)?;
        out.simple("OK");
        Ok(())
    }

    pub(super) fn hello(&mut self, a: &[&[u8]], out: Reply) -> Result<(), CmdError> {
        let mut proto = None;
        if let Some(v) = a.get(1) {
            let v = commands::args::int(v).map_err(|_| {
                CmdError::other("ERR Protocol version is not an integer or out of range")
            })?;
            if !(2..=3).contains(&v) {
                return Err(CmdError::NoProto);
            }
            proto = Some(v);
        }
        let mut i = 2;
        let mut setname = None;
        let mut authed = false;
        while i < a.len() {
            if is(a[i], "AUTH") && i + 2 < a.len() {
                self.login(a[0], a[i + 1], a[i + 2])?;
                authed = true;
                i += 3;
            } else if is(a[i], "SETNAME") && i + 1 < a.len() {
                client_cmd::valid_name(a[i + 1])?;
                setname = Some(a[i + 1]);
                i += 2;
            } else {
                return Err(CmdError::other(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    String::from_utf8_lossy(a[i])
                )));
            }
        }
        if !self.authenticated && !authed {
            return Err(CmdError::other(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
            ));
        }
        if let Some(name) = setname {
            *self.shared.name.lock() = (!name.is_empty()).then(|| owned(name));
        }
        if let Some(p) = proto {
            self.set_resp3(p == 3);
            out.set_resp3(self.resp3);
        }
        out.map(7);
        out.bulk(b"server");
        out.bulk(b"redis");
        out.bulk(b"version");
        out.bulk(crate::REDIS_VERSION.as_bytes());
        out.bulk(b"proto");
        out.int(if self.resp3 { 3 } else { 2 });
        out.bulk(b"id");
        out.int(self.id as i64);
        out.bulk(b"mode");
        out.bulk(b"standalone");
        out.bulk(b"role");
        out.bulk(b"master");
        out.bulk(b"modules");
        out.array(0);
        Ok(())
    }

    fn set_resp3(&mut self, on: bool) {
        self.resp3 = on;
        self.shared.resp3.store(on, Ordering::Relaxed);
    }

    pub(super) fn reset(&mut self) {
        self.tx.clear();
        self.readonly = false;
        client_cmd::tracking_off(self);
        pubsub::release_all(self);
        *self.shared.name.lock() = None;
        self.set_resp3(false);
        self.caching = None;
        self.logout();
    }
}

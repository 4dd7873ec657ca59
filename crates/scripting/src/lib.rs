//! Lua scripting as Redis 7 runs it (EVAL, EVALSHA, SCRIPT, FUNCTION,
//! FCALL): a Lua 5.1 VM ([`Engine`]) with Redis's globals, libraries
//! (`redis`, `cjson`, `cmsgpack`, `bit`) and read-only protections, the script cache by
//! SHA1, the libraries FUNCTION LOAD registers, the conversions between
//! replies and Lua values, and the [`Watchdog`] that lets other clients see
//! a long script (BUSY) and SCRIPT KILL stop it.
//!
//! The crate knows nothing of the keyspace: a script's commands run
//! through a [`Host`], which the server implements by running them as the
//! calling client would, through the one write path (so replicas, other
//! sites, backups and tracking see a script's writes as the writes they
//! are).
//!
//! Layout: `engine` (the VM, the script cache, a run), `functions`
//! (libraries and FCALL), `prelude.lua` (globals and protections, the
//! error handler, the load API), `convert` (replies <-> Lua values),
//! `libs`, `json` and `msgpack` (the libraries), `raising` (how they raise errors),
//! `shebang` (`#!lua flags=`), `watchdog`.

mod convert;
mod engine;
mod functions;
mod json;
mod libs;
mod msgpack;
mod raising;
mod shebang;
mod watchdog;

pub use convert::lua_error_text;
pub use engine::{Engine, Host};
pub use functions::{FunctionInfo, Library, RestorePolicy};
pub use libs::sha1_hex;
pub use shebang::ScriptFlags;
pub use watchdog::{KillRefused, Watchdog, BUSY_EVAL, BUSY_FUNCTION, DEFAULT_BUSY_MS};

#[cfg(test)]
mod tests;

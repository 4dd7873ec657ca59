//! Commands: the command table (data: name, arity, flags, key positions,
//! docs) and the data-type families that run against the keyspace.
//!
//! Connection and server commands (HELLO, CLIENT, INFO, CONFIG...) are in
//! the table too, so arity checks, `COMMAND` output and key extraction work
//! the same for every command, but their handlers live in the server crate,
//! which owns the session state they act on (`handler: None` here).

pub mod args;
pub mod bitfield;
pub mod bitops;
pub mod bits;
pub mod blocking;
pub mod dump;
pub mod error;
pub mod hashes;
pub mod help;
pub mod hyperloglog;
pub mod keys;
pub mod lcs;
pub mod lists;
pub mod number;
pub mod object;
pub mod sampling;
pub mod sets;
pub mod sort;
pub mod strings;
pub mod table;
pub mod zsets;

pub use error::CmdError;
pub use table::{lookup, CommandSpec, Flags, TABLE};

use keyspace::Keyspace;
use resp::ReplyWriter;

/// What a data command runs with.
pub struct Ctx<'a, 'b> {
    pub ks: &'a Keyspace,
    pub out: &'a mut ReplyWriter<'b>,
    /// The client issuing the command (for change attribution / NOLOOP).
    pub client_id: u64,
    /// Whether a blocking command (BZPOPMIN...) may wait.
    pub blocking: BlockMode,
    /// Set by a blocking command that found nothing and may wait: what
    /// the session waits for before it runs the command again.
    pub wait: Option<Wait>,
    /// The client's ACL user may read every key: SORT's BY and GET
    /// patterns, which name keys of their own, need it (as Redis).
    pub read_any_key: bool,
}

/// How a blocking command runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BlockMode {
    /// It may not wait (inside MULTI): with nothing to take it answers as
    /// on a timeout, at once.
    #[default]
    Deny,
    /// First run: errors as the non-blocking form; with nothing to take
    /// it sets [`Ctx::wait`] and replies nothing.
    Allow,
    /// Run again after a key it waits for changed: a key of another type
    /// is passed over (the client keeps waiting, as Redis 7.0 serves only
    /// keys of the type it waits for); with nothing to take it sets
    /// [`Ctx::wait`] again and replies nothing.
    Retry,
}

/// What a blocked command waits for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// Each once, in argument order.
    pub keys: Vec<bytes::Bytes>,
    /// Milliseconds; 0 waits for ever.
    pub timeout_ms: u64,
}

pub type Handler = fn(&mut Ctx, &[&[u8]]) -> Result<(), CmdError>;

/// The largest string a command may build (Redis's proto-max-bulk-len default).
pub const MAX_STRING: usize = 512 << 20;

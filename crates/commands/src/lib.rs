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
pub mod dump;
pub mod error;
pub mod hashes;
pub mod help;
pub mod hyperloglog;
pub mod keys;
pub mod lcs;
pub mod number;
pub mod object;
pub mod sampling;
pub mod sets;
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
}

pub type Handler = fn(&mut Ctx, &[&[u8]]) -> Result<(), CmdError>;

/// The largest string a command may build (Redis's proto-max-bulk-len default).
pub const MAX_STRING: usize = 512 << 20;

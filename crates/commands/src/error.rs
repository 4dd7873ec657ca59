//! Every error text a client can see, in one place, with Redis's prefixes
//! and wording so clients that match on them keep working.

use keyspace::delta::StringOpError;
use keyspace::WriteError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CmdError {
    #[error("ERR syntax error")]
    Syntax,
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR hash value is not an integer")]
    HashNotInteger,
    #[error("ERR hash value is not a float")]
    HashNotFloat,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR increment would produce NaN or Infinity")]
    NanOrInfinity,
    #[error("ERR no such key")]
    NoSuchKey,
    #[error("ERR invalid cursor")]
    InvalidCursor,
    #[error("ERR offset is out of range")]
    OffsetOutOfRange,
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    StringTooLong,
    #[error("ERR invalid expire time in '{0}' command")]
    InvalidExpire(&'static str),
    #[error("ERR wrong number of arguments for '{0}' command")]
    WrongArity(String),
    #[error("ERR unknown command '{name}', with args beginning with: {args}")]
    UnknownCommand { name: String, args: String },
    #[error("ERR unknown subcommand '{sub}'. Try {cmd} HELP.")]
    UnknownSubcommand { cmd: String, sub: String },
    /// What a command that parses its own subcommands (DEBUG) answers to
    /// one it does not know, or to one with the wrong argument count.
    #[error("ERR unknown subcommand or wrong number of arguments for '{sub}'. Try {cmd} HELP.")]
    SubcommandSyntax { cmd: String, sub: String },
    /// An argument Redis reads as a C int, outside its range.
    #[error("ERR value is out of range, value must between -2147483648 and 2147483647")]
    IntOutOfRange,
    #[error("ERR source and destination objects are the same")]
    SameObject,
    #[error("ERR The specified keys must contain string values")]
    LcsNotStrings,
    #[error("ERR If you want both the length and indexes, please just use IDX.")]
    LcsLenAndIdx,
    #[error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")]
    LcsTooLarge,
    #[error("ERR NX and XX, GT or LT options at the same time are not compatible")]
    ExpireNxIncompatible,
    #[error("ERR GT and LT options at the same time are not compatible")]
    ExpireGtLt,
    #[error("ERR Unsupported option {0}")]
    UnsupportedOption(String),
    #[error("ERR value is out of range, must be positive")]
    MustBePositive,
    #[error("OOM command not allowed when used memory > 'maxmemory'.")]
    Oom,
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    #[error("WRONGPASS invalid username-password pair or user is disabled.")]
    WrongPass,
    #[error("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")]
    AuthNotConfigured,
    #[error("NOPROTO unsupported protocol version")]
    NoProto,
    #[error("ERR DB index is out of range")]
    DbIndexOutOfRange,
    #[error("ERR max number of clients reached")]
    MaxClients,
    #[error("BUSYKEY Target key name already exists.")]
    BusyKey,
    #[error("ERR Invalid TTL value, must be >= 0")]
    InvalidTtl,
    #[error("ERR Invalid IDLETIME value, must be >= 0")]
    InvalidIdleTime,
    #[error("ERR Invalid FREQ value, must be >= 0 and <= 255")]
    InvalidFreq,
    /// A RESTORE payload too short, of a newer RDB version, or whose
    /// checksum does not match.
    #[error("ERR DUMP payload version or checksum are wrong")]
    DumpPayload,
    /// A RESTORE payload whose object does not decode.
    #[error("ERR Bad data format")]
    BadDataFormat,
    /// Any other text, already carrying its prefix.
    #[error("{0}")]
    Other(String),
}

impl CmdError {
    pub fn other(msg: impl Into<String>) -> Self {
        CmdError::Other(msg.into())
    }

    pub fn unknown_command(args: &[&[u8]]) -> Self {
        // Redis's rule: args are listed while the list is under 128 bytes,
        // each cut to what is left of those 128.
        let name = args
            .first()
            .map(|a| String::from_utf8_lossy(&a[..a.len().min(128)]).into_owned())
            .unwrap_or_default();
        let mut rest: Vec<u8> = Vec::new();
        for a in args.iter().skip(1) {
            if rest.len() >= 128 {
                break;
            }
            let room = 128 - rest.len();
            rest.push(b'\'');
            rest.extend_from_slice(&a[..a.len().min(room)]);
            rest.extend_from_slice(b"' ");
        }
        CmdError::UnknownCommand {
            name,
            args: String::from_utf8_lossy(&rest).into_owned(),
        }
    }
}

impl From<WriteError> for CmdError {
    fn from(e: WriteError) -> Self {
        match e {
            WriteError::WrongType => CmdError::WrongType,
            WriteError::StringOp(StringOpError::Overflow) => CmdError::Overflow,
            WriteError::StringOp(StringOpError::NotAnInteger) => CmdError::NotInteger,
            WriteError::StringOp(StringOpError::OutOfRange | StringOpError::NotAStringOp) => {
                CmdError::Syntax
            }
            WriteError::NotANumber => CmdError::other("ERR resulting score is not a number (NaN)"),
        }
    }
}

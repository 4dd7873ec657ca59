//! What one latency workload sends: the request for op number `seq`, the
//! setup it needs, and the reply it must get back.
//!
//! Invariant: every request of a workload has the same length (keys and
//! numbers are fixed-width), so the echo floor, which sends the very same
//! bytes, measures the same payload as the server run.

use std::fmt;
use std::str::FromStr;

use crate::wire::{encode_request, ReplyHead};

/// GET cycles over this many pre-written keys: enough that it is not one hot
/// key, few enough that large values do not fill the server.
const GET_KEYS: u64 = 1000;

/// One kind of operation, spelled on the command line as
/// `empty`, `hash8`, `bytes:N` or `get:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// `SET key ""`: the empty object of GigaSpaces' control row.
    Empty,
    /// `HSET key` with 8 fields: 4 strings, 2 longs, 2 ints, GigaSpaces'
    /// 8-field object.
    Hash8,
    /// `SET key <N bytes>`, like `redis-benchmark -d N`.
    Bytes(usize),
    /// `GET key` of an N-byte value written during setup.
    Get(usize),
}

impl Workload {
    /// What runs when `--value` is not given.
    pub const DEFAULTS: [Workload; 4] = [
        Workload::Empty,
        Workload::Hash8,
        Workload::Bytes(100),
        Workload::Get(100),
    ];

    /// Human label for tables.
    pub fn label(self) -> String {
        match self {
            Workload::Empty => "SET empty value".into(),
            Workload::Hash8 => "HSET 8 fields".into(),
            Workload::Bytes(n) => format!("SET {n} B"),
            Workload::Get(n) => format!("GET {n} B"),
        }
    }

    fn key_tag(self) -> String {
        match self {
            Workload::Empty => "empty".into(),
            Workload::Hash8 => "hash8".into(),
            Workload::Bytes(n) => format!("bytes{n}"),
            Workload::Get(n) => format!("get{n}"),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::Empty => f.write_str("empty"),
            Workload::Hash8 => f.write_str("hash8"),
            Workload::Bytes(n) => write!(f, "bytes:{n}"),
            Workload::Get(n) => write!(f, "get:{n}"),
        }
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let size = |n: &str| {
            n.parse::<usize>()
                .map_err(|_| format!("`{s}`: size must be a number of bytes"))
        };
        match s.split_once(':') {
            None if s == "empty" => Ok(Workload::Empty),
            None if s == "hash8" => Ok(Workload::Hash8),
            None if s == "get" => Ok(Workload::Get(100)),
            Some(("bytes", n)) => size(n).map(Workload::Bytes),
            Some(("get", n)) => size(n).map(Workload::Get),
            _ => Err(format!("`{s}`: expected empty, hash8, bytes:N or get:N")),
        }
    }
}

/// Builds the requests of one workload.
pub struct RequestGen {
    workload: Workload,
    tag: String,
    value: Vec<u8>,
    prefix: String,
}

impl RequestGen {
    #[cfg(test)]
    pub fn new(workload: Workload) -> Self {
        Self::with_prefix(workload, "dgbench:lat")
    }

    /// Keys start with `prefix`; a `{hash tag}` in it puts every key of the
    /// run in one slot (one node of a site).
    pub fn with_prefix(workload: Workload, prefix: &str) -> Self {
        let len = match workload {
            Workload::Bytes(n) | Workload::Get(n) => n,
            Workload::Empty | Workload::Hash8 => 0,
        };
        // A repeating printable pattern rather than one byte, so nothing
        // along the way can shortcut a run of identical bytes.
        let value = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
        Self {
            workload,
            tag: workload.key_tag(),
            value,
            prefix: prefix.to_string(),
        }
    }

    /// Replaces `out` with the request of measured or warm-up op `seq`.
    pub fn request(&self, seq: u64, out: &mut Vec<u8>) {
        out.clear();
        match self.workload {
            Workload::Empty => {
                let key = self.key(seq);
                encode_request(&[b"SET", key.as_bytes(), b""], out);
            }
            Workload::Bytes(_) => {
                let key = self.key(seq);
                encode_request(&[b"SET", key.as_bytes(), &self.value], out);
            }
            Workload::Get(_) => {
                let key = self.key(seq % GET_KEYS);
                encode_request(&[b"GET", key.as_bytes()], out);
            }
            Workload::Hash8 => self.hset(seq, out),
        }
    }

    /// Requests to send (pipelined) before measuring.
    pub fn setup_requests(&self) -> Vec<Vec<u8>> {
        match self.workload {
            Workload::Get(_) => (0..GET_KEYS)
                .map(|seq| {
                    let mut out = Vec::new();
                    encode_request(&[b"SET", self.key(seq).as_bytes(), &self.value], &mut out);
                    out
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Checks that a (non-error) reply is the one this workload expects, so a
    /// server answering something else cannot produce a fast, wrong number.
    pub fn check_reply(&self, head: ReplyHead) -> Result<(), String> {
        let ok = match self.workload {
            Workload::Empty | Workload::Bytes(_) => head.kind == b'+',
            Workload::Hash8 => head.kind == b':',
            Workload::Get(n) => head.kind == b'$' && head.bulk_len == Some(n),
        };
        if ok {
            Ok(())
        } else {
            Err(format!(
                "{}: unexpected reply type `{}` (bulk length {:?})",
                self.workload.label(),
                head.kind as char,
                head.bulk_len
            ))
        }
    }

    fn key(&self, seq: u64) -> String {
        format!("{}:{}:{seq:010}", self.prefix, self.tag)
    }

    /// Four 16-byte strings, two longs (13-digit epoch millis), two 6-digit
    /// ints: fixed widths, so every request has the same length.
    fn hset(&self, seq: u64, out: &mut Vec<u8>) {
        let key = self.key(seq);
        let strings: Vec<String> = (1..=4).map(|k| format!("str{k}-{seq:012}")).collect();
        let created = (1_700_000_000_000 + seq).to_string();
        let updated = (1_700_000_000_000 + 2 * seq).to_string();
        let age = (100_000 + seq % 900_000).to_string();
        let score = (999_999 - seq % 900_000).to_string();
        let args: [&[u8]; 18] = [
            b"HSET",
            key.as_bytes(),
            b"first",
            strings[0].as_bytes(),
            b"last",
            strings[1].as_bytes(),
            b"email",
            strings[2].as_bytes(),
            b"city",
            strings[3].as_bytes(),
            b"created",
            created.as_bytes(),
            b"updated",
            updated.as_bytes(),
            b"age",
            age.as_bytes(),
            b"score",
            score.as_bytes(),
        ];
        encode_request(&args, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_the_same_spelling() {
        for s in ["empty", "hash8", "bytes:100", "get:1024"] {
            assert_eq!(s.parse::<Workload>().unwrap().to_string(), s);
        }
        assert_eq!("get".parse::<Workload>(), Ok(Workload::Get(100)));
        assert!("bytes:x".parse::<Workload>().is_err());
        assert!("blob".parse::<Workload>().is_err());
    }

    #[test]
    fn requests_have_constant_length() {
        for w in [
            Workload::Empty,
            Workload::Hash8,
            Workload::Bytes(100),
            Workload::Get(7),
        ] {
            let gen = RequestGen::new(w);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            gen.request(0, &mut a);
            gen.request(123_456, &mut b);
            assert_eq!(a.len(), b.len(), "{w}");
        }
    }

    #[test]
    fn hset_has_eight_fields() {
        let mut out = Vec::new();
        RequestGen::new(Workload::Hash8).request(5, &mut out);
        assert!(out.starts_with(b"*18\r\n$4\r\nHSET\r\n"));
    }
}

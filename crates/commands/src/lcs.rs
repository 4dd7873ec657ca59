//! `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`: the
//! longest common subsequence of two strings, as Redis 7 computes and
//! answers it (the same table, the same walk back through it, so the same
//! subsequence and the same ranges when several are equally long).
//!
//! The work is bounded: the table has (len1+1)*(len2+1) cells of 4 bytes,
//! and a table over [`MAX_TABLE`] bytes is refused before anything is
//! allocated, with Redis's error for a table over `proto-max-bulk-len`
//! (whose default is that size). Two strings of 11,000 bytes make a
//! table of about 484 MB; larger pairs are refused.

use bytes::Bytes;

use crate::args::{self, is};
use crate::error::CmdError;
use crate::{Ctx, MAX_STRING};

/// The largest table LCS allocates, in bytes.
pub const MAX_TABLE: usize = MAX_STRING;

/// One run of consecutive matching bytes: inclusive ranges in each string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub a: (usize, usize),
    pub b: (usize, usize),
}

impl Match {
    /// Bytes in the run (never 0).
    pub fn match_len(&self) -> usize {
        self.a.1 - self.a.0 + 1
    }
}

/// What the walk back through the table found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The subsequence (empty when only its length was asked for).
    pub text: Vec<u8>,
    /// Its length.
    pub len: usize,
    /// The runs of at least the minimum length, last ones first (the order
    /// Redis reports them in).
    pub matches: Vec<Match>,
}

/// The bytes of the table for strings of `a` and `b` bytes.
pub fn table_bytes(a: usize, b: usize) -> usize {
    (a.saturating_add(1))
        .saturating_mul(b.saturating_add(1))
        .saturating_mul(std::mem::size_of::<u32>())
}

/// The LCS of `a` and `b`; `walk` false gives only the length (no
/// subsequence, no runs). Callers check [`table_bytes`] first.
pub fn longest_common(a: &[u8], b: &[u8], walk: bool, min_match_len: usize) -> Found {
    let width = b.len() + 1;
    // cell(i, j): the LCS length of a[..i] and b[..j].
    let mut table = vec![0u32; (a.len() + 1) * width];
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            table[i * width + j] = if a[i - 1] == b[j - 1] {
                table[(i - 1) * width + j - 1] + 1
            } else {
                table[(i - 1) * width + j].max(table[i * width + j - 1])
            };
        }
    }
    let cell = |i: usize, j: usize| table[i * width + j];
    let len = cell(a.len(), b.len()) as usize;
    let mut found = Found {
        len,
        ..Found::default()
    };
    if !walk {
        return found;
    }
    // From the end back: a match takes the byte and moves diagonally; a
    // mismatch moves towards the larger neighbour (up, `a` shorter, only
    // when strictly larger). A run ends at a mismatch or at the start of
    // either string.
    let mut text = vec![0u8; len];
    let mut left = len;
    let (mut i, mut j) = (a.len(), b.len());
    let mut run: Option<Match> = None;
    while i > 0 && j > 0 {
        let ended = if a[i - 1] == b[j - 1] {
            left -= 1;
            text[left] = a[i - 1];
            let m = run.get_or_insert(Match {
                a: (i - 1, i - 1),
                b: (j - 1, j - 1),
            });
            (m.a.0, m.b.0) = (i - 1, j - 1);
            i -= 1;
            j -= 1;
            m.a.0 == 0 || m.b.0 == 0
        } else {
            if cell(i - 1, j) > cell(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            run.is_some()
        };
        if ended {
            let m = run.take().expect("a run is open");
            if m.match_len() >= min_match_len {
                found.matches.push(m);
            }
        }
    }
    found.text = text;
    found
}

/// The strings at `key1` and `key2` ("" when missing).
fn strings(ctx: &mut Ctx, key1: &[u8], key2: &[u8]) -> Result<(Bytes, Bytes), CmdError> {
    let mut txn = ctx.ks.txn([key1, key2], ctx.client_id);
    let mut get = |key: &[u8]| match txn.get(key) {
        None => Ok(Bytes::new()),
        Some(e) => e.str_bytes().ok_or(CmdError::LcsNotStrings),
    };
    Ok((get(key1)?, get(key2)?))
}

/// The LCS command; replies as Redis 7 does in RESP2 and RESP3 (IDX: a map).
pub fn lcs(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let (x, y) = strings(ctx, a[1], a[2])?;
    let (mut want_len, mut want_idx, mut with_len) = (false, false, false);
    let mut min_match_len = 0;
    let mut i = 3;
    while i < a.len() {
        if is(a[i], "IDX") {
            want_idx = true;
        } else if is(a[i], "LEN") {
            want_len = true;
        } else if is(a[i], "WITHMATCHLEN") {
            with_len = true;
        } else if is(a[i], "MINMATCHLEN") && i + 1 < a.len() {
            min_match_len = args::int(a[i + 1])?.max(0) as usize;
            i += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        i += 1;
    }
    if want_len && want_idx {
        return Err(CmdError::LcsLenAndIdx);
    }
    if table_bytes(x.len(), y.len()) > MAX_TABLE {
        return Err(CmdError::LcsTooLarge);
    }
    let found = longest_common(&x, &y, !want_len, min_match_len);
    let out = &mut *ctx.out;
    if want_idx {
        out.map(2);
        out.bulk(b"matches");
        out.array(found.matches.len());
        for m in &found.matches {
            out.array(if with_len { 3 } else { 2 });
            for (start, end) in [m.a, m.b] {
                out.array(2);
                out.int(start as i64);
                out.int(end as i64);
            }
            if with_len {
                out.int(m.match_len() as i64);
            }
        }
        out.bulk(b"len");
        out.int(found.len as i64);
    } else if want_len {
        out.int(found.len as i64);
    } else {
        out.bulk(&found.text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(a: (usize, usize), b: (usize, usize)) -> Match {
        Match { a, b }
    }

    #[test]
    fn the_documented_example() {
        // Redis's documentation: LCS of "ohmytext" and "mynewtext".
        let found = longest_common(b"ohmytext", b"mynewtext", true, 0);
        assert_eq!(found.text, b"mytext");
        assert_eq!(found.len, 6);
        assert_eq!(found.matches, vec![m((4, 7), (5, 8)), m((2, 3), (0, 1))]);
        let long = longest_common(b"ohmytext", b"mynewtext", true, 4);
        assert_eq!(long.matches, vec![m((4, 7), (5, 8))]);
        assert_eq!(long.matches[0].match_len(), 4);
    }

    #[test]
    fn length_only_skips_the_walk() {
        let found = longest_common(b"ohmytext", b"mynewtext", false, 0);
        assert_eq!(
            (found.len, found.text.len(), found.matches.len()),
            (6, 0, 0)
        );
    }

    #[test]
    fn empty_and_disjoint_strings() {
        assert_eq!(longest_common(b"", b"abc", true, 0), Found::default());
        assert_eq!(longest_common(b"abc", b"", true, 0), Found::default());
        assert_eq!(longest_common(b"abc", b"xyz", true, 0), Found::default());
    }

    #[test]
    fn a_run_touching_the_start_of_either_string_is_reported() {
        let found = longest_common(b"abcd", b"abcd", true, 0);
        assert_eq!(found.text, b"abcd");
        assert_eq!(found.matches, vec![m((0, 3), (0, 3))]);
        let found = longest_common(b"xxab", b"ab", true, 0);
        assert_eq!(found.matches, vec![m((2, 3), (0, 1))]);
    }

    #[test]
    fn ties_follow_redis_walk() {
        // "ab" vs "ba": "a" and "b" are both longest. On a tie the walk
        // drops the second string's last byte, so it keeps "b", as Redis.
        let found = longest_common(b"ab", b"ba", true, 0);
        assert_eq!(found.text, b"b");
        assert_eq!(found.matches, vec![m((1, 1), (0, 0))]);
    }

    #[test]
    fn the_table_bound_is_checked_without_overflow() {
        assert_eq!(table_bytes(0, 0), 4);
        assert_eq!(table_bytes(9, 9), 400);
        assert!(table_bytes(11_000, 11_000) <= MAX_TABLE);
        assert!(table_bytes(12_000, 12_000) > MAX_TABLE);
        assert_eq!(table_bytes(usize::MAX, 2), usize::MAX);
    }
}

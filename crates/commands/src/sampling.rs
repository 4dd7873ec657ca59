//! What the collection commands share to hand out parts of a collection:
//! SCAN-family pages (HSCAN, SSCAN, ZSCAN) and random picks (HRANDFIELD,
//! SRANDMEMBER, ZRANDMEMBER).
//!
//! A page walks the elements in a fixed hash order of their names: the
//! cursor is the next order value, so an element present for the whole
//! iteration is returned exactly once whatever changes meanwhile; each call
//! costs one pass over the collection. A small collection (what Redis keeps
//! in a listpack or intset) comes back whole with cursor 0, as in Redis.

use rand::Rng;

use crate::args::ScanOpts;
use crate::error::CmdError;

/// An element's place in scan order: a hash of its name with fixed keys,
/// the same on every call. Never 0, which as a cursor means "start" or
/// "done".
pub fn scan_order(name: &[u8]) -> u64 {
    ahash::RandomState::with_seeds(0x64656c74, 0x61677269, 0x64, 0x5343414e)
        .hash_one(name)
        .max(1)
}

/// One page from `cursor` of the elements `items` gives (name first): the
/// next cursor and the page, filtered by MATCH. `whole`: the collection is
/// small and is returned in one page.
pub fn scan_page<'a, T>(
    items: impl Iterator<Item = (&'a [u8], T)>,
    cursor: u64,
    opts: &ScanOpts,
    whole: bool,
) -> (u64, Vec<(&'a [u8], T)>) {
    let mut page: Vec<(u64, &[u8], T)> = items
        .map(|(name, t)| (scan_order(name), name, t))
        .filter(|(o, _, _)| whole || *o >= cursor)
        .collect();
    let mut next = 0;
    if !whole && page.len() > opts.count {
        page.select_nth_unstable_by_key(opts.count, |e| e.0);
        let cut = page[opts.count].0;
        // Never split elements sharing an order value across pages.
        page.retain(|e| e.0 < cut);
        next = cut;
    }
    let page = page
        .into_iter()
        .filter(|(_, name, _)| {
            opts.pattern
                .as_ref()
                .is_none_or(|p| keyspace::glob::glob_match(p, name))
        })
        .map(|(_, name, t)| (name, t))
        .collect();
    (next, page)
}

/// Repeats a negative count may ask for: a request cannot make an
/// unbounded reply.
const MAX_REPEATS: i64 = 1 << 24;

/// Checks the count of HRANDFIELD/SRANDMEMBER/ZRANDMEMBER as Redis does
/// (`pairs`: WITHVALUES/WITHSCORES, whose count Redis caps).
pub fn check_count(count: Option<i64>, pairs: bool) -> Result<(), CmdError> {
    if count == Some(i64::MIN) {
        return Err(CmdError::other(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let limit = |c: i64| (pairs && (c >= i64::MAX / 2 || c <= -(i64::MAX / 2))) || c < -MAX_REPEATS;
    if count.is_some_and(limit) {
        return Err(CmdError::other("ERR value is out of range"));
    }
    Ok(())
}

/// Positions to pick among `len`: `count` distinct ones (at most `len`),
/// or for a negative count that many with repeats.
pub fn random_picks(len: usize, count: i64) -> Vec<usize> {
    let mut rng = rand::thread_rng();
    if len == 0 {
        Vec::new()
    } else if count < 0 {
        (0..count.unsigned_abs())
            .map(|_| rng.gen_range(0..len))
            .collect()
    } else {
        rand::seq::index::sample(&mut rng, len, (count as usize).min(len)).into_vec()
    }
}

/// One position among `len` (> 0).
pub fn random_one(len: usize) -> usize {
    rand::thread_rng().gen_range(0..len)
}

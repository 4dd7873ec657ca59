//! ZSCAN and ZRANDMEMBER.
//!
//! ZSCAN follows HSCAN: a small sorted set comes back whole with cursor 0;
//! a large one pages through members in a fixed hash order of their names
//! (the cursor is the next order value), so a member present for the whole
//! scan is returned exactly once whatever changes meanwhile. Scores are
//! bulk strings in both protocols, as Redis sends them.

use bytes::Bytes;
use rand::Rng;

use super::read;
use crate::args::{self, is};
use crate::error::CmdError;
use crate::Ctx;

/// A member's place in ZSCAN order; never 0 (start/done as a cursor).
fn scan_order(member: &[u8]) -> u64 {
    ahash::RandomState::with_seeds(0x64656c74, 0x61677269, 0x7a, 0x5343414e)
        .hash_one(member)
        .max(1)
}

pub fn zscan(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let cursor = args::cursor(a[2])?;
    let opts = args::scan_opts(&a[3..], false)?;
    read(ctx, a[1], |ctx, z| {
        let one_shot = z.is_none_or(|z| ctx.ks.encodings().zset_is_small(z));
        let mut page: Vec<(u64, &Bytes, f64)> = z
            .into_iter()
            .flat_map(|z| z.iter())
            .map(|(m, x)| (scan_order(m), m, x.score))
            .filter(|(o, _, _)| one_shot || *o >= cursor)
            .collect();
        let mut next = 0;
        if !one_shot && page.len() > opts.count {
            page.select_nth_unstable_by_key(opts.count, |e| e.0);
            let cut = page[opts.count].0;
            page.retain(|e| e.0 < cut);
            next = cut;
        }
        page.retain(|(_, m, _)| {
            opts.pattern
                .as_ref()
                .is_none_or(|p| keyspace::glob::glob_match(p, m))
        });
        ctx.out.array(2);
        ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
        ctx.out.array(page.len() * 2);
        let resp3 = ctx.out.resp3();
        ctx.out.set_resp3(false);
        for (_, m, s) in page {
            ctx.out.bulk(m);
            ctx.out.double(s);
        }
        ctx.out.set_resp3(resp3);
    })
}

pub fn zrandmember(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let count = a.get(2).map(|c| args::int(c)).transpose()?;
    let withscores = match a.get(3) {
        None => false,
        Some(w) if is(w, "WITHSCORES") && a.len() == 4 => true,
        Some(_) => return Err(CmdError::Syntax),
    };
    if count == Some(i64::MIN) {
        return Err(CmdError::other(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    // Redis caps |count| for WITHSCORES; we also cap repeats (negative
    // counts) so a request cannot make us build an unbounded reply.
    const MAX_REPEATS: i64 = 1 << 24;
    let limit =
        |c: i64| (withscores && (c >= i64::MAX / 2 || c <= -(i64::MAX / 2))) || c < -MAX_REPEATS;
    if count.is_some_and(limit) {
        return Err(CmdError::other("ERR value is out of range"));
    }
    read(ctx, a[1], |ctx, z| {
        let mut rng = rand::thread_rng();
        let len = z.map_or(0, |z| z.len());
        let Some(count) = count else {
            match z.filter(|z| !z.is_empty()) {
                Some(z) => ctx.out.bulk(
                    z.get_index(rng.gen_range(0..len))
                        .map_or(&[][..], |(m, _)| m),
                ),
                None => ctx.out.null(),
            }
            return;
        };
        let picks: Vec<usize> = if len == 0 {
            Vec::new()
        } else if count < 0 {
            (0..count.unsigned_abs())
                .map(|_| rng.gen_range(0..len))
                .collect()
        } else {
            let n = (count as usize).min(len);
            rand::seq::index::sample(&mut rng, len, n).into_vec()
        };
        let pairs = withscores && ctx.out.resp3();
        ctx.out.array(if withscores && !pairs {
            picks.len() * 2
        } else {
            picks.len()
        });
        let Some(z) = z else { return };
        for i in picks {
            if let Some((m, s)) = z.get_index(i) {
                if pairs {
                    ctx.out.array(2);
                }
                ctx.out.bulk(m);
                if withscores {
                    ctx.out.double(s);
                }
            }
        }
    })
}

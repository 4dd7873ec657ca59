//! ZSCAN and ZRANDMEMBER.
//!
//! ZSCAN pages as HSCAN does (`crate::sampling`). Scores are bulk strings
//! in both protocols, as Redis sends them.

use super::read;
use crate::args::{self, is};
use crate::error::CmdError;
use crate::sampling;
use crate::Ctx;

pub fn zscan(ctx: &mut Ctx, a: &[&[u8]]) -> Result<(), CmdError> {
    let cursor = args::cursor(a[2])?;
    let opts = args::scan_opts(&a[3..], false)?;
    read(ctx, a[1], |ctx, z| {
        let one_shot = z.is_none_or(|z| ctx.ks.encodings().zset_is_small(z));
        let members = z
            .into_iter()
            .flat_map(|z| z.iter())
            .map(|(m, x)| (m, x.score));
        let (next, page) = sampling::scan_page(members, cursor, &opts, one_shot);
        ctx.out.array(2);
        ctx.out.bulk(itoa::Buffer::new().format(next).as_bytes());
        ctx.out.array(page.len() * 2);
        let resp3 = ctx.out.resp3();
        ctx.out.set_resp3(false);
        for (m, s) in page {
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
    sampling::check_count(count, withscores)?;
    read(ctx, a[1], |ctx, z| {
        let len = z.map_or(0, |z| z.len());
        let Some(count) = count else {
            match z.filter(|z| !z.is_empty()) {
                Some(z) => ctx.out.bulk(
                    z.get_index(sampling::random_one(len))
                        .map_or(&[][..], |(m, _)| m),
                ),
                None => ctx.out.null(),
            }
            return;
        };
        let picks = sampling::random_picks(len, count);
        let pairs = withscores && ctx.out.resp3();
        ctx.out.array(if withscores && !pairs {
            picks.len() * 2
        } else {
            picks.len()
        });
        let Some(z) = z else { return };
        // The small form is read in one walk (its entry at an index is a walk).
        let small: Vec<(&[u8], f64)> = match z.is_small() {
            true => z.range(0, len).collect(),
            false => Vec::new(),
        };
        let at = |i: usize| match z.is_small() {
            true => small.get(i).copied(),
            false => z.get_index(i),
        };
        for i in picks {
            if let Some((m, s)) = at(i) {
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

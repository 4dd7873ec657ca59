//! The encoding of the states counters keep to merge across sites: a
//! string (or hash field) counter's ([`CounterValue`]: assignment, floor,
//! expiry version, base, per-site integer totals, then per-site float
//! totals when its base tag says so) and a sorted-set member's score
//! state ([`ScoreCounter`]). Their decoders are [`super::wire::Reader`]'s
//! `counter` and `score_counter`.

use bytes::BufMut;

use super::wire::{
    bytes_len, put_bytes, put_varint, put_varint128, put_version, varint128_len, varint_len,
    version_len, zigzag, zigzag128,
};
use crate::value::{CounterBase, CounterValue, ScoreCounter};

pub(super) fn counter_len(c: &CounterValue) -> usize {
    version_len(&c.assigned())
        + version_len(&c.floor())
        + version_len(&c.expiry())
        + 1
        + match c.base() {
            CounterBase::Int(n) => varint128_len(zigzag128(*n)),
            CounterBase::Text(t) => bytes_len(t),
            CounterBase::Float { text, seen } => bytes_len(text) + bytes_len(seen),
        }
        + varint_len(c.contributions().len() as u64)
        + c.contributions()
            .iter()
            .map(|x| {
                varint_len(x.site as u64) + varint_len(zigzag(x.total)) + version_len(&x.version)
            })
            .sum::<usize>()
        + match c.floats().len() {
            0 => 0,
            n => {
                varint_len(n as u64)
                    + c.floats()
                        .iter()
                        .map(|x| {
                            varint_len(x.site as u64)
                                + bytes_len(&x.total)
                                + version_len(&x.version)
                        })
                        .sum::<usize>()
            }
        }
}

/// In a counter's base tag: per-site float totals follow its integer ones
/// (older encodings have none, and no such bit).
pub(super) const WITH_FLOATS: u8 = 0x10;

pub(super) fn put_counter(out: &mut impl BufMut, c: &CounterValue) {
    put_version(out, &c.assigned());
    put_version(out, &c.floor());
    put_version(out, &c.expiry());
    let floats = match c.floats().is_empty() {
        true => 0,
        false => WITH_FLOATS,
    };
    match c.base() {
        CounterBase::Int(n) => {
            out.put_u8(floats);
            put_varint128(out, zigzag128(*n));
        }
        CounterBase::Text(t) => {
            out.put_u8(1 | floats);
            put_bytes(out, t);
        }
        CounterBase::Float { text, seen } => {
            out.put_u8(2 | floats);
            put_bytes(out, text);
            put_bytes(out, seen);
        }
    }
    put_varint(out, c.contributions().len() as u64);
    for x in c.contributions() {
        put_varint(out, x.site as u64);
        put_varint(out, zigzag(x.total));
        put_version(out, &x.version);
    }
    if floats != 0 {
        put_varint(out, c.floats().len() as u64);
        for x in c.floats() {
            put_varint(out, x.site as u64);
            put_bytes(out, &x.total);
            put_version(out, &x.version);
        }
    }
}

pub(super) fn score_counter_len(c: &ScoreCounter) -> usize {
    version_len(&c.assigned())
        + 16
        + version_len(&c.floor())
        + varint_len(c.contributions().len() as u64)
        + c.contributions()
            .iter()
            .map(|x| varint_len(x.site as u64) + 8 + version_len(&x.version))
            .sum::<usize>()
}

pub(super) fn put_score_counter(out: &mut impl BufMut, c: &ScoreCounter) {
    put_version(out, &c.assigned());
    out.put_f64_le(c.assigned_score());
    out.put_f64_le(c.seen());
    put_version(out, &c.floor());
    put_varint(out, c.contributions().len() as u64);
    for x in c.contributions() {
        put_varint(out, x.site as u64);
        out.put_f64_le(x.total);
        put_version(out, &x.version);
    }
}

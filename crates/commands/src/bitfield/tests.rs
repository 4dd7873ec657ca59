//! BITFIELD's arithmetic against values Redis 7.0.15 gave, and its bit
//! access against a bit-by-bit model.

use proptest::prelude::*;

use super::*;

/// A type, an overflow mode, a value to SET, an increment, and the replies.
type Case = (&'static str, Overflow, i64, i64, [Option<i64>; 4]);

/// `BITFIELD k OVERFLOW mode SET type 3 start GET type 3 INCRBY type 3 incr
/// GET type 3` on a missing key, as redis-server 7.0.15 answered.
#[rustfmt::skip]
const REDIS: &[Case] = &[
    ("i5", Overflow::Wrap, 3, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("i5", Overflow::Wrap, -1, 7, [Some(0), Some(-1), Some(6), Some(6)]),
    ("i5", Overflow::Wrap, 9223372036854775807, -7, [Some(0), Some(-1), Some(-8), Some(-8)]),
    ("i5", Overflow::Wrap, -9223372036854775808, 9223372036854775807, [Some(0), Some(0), Some(-1), Some(-1)]),
    ("i5", Overflow::Sat, 3, -9223372036854775808, [Some(0), Some(3), Some(-16), Some(-16)]),
    ("i5", Overflow::Sat, 9223372036854775807, -1, [Some(0), Some(15), Some(14), Some(14)]),
    ("i5", Overflow::Sat, -9223372036854775808, 7, [Some(0), Some(15), Some(15), Some(15)]),
    ("i5", Overflow::Fail, 3, -7, [Some(0), Some(3), Some(-4), Some(-4)]),
    ("i5", Overflow::Fail, -1, 9223372036854775807, [Some(0), Some(-1), None, Some(-1)]),
    ("i5", Overflow::Fail, 9223372036854775807, -9223372036854775808, [None, Some(0), None, Some(0)]),
    ("i8", Overflow::Wrap, 3, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("i8", Overflow::Wrap, -1, 7, [Some(0), Some(-1), Some(6), Some(6)]),
    ("i8", Overflow::Wrap, 9223372036854775807, -7, [Some(0), Some(-1), Some(-8), Some(-8)]),
    ("i8", Overflow::Wrap, -9223372036854775808, 9223372036854775807, [Some(0), Some(0), Some(-1), Some(-1)]),
    ("i8", Overflow::Sat, 3, -9223372036854775808, [Some(0), Some(3), Some(-128), Some(-128)]),
    ("i8", Overflow::Sat, 9223372036854775807, -1, [Some(0), Some(127), Some(126), Some(126)]),
    ("i8", Overflow::Sat, -9223372036854775808, 7, [Some(0), Some(127), Some(127), Some(127)]),
    ("i8", Overflow::Fail, 3, -7, [Some(0), Some(3), Some(-4), Some(-4)]),
    ("i8", Overflow::Fail, -1, 9223372036854775807, [Some(0), Some(-1), None, Some(-1)]),
    ("i8", Overflow::Fail, 9223372036854775807, -9223372036854775808, [None, Some(0), None, Some(0)]),
    ("i64", Overflow::Wrap, 3, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("i64", Overflow::Wrap, -1, 7, [Some(0), Some(-1), Some(6), Some(6)]),
    ("i64", Overflow::Wrap, 9223372036854775807, -7, [Some(0), Some(9223372036854775807), Some(9223372036854775800), Some(9223372036854775800)]),
    ("i64", Overflow::Wrap, -9223372036854775808, 9223372036854775807, [Some(0), Some(-9223372036854775808), Some(-1), Some(-1)]),
    ("i64", Overflow::Sat, 3, -9223372036854775808, [Some(0), Some(3), Some(-9223372036854775805), Some(-9223372036854775805)]),
    ("i64", Overflow::Sat, 9223372036854775807, -1, [Some(0), Some(9223372036854775807), Some(9223372036854775806), Some(9223372036854775806)]),
    ("i64", Overflow::Sat, -9223372036854775808, 7, [Some(0), Some(-9223372036854775808), Some(-9223372036854775801), Some(-9223372036854775801)]),
    ("i64", Overflow::Fail, 3, -7, [Some(0), Some(3), Some(-4), Some(-4)]),
    ("i64", Overflow::Fail, -1, 9223372036854775807, [Some(0), Some(-1), Some(9223372036854775806), Some(9223372036854775806)]),
    ("i64", Overflow::Fail, 9223372036854775807, -9223372036854775808, [Some(0), Some(9223372036854775807), Some(-1), Some(-1)]),
    ("u2", Overflow::Wrap, 3, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("u2", Overflow::Wrap, -1, 7, [Some(0), Some(3), Some(2), Some(2)]),
    ("u2", Overflow::Wrap, 9223372036854775807, -7, [Some(0), Some(3), Some(0), Some(0)]),
    ("u2", Overflow::Wrap, -9223372036854775808, 9223372036854775807, [Some(0), Some(0), Some(3), Some(3)]),
    ("u2", Overflow::Sat, 3, -9223372036854775808, [Some(0), Some(3), Some(0), Some(0)]),
    ("u2", Overflow::Sat, 9223372036854775807, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("u2", Overflow::Sat, -9223372036854775808, 7, [Some(0), Some(3), Some(3), Some(3)]),
    ("u2", Overflow::Fail, 3, -7, [Some(0), Some(3), None, Some(3)]),
    ("u2", Overflow::Fail, -1, 9223372036854775807, [None, Some(0), None, Some(0)]),
    ("u2", Overflow::Fail, 9223372036854775807, -9223372036854775808, [None, Some(0), None, Some(0)]),
    ("u8", Overflow::Wrap, 3, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("u8", Overflow::Wrap, -1, 7, [Some(0), Some(255), Some(6), Some(6)]),
    ("u8", Overflow::Wrap, 9223372036854775807, -7, [Some(0), Some(255), Some(248), Some(248)]),
    ("u8", Overflow::Wrap, -9223372036854775808, 9223372036854775807, [Some(0), Some(0), Some(255), Some(255)]),
    ("u8", Overflow::Sat, 3, -9223372036854775808, [Some(0), Some(3), Some(0), Some(0)]),
    ("u8", Overflow::Sat, 9223372036854775807, -1, [Some(0), Some(255), Some(254), Some(254)]),
    ("u8", Overflow::Sat, -9223372036854775808, 7, [Some(0), Some(255), Some(255), Some(255)]),
    ("u8", Overflow::Fail, 3, -7, [Some(0), Some(3), None, Some(3)]),
    ("u8", Overflow::Fail, -1, 9223372036854775807, [None, Some(0), None, Some(0)]),
    ("u8", Overflow::Fail, 9223372036854775807, -9223372036854775808, [None, Some(0), None, Some(0)]),
    ("u63", Overflow::Wrap, 3, -1, [Some(0), Some(3), Some(2), Some(2)]),
    ("u63", Overflow::Wrap, -1, 7, [Some(0), Some(9223372036854775807), Some(6), Some(6)]),
    ("u63", Overflow::Wrap, 9223372036854775807, -7, [Some(0), Some(9223372036854775807), Some(9223372036854775800), Some(9223372036854775800)]),
    ("u63", Overflow::Wrap, -9223372036854775808, 9223372036854775807, [Some(0), Some(0), Some(9223372036854775807), Some(9223372036854775807)]),
    ("u63", Overflow::Sat, 3, -9223372036854775808, [Some(0), Some(3), Some(0), Some(0)]),
    ("u63", Overflow::Sat, 9223372036854775807, -1, [Some(0), Some(9223372036854775807), Some(9223372036854775806), Some(9223372036854775806)]),
    ("u63", Overflow::Sat, -9223372036854775808, 7, [Some(0), Some(9223372036854775807), Some(9223372036854775807), Some(9223372036854775807)]),
    ("u63", Overflow::Fail, 3, -7, [Some(0), Some(3), None, Some(3)]),
    ("u63", Overflow::Fail, -1, 9223372036854775807, [None, Some(0), Some(9223372036854775807), Some(9223372036854775807)]),
    ("u63", Overflow::Fail, 9223372036854775807, -9223372036854775808, [Some(0), Some(9223372036854775807), None, Some(9223372036854775807)]),
];

fn run_ops(bytes: &[u8], ops: &[Op]) -> (Vec<Option<i64>>, Vec<u8>) {
    let hi = ops
        .iter()
        .filter_map(|op| match *op {
            Op::Set(f, ..) | Op::IncrBy(f, ..) => Some(f.last_byte()),
            Op::Get(_) => None,
        })
        .max()
        .unwrap_or(0);
    let mut window = bytes.to_vec();
    window.resize(window.len().max(hi + 1), 0);
    let mut map = Bitmap {
        base: bytes,
        lo: 0,
        window,
    };
    let replies = ops
        .iter()
        .map(|op| match *op {
            Op::Get(f) if f.signed => Some(map.read_signed(f)),
            Op::Get(f) => Some(map.read(f) as i64),
            Op::Set(f, v, mode) => set_or_incr(&mut map, f, v, false, mode),
            Op::IncrBy(f, v, mode) => set_or_incr(&mut map, f, v, true, mode),
        })
        .collect();
    (replies, map.window)
}

#[test]
fn overflow_matches_redis() {
    for &(ty, mode, start, incr, expected) in REDIS {
        let (signed, bits) = field_type(ty.as_bytes()).unwrap();
        let f = Field {
            signed,
            bits,
            offset: 3,
        };
        let ops = [
            Op::Set(f, start, mode),
            Op::Get(f),
            Op::IncrBy(f, incr, mode),
            Op::Get(f),
        ];
        let (replies, _) = run_ops(b"", &ops);
        assert_eq!(replies, expected, "{ty} {mode:?} {start} {incr}");
    }
}

#[test]
fn arguments_are_checked_as_redis_does() {
    assert_eq!(field_type(b"i64"), Ok((true, 64)));
    assert_eq!(field_type(b"u63"), Ok((false, 63)));
    for bad in [
        &b"u64"[..],
        b"i0",
        b"i65",
        b"I8",
        b"u",
        b"",
        b"x8",
        b"u+8",
        b"u08",
    ] {
        assert!(field_type(bad).is_err(), "{bad:?}");
    }
    assert_eq!(field_offset(b"#3", 8), Ok(24));
    assert_eq!(field_offset(b"4294967295", 8), Ok(4_294_967_295));
    assert!(field_offset(b"4294967296", 8).is_err());
    assert!(field_offset(b"#4294967295", 64).is_err());
    assert!(field_offset(b"-1", 8).is_err());
    assert!(field_offset(b"#9223372036854775807", 64).is_err());
    let args = |s: &str| {
        s.split(' ')
            .map(|w| w.as_bytes().to_vec())
            .collect::<Vec<_>>()
    };
    let parsed = |s: &str| {
        let owned = args(s);
        let refs: Vec<&[u8]> = owned.iter().map(|v| &v[..]).collect();
        parse(&refs)
    };
    assert_eq!(parsed("GET u8").unwrap_err(), CmdError::Syntax);
    assert_eq!(parsed("OVERFLOW").unwrap_err(), CmdError::Syntax);
    assert!(parsed("OVERFLOW sat GET u8 0 overflow FAIL incrby i5 #2 1").is_ok());
    assert_eq!(
        parsed("OVERFLOW maybe").unwrap_err(),
        CmdError::other("ERR Invalid OVERFLOW type specified")
    );
}

fn naive_get(bytes: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0, |acc, j| {
        let bit = offset + j;
        let byte = bytes.get((bit / 8) as usize).copied().unwrap_or(0);
        acc << 1 | u64::from(byte >> (7 - bit % 8) & 1)
    })
}

proptest! {
    #[test]
    fn fields_read_and_write_bit_by_bit(
        bytes in prop::collection::vec(any::<u8>(), 0..24),
        offset in 0u64..200, bits in 1u32..=64, value in any::<i64>(),
    ) {
        let f = Field { signed: true, bits, offset };
        let (replies, after) = run_ops(&bytes, &[Op::Get(Field { signed: false, bits: bits.min(63), offset }),
                                                Op::Set(f, value, Overflow::Wrap)]);
        prop_assert_eq!(replies[0], Some(naive_get(&bytes, offset, bits.min(63)) as i64));
        prop_assert_eq!(naive_get(&after, offset, bits), value as u64 & mask(bits));
        // Bits outside the field are untouched.
        for bit in 0..(after.len() as u64 * 8) {
            if bit < offset || bit >= offset + u64::from(bits) {
                prop_assert_eq!(naive_get(&after, bit, 1), naive_get(&bytes, bit, 1));
            }
        }
    }
}

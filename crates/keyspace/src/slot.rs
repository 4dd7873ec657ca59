//! Key -> slot (CRC16 of the key or its `{hash tag}`, as Redis Cluster) and
//! slot -> partition (contiguous slot ranges, so a partition is a slot range
//! and cluster routing tables stay small).

pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM) lookup tables, built at compile time: `TABLES[k][b]`
/// is the CRC of byte `b` followed by `k` zero bytes. Every command hashes
/// its keys; eight independent lookups per 8 bytes (slicing-by-8) instead of
/// one dependent lookup per byte.
const TABLES: [[u16; 256]; 8] = {
    let mut tables = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        tables[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[k - 1][i];
            tables[k][i] = (prev << 8) ^ tables[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    tables
};

/// CRC16-CCITT (XMODEM), the polynomial Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    let t = &TABLES;
    let mut crc = 0u16;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let (hi, lo) = ((crc >> 8) as u8 ^ c[0], crc as u8 ^ c[1]);
        crc = t[7][hi as usize]
            ^ t[6][lo as usize]
            ^ t[5][c[2] as usize]
            ^ t[4][c[3] as usize]
            ^ t[3][c[4] as usize]
            ^ t[2][c[5] as usize]
            ^ t[1][c[6] as usize]
            ^ t[0][c[7] as usize];
    }
    chunks.remainder().iter().fold(crc, |crc, &b| {
        (crc << 8) ^ t[0][((crc >> 8) as u8 ^ b) as usize]
    })
}

/// The part of the key that is hashed: the first non-empty `{...}` section.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) % SLOTS
}

/// Partition owning `slot` when the slot space is cut into `partitions` ranges.
pub fn slot_partition(slot: u16, partitions: u16) -> u16 {
    ((slot as u32 * partitions as u32) / SLOTS as u32) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_cluster_slots() {
        // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_eq!(key_slot(b"foo{{bar}}zap"), crc16(b"{bar") % SLOTS);
    }

    /// The definition: one bit at a time.
    fn crc16_bitwise(data: &[u8]) -> u16 {
        let mut crc = 0u16;
        for &b in data {
            crc ^= (b as u16) << 8;
            for _ in 0..8 {
                crc = if crc & 0x8000 != 0 {
                    (crc << 1) ^ 0x1021
                } else {
                    crc << 1
                };
            }
        }
        crc
    }

    proptest::proptest! {
        #[test]
        fn sliced_crc16_matches_the_bitwise_definition(data in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            proptest::prop_assert_eq!(crc16(&data), crc16_bitwise(&data));
        }
    }

    #[test]
    fn partitions_are_contiguous_ranges_covering_all_slots() {
        for parts in [1u16, 7, 271, 16384] {
            let mut last = 0;
            for slot in 0..SLOTS {
                let p = slot_partition(slot, parts);
                assert!(p >= last && p < parts);
                last = p;
            }
            assert_eq!(last, parts - 1);
        }
    }
}

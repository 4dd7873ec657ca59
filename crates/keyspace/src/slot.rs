//! Key -> slot (CRC16 of the key or its `{hash tag}`, as Redis Cluster) and
//! slot -> partition (contiguous slot ranges, so a partition is a slot range
//! and cluster routing tables stay small).

pub const SLOTS: u16 = 16384;

/// CRC16-CCITT (XMODEM) lookup table, built at compile time: every command
/// hashes its keys, so a byte costs one lookup instead of eight shifts.
const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// CRC16-CCITT (XMODEM), the polynomial Redis Cluster uses.
pub fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |crc, &b| (crc << 8) ^ CRC16_TABLE[((crc >> 8) as u8 ^ b) as usize])
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

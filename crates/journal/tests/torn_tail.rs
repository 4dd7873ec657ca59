//! Crash recovery, by property: damage the last segment the way a crash or a
//! bad sector would (cut it short, or flip a byte), reopen, and the journal
//! must hold exactly the records that lay wholly before the damage, and keep
//! working.

use std::fs::{self, OpenOptions};
use std::path::Path;

use journal::record::HEADER_LEN;
use journal::{Journal, JournalConfig};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Harm {
    /// Cut the last segment to `at` bytes (scaled into its length).
    Truncate { at: u64 },
    /// XOR a byte of the last segment (position scaled into its length).
    Flip { at: u64, mask: u8 },
}

fn harm() -> impl Strategy<Value = Harm> {
    prop_oneof![
        any::<u64>().prop_map(|at| Harm::Truncate { at }),
        (any::<u64>(), 1u8..=255).prop_map(|(at, mask)| Harm::Flip { at, mask }),
    ]
}

fn cfg(segment_bytes: u64) -> JournalConfig {
    JournalConfig {
        segment_bytes,
        ..JournalConfig::default()
    }
}

fn last_segment(dir: &Path) -> (u64, std::path::PathBuf) {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    let last = files.pop().unwrap();
    let first_id = last.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    (first_id, last)
}

/// Applies `harm` to the file; returns the first damaged byte offset.
fn apply(path: &Path, harm: &Harm) -> Option<u64> {
    let len = fs::metadata(path).unwrap().len();
    match *harm {
        Harm::Truncate { at } => {
            let at = at % (len + 1);
            OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(at)
                .unwrap();
            Some(at)
        }
        Harm::Flip { .. } if len == 0 => None,
        Harm::Flip { at, mask } => {
            let at = at % len;
            let mut bytes = fs::read(path).unwrap();
            bytes[at as usize] ^= mask;
            fs::write(path, &bytes).unwrap();
            Some(at)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn reopen_after_damage_yields_a_prefix(
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 0..40),
        segment_bytes in 64u64..1024,
        harm in harm(),
        flush_midway in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(dir.path(), cfg(segment_bytes)).unwrap();
        for (i, p) in payloads.iter().enumerate() {
            prop_assert_eq!(j.append(p).unwrap(), i as u64);
            if flush_midway && i == payloads.len() / 2 {
                j.flush().unwrap();
            }
        }
        drop(j);

        let (last_first, last_path) = last_segment(dir.path());
        let damage = apply(&last_path, &harm);

        // Records of the last segment survive iff they end at or before the damage.
        let mut keep = last_first as usize;
        let mut end = 0u64;
        for p in &payloads[last_first as usize..] {
            end += (HEADER_LEN + p.len()) as u64;
            if damage.is_some_and(|d| end > d) {
                break;
            }
            keep += 1;
        }

        let mut j = Journal::open(dir.path(), cfg(segment_bytes)).unwrap();
        prop_assert_eq!(j.next_id(), keep as u64);
        let got: Vec<Vec<u8>> = j.read(0, usize::MAX).unwrap().into_iter().map(|(_, b)| b.to_vec()).collect();
        prop_assert_eq!(&got[..], &payloads[..keep]);

        // The journal keeps working, and the new record survives a reopen.
        prop_assert_eq!(j.append(b"after").unwrap(), keep as u64);
        drop(j);
        let j = Journal::open(dir.path(), cfg(segment_bytes)).unwrap();
        let got = j.read(keep as u64, usize::MAX).unwrap();
        prop_assert_eq!(got.len(), 1);
        prop_assert_eq!(got[0].1.as_ref(), b"after");
    }
}

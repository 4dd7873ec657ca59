//! PFSELFTEST: Redis's self test of the HyperLogLog code, run inside the
//! server. First the dense register accessors (random values written and
//! read back, 1000 rounds), then ten million distinct elements added to a
//! dense and a sparse HyperLogLog side by side: at 1, 10, 100... elements
//! the sparse one must still be sparse (while small), both must count the
//! same, and the count must be within six standard errors.

use rand::Rng;

use super::encoding::{dense_get, dense_set, histogram, Encoding, Hll, DENSE_LEN, HEADER_LEN};
use super::encoding::{REGISTERS, REGISTER_BITS};
use super::estimator::{estimate, register_and_count};
use super::SPARSE_MAX_BYTES;

const ROUNDS: usize = 1000;
const ELEMENTS: u64 = 10_000_000;

/// Ok, or the reason, as Redis words it.
pub fn run() -> Result<(), String> {
    let mut rng = rand::thread_rng();
    registers_hold_their_values(&mut rng)?;
    estimates_hold(rng.gen())
}

fn registers_hold_their_values(rng: &mut impl Rng) -> Result<(), String> {
    let mut regs = vec![0u8; DENSE_LEN - HEADER_LEN];
    let mut expected = vec![0u8; REGISTERS];
    let max = (1u8 << REGISTER_BITS) - 1;
    for _ in 0..ROUNDS {
        for (i, e) in expected.iter_mut().enumerate() {
            *e = rng.gen::<u8>() & max;
            dense_set(&mut regs, i, *e);
        }
        for (i, &e) in expected.iter().enumerate() {
            let got = dense_get(&regs, i);
            if got != e {
                return Err(format!(
                    "TESTFAILED Register {i} should be {e} but is {got}"
                ));
            }
        }
    }
    Ok(())
}

fn count(hll: &Hll) -> u64 {
    let enc = hll.encoding();
    // Both were built here: their bodies are whole.
    histogram(hll.bytes(), enc).map_or(0, |h| estimate(&h))
}

fn estimates_hold(seed: u64) -> Result<(), String> {
    let mut dense = Hll::new();
    dense
        .make_dense()
        .map_err(|_| "TESTFAILED dense conversion")?;
    let mut sparse = Hll::new();
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint = 1u64;
    for j in 1..=ELEMENTS {
        let element = (j ^ seed).to_le_bytes();
        let (index, value) = register_and_count(&element);
        let _ = dense.raise(index, value, SPARSE_MAX_BYTES);
        let _ = sparse.raise(index, value, SPARSE_MAX_BYTES);
        if j != checkpoint {
            continue;
        }
        if j < (SPARSE_MAX_BYTES / 2) as u64 && sparse.encoding() != Encoding::Sparse {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = count(&dense);
        if card != count(&sparse) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let mut max_error = (relative_error * 6.0 * checkpoint as f64).ceil() as u64;
        // At 10 a collision is likely enough to allow one off.
        if j == 10 {
            max_error = 1;
        }
        let error = checkpoint.abs_diff(card);
        if error > max_error {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{error}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

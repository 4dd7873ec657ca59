//! The harness of the fuzz targets (`crates/*/tests/fuzz.rs`, see
//! docs/fuzzing.md): proptest runs sized by `FUZZ_CASES` or timed by
//! `FUZZ_SECONDS` (batches with fresh seeds; `FUZZ_SEED` replays one),
//! failing inputs printed in hex with their seed, mutations of valid
//! encodings, and a per-thread counting allocator that fails a case whose
//! decoder allocated for a length it was only told about. Linked only into
//! the fuzz test binaries (it sets their global allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestError, TestRunner};

/// Bigger than anything a fuzz input can legitimately need: refused
/// outright (the process aborts with "memory allocation of N bytes
/// failed"), so a runaway allocation cannot take the machine down.
const REFUSED: usize = 8 << 30;

struct Tracking;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static TOTAL: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the thread-locals may be gone while a thread exits.
    if ARMED.try_with(Cell::get).unwrap_or(false) {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
        let _ = TOTAL.try_with(|t| t.set(t.get().saturating_add(size)));
    }
}

// SAFETY: every allocation is the system allocator's, unchanged (or
// refused with null, which callers handle); the bookkeeping is in
// const-initialized thread-locals, which allocate nothing.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        if layout.size() > REFUSED {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        if layout.size() > REFUSED {
            return std::ptr::null_mut();
        }
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        if new_size > REFUSED {
            return std::ptr::null_mut();
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// What one decoding allocated.
#[derive(Clone, Copy, Debug)]
pub struct Allocated {
    pub largest: usize,
    pub total: usize,
}

/// Runs `f` with this thread's allocations recorded.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Allocated) {
    LARGEST.with(|l| l.set(0));
    TOTAL.with(|t| t.set(0));
    ARMED.with(|a| a.set(true));
    let out = f();
    ARMED.with(|a| a.set(false));
    let allocated = Allocated {
        largest: LARGEST.with(Cell::get),
        total: TOTAL.with(Cell::get),
    };
    (out, allocated)
}

/// Fails the case when decoding `input_len` bytes allocated more than
/// `per_byte` times the input (plus `slack`) in one allocation, or more
/// than twice that in all.
pub fn bounded(
    what: &str,
    a: Allocated,
    input_len: usize,
    per_byte: usize,
    slack: usize,
) -> Result<(), TestCaseError> {
    let bound = input_len.saturating_mul(per_byte).saturating_add(slack);
    if a.largest > bound || a.total > bound.saturating_mul(2) {
        return Err(TestCaseError::fail(format!(
            "{what}: unbounded allocation: {a:?} for {input_len} input bytes (bound {bound})"
        )));
    }
    Ok(())
}

/// Bytes, shown in hex.
#[derive(Clone, PartialEq, Eq)]
pub struct Hex(pub Vec<u8>);

impl fmt::Debug for Hex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bytes: ", self.0.len())?;
        for b in &self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Arbitrary bytes, up to `max`.
pub fn bytes(max: usize) -> impl Strategy<Value = Hex> {
    proptest::collection::vec(any::<u8>(), 0..=max).prop_map(Hex)
}

/// One edit of a valid encoding.
#[derive(Clone, Debug)]
pub enum Mutation {
    FlipBit(prop::sample::Index, u8),
    SetByte(prop::sample::Index, u8),
    Insert(prop::sample::Index, Vec<u8>),
    Delete(prop::sample::Index, usize),
    Truncate(prop::sample::Index),
    /// Copies a range over another place (repeats a length or a tag).
    Copy(prop::sample::Index, prop::sample::Index, usize),
    /// Writes an interesting integer (0, 1, -1, max, a power of two)
    /// over 1, 2, 4 or 8 bytes, little- or big-endian: mostly hits
    /// lengths and counts.
    Integer(prop::sample::Index, u8, u8, bool),
}

const INTERESTING: [u64; 16] = [
    0,
    1,
    2,
    0x7f,
    0x80,
    0xff,
    0x100,
    0x7fff,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0xffff_ffff,
    0x1_0000_0000,
    i64::MAX as u64,
    u64::MAX,
    0x8000_0000_0000_0000,
];

pub fn mutation() -> impl Strategy<Value = Mutation> {
    use prop::sample::Index;
    prop_oneof![
        3 => (any::<Index>(), 0u8..8).prop_map(|(i, b)| Mutation::FlipBit(i, b)),
        3 => (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::SetByte(i, b)),
        2 => (any::<Index>(), proptest::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        2 => (any::<Index>(), 1usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
        1 => (any::<Index>(), any::<Index>(), 1usize..16)
            .prop_map(|(a, b, n)| Mutation::Copy(a, b, n)),
        3 => (any::<Index>(), 0u8..16, 0u8..4, any::<bool>())
            .prop_map(|(i, v, w, be)| Mutation::Integer(i, v, w, be)),
    ]
}

pub fn mutate(mut v: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        let len = v.len();
        match m {
            Mutation::FlipBit(i, b) if len > 0 => v[i.index(len)] ^= 1 << b,
            Mutation::SetByte(i, b) if len > 0 => v[i.index(len)] = *b,
            Mutation::Insert(i, b) => {
                let at = i.index(len + 1);
                v.splice(at..at, b.iter().copied());
            }
            Mutation::Delete(i, n) if len > 0 => {
                let at = i.index(len);
                v.drain(at..(at + n).min(len));
            }
            Mutation::Truncate(i) => v.truncate(i.index(len + 1)),
            Mutation::Copy(from, to, n) if len > 0 => {
                let (from, to) = (from.index(len), to.index(len));
                let n = (*n).min(len - from).min(len - to);
                v.copy_within(from..from + n, to);
            }
            Mutation::Integer(i, which, width, be) if len > 0 => {
                let value = INTERESTING[*which as usize % INTERESTING.len()];
                let width = 1usize << *width;
                let bytes = if *be {
                    value.to_be_bytes()[8 - width..].to_vec()
                } else {
                    value.to_le_bytes()[..width].to_vec()
                };
                let at = i.index(len);
                let n = width.min(len - at);
                v[at..at + n].copy_from_slice(&bytes[..n]);
            }
            _ => {}
        }
    }
    v
}

/// Valid encodings from `valid`, each with 1 to 8 mutations.
pub fn mutated<S>(valid: S) -> impl Strategy<Value = Hex>
where
    S: Strategy<Value = Vec<u8>>,
{
    (valid, proptest::collection::vec(mutation(), 1..8)).prop_map(|(v, ms)| Hex(mutate(v, &ms)))
}

/// What decoders are fed: arbitrary bytes (1 in 4) or mutated valid
/// encodings.
pub fn inputs<S>(valid: S, max_random: usize) -> impl Strategy<Value = Hex>
where
    S: Strategy<Value = Vec<u8>>,
{
    prop_oneof![1 => bytes(max_random), 3 => mutated(valid)]
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn fresh_seed(batch: u64) -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    (nanos ^ batch.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_add(std::process::id() as u64)
}

/// Runs `check` on values of `strategy`: `FUZZ_CASES` a batch, batches
/// until `FUZZ_SECONDS` passed (one batch when unset). `FUZZ_SEED`
/// replays a reported batch. Panics with the shrunk input on failure;
/// prints the cases run.
pub fn fuzz<S>(name: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: fmt::Debug,
{
    let cases = env("FUZZ_CASES").unwrap_or(2000).max(1) as u32;
    let seconds = env("FUZZ_SECONDS");
    let fixed_seed = env("FUZZ_SEED");
    let start = Instant::now();
    let deadline = seconds.map(|s| start + Duration::from_secs(s));
    let mut ran = 0u64;
    let mut batch = 0u64;
    loop {
        let seed = fixed_seed.unwrap_or_else(|| fresh_seed(batch));
        let config = Config {
            cases,
            failure_persistence: None,
            rng_seed: RngSeed::Fixed(seed),
            max_shrink_iters: 20_000,
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        match runner.run(&strategy, &check) {
            Ok(()) => {}
            Err(TestError::Fail(why, input)) => panic!(
                "fuzz {name}: FAILED after {ran} passing cases (batch seed {seed}; \
                 replay with FUZZ_SEED={seed} FUZZ_CASES={cases}): {why}\nminimal input: {input:?}"
            ),
            Err(TestError::Abort(why)) => panic!("fuzz {name}: aborted (seed {seed}): {why}"),
        }
        ran += cases as u64;
        batch += 1;
        match deadline {
            Some(d) if Instant::now() < d && fixed_seed.is_none() => {}
            _ => break,
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "fuzz {name}: {ran} cases in {secs:.1}s ({:.0}/s), 0 failures",
        ran as f64 / secs.max(1e-9)
    );
}

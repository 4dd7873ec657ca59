//! The record decoder on random bytes never allocates more than
//! `max_record`, whatever length the bytes claim.
//!
//! This is its own test binary because it installs a global allocator that
//! records the largest single allocation made while armed (per thread, so
//! proptest's own allocations on other threads do not count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Cursor;

use journal::record;
use proptest::prelude::*;

struct Tracking;

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the thread-locals may be gone while a thread shuts down.
    if ARMED.try_with(Cell::get).unwrap_or(false) {
        let _ = LARGEST.try_with(|l| l.set(l.get().max(size)));
    }
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Decodes records until the end or the first error; returns the largest allocation.
fn largest_allocation_decoding(bytes: &[u8], max: usize) -> usize {
    let mut r = Cursor::new(bytes);
    LARGEST.with(|l| l.set(0));
    ARMED.with(|a| a.set(true));
    while let Ok(Some(payload)) = record::read_record(&mut r, max) {
        drop(payload);
    }
    ARMED.with(|a| a.set(false));
    LARGEST.with(Cell::get)
}

proptest! {
    #[test]
    fn decoder_allocation_is_bounded_by_max_record(
        len in any::<u32>(),
        crc in any::<u32>(),
        tail in proptest::collection::vec(any::<u8>(), 0..300),
        max in 0usize..200,
    ) {
        // A header with an arbitrary (often huge) length, then random bytes.
        let mut bytes = Vec::with_capacity(8 + tail.len());
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(&crc.to_le_bytes());
        bytes.extend_from_slice(&tail);
        let largest = largest_allocation_decoding(&bytes, max);
        prop_assert!(largest <= max, "allocated {largest} with max_record {max}");
    }

    #[test]
    fn decoder_allocation_is_bounded_on_random_streams(
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
        max in 0usize..200,
    ) {
        let largest = largest_allocation_decoding(&bytes, max);
        prop_assert!(largest <= max, "allocated {largest} with max_record {max}");
    }
}

#[test]
fn tracking_allocator_sees_payload_allocations() {
    let mut bytes = Vec::new();
    record::encode(&[5u8; 150], 150, &mut bytes).unwrap();
    assert_eq!(largest_allocation_decoding(&bytes, 150), 150);
}

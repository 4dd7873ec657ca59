//! An announced length or count over the limits is refused without
//! allocating it: this test binary counts its thread's allocations.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::{Bytes, BytesMut};
use framing::{Error, Limits, Payload};
use proptest::prelude::*;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, counting what each thread asks of it (a
/// reallocation asks through `alloc`, GlobalAlloc's default).
struct Counting;

// SAFETY: allocations are the system allocator's, unchanged; the count is
// a const-initialized thread-local, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.with(|a| a.set(a.get() + layout.size()));
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is System's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes this thread allocated so far.
fn allocated() -> usize {
    ALLOCATED.with(Cell::get)
}

#[test]
fn the_count_sees_an_allocation() {
    let before = allocated();
    let v = std::hint::black_box(Vec::<u8>::with_capacity(1000));
    assert!(allocated() - before >= 1000);
    drop(v);
}

const LIMITS: Limits = Limits {
    max_frame: 1 << 20,
    max_str: 1 << 10,
    max_items: 1 << 12,
};

proptest! {
    #[test]
    fn an_announced_frame_over_the_limit_allocates_nothing(
        len in (LIMITS.max_frame as u32 + 1)..=u32::MAX,
        rest in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut buf = BytesMut::with_capacity(4 + rest.len());
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(&rest);
        let before = allocated();
        let got = LIMITS.split_frame(&mut buf);
        prop_assert_eq!(allocated() - before, 0);
        prop_assert_eq!(got, Err(Error::TooLarge { len: len as usize, max: LIMITS.max_frame }));
        prop_assert_eq!(buf.len(), 4 + rest.len(), "nothing taken off the buffer");
    }

    #[test]
    fn an_announced_count_or_string_over_the_limit_allocates_nothing(
        count in any::<u32>(),
        str_len in (LIMITS.max_str as u16 + 1)..=u16::MAX,
        rest in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let p = Payload::new(Bytes::from(rest), LIMITS);
        let before = allocated();
        let counted = p.count(count as usize, 1, "items");
        prop_assert_eq!(allocated() - before, 0);
        if let Ok(n) = counted {
            prop_assert!(n <= p.remaining() && n <= LIMITS.max_items);
        }
        let mut s = str_len.to_le_bytes().to_vec();
        s.resize(2 + str_len as usize, b'x');
        let mut p = Payload::new(Bytes::from(s), LIMITS);
        let before = allocated();
        let got = p.string("name");
        prop_assert_eq!(allocated() - before, 0);
        prop_assert_eq!(got, Err(Error::Malformed("name")));
    }
}

//! The decoders' allocation discipline, measured: a header announcing a huge
//! length or count must not make the decoder allocate anything for it while
//! the payload has not arrived.
//!
//! A separate test binary because it installs a counting global allocator;
//! counts are per thread so tests running in parallel do not disturb each
//! other.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use bytes::BytesMut;
use resp::{decode_reply, decode_request, Limits, ProtocolError};

struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // `try_with`: the allocator may run while this thread is being torn down.
    let _ = ALLOCATED.try_with(|total| total.set(total.get() + bytes));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Bytes allocated on this thread while running `f`.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let result = f();
    (result, ALLOCATED.with(Cell::get) - before)
}

fn unlimited() -> Limits {
    Limits {
        max_bulk_len: usize::MAX,
        max_multibulk_len: usize::MAX,
        max_inline_len: 64 * 1024,
    }
}

#[test]
fn announced_sizes_allocate_nothing_before_their_bytes_arrive() {
    for input in [
        &b"*2000000000\r\n"[..],
        b"*2000000000\r\n$1\r\na\r\n$1\r\n",
        b"*1\r\n$999999999999\r\n",
        b"*1\r\n$9223372036854775807\r\nabc",
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1000000\r\n",
    ] {
        let mut buf = BytesMut::from(input);
        let (result, bytes) = allocated_by(|| decode_request(&mut buf, &unlimited()));
        assert_eq!(result, Ok(None));
        assert_eq!(bytes, 0, "{:?}", String::from_utf8_lossy(input));
    }
    for input in [
        &b"*2000000000\r\n"[..],
        b"%1000000000\r\n*1000000000\r\n:1\r\n",
        b"$999999999999\r\n",
        b"=999999999999\r\ntxt:",
        b"*3\r\n$1\r\na\r\n*1000000\r\n$1\r\nb\r\n",
    ] {
        let mut buf = BytesMut::from(input);
        let (result, bytes) = allocated_by(|| decode_reply(&mut buf, &unlimited()));
        assert_eq!(result, Ok(None));
        assert_eq!(bytes, 0, "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn over_limit_headers_are_refused_without_allocating() {
    let mut buf = BytesMut::from(&b"*2000000000\r\n"[..]);
    let (result, bytes) = allocated_by(|| decode_request(&mut buf, &Limits::default()));
    assert_eq!(result, Err(ProtocolError::InvalidMultibulkLength));
    assert_eq!(bytes, 0);

    let mut buf = BytesMut::from(&b"*1\r\n$999999999999\r\n"[..]);
    let (result, bytes) = allocated_by(|| decode_request(&mut buf, &Limits::default()));
    assert_eq!(result, Err(ProtocolError::InvalidBulkLength));
    assert_eq!(bytes, 0);
}

#[test]
fn a_complete_request_allocates_only_its_argument_vector() {
    let mut buf = BytesMut::from(&b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nvalue\r\n"[..]);
    let (result, bytes) = allocated_by(|| decode_request(&mut buf, &Limits::default()));
    let args = result.unwrap().unwrap();
    assert_eq!(args.len(), 3);
    // The Vec of three `Bytes`, plus the shared header `freeze` may create
    // for the request's bytes; the arguments themselves are not copied.
    assert!(
        bytes <= 3 * std::mem::size_of::<bytes::Bytes>() + 64,
        "{bytes} bytes"
    );
}

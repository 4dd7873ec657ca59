//! Any input: no panic, and each call consumes one whole request or nothing.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use resp::{decode_request, Limits};

fuzz_target!(|data: &[u8]| {
    let small = Limits {
        max_bulk_len: 16,
        max_multibulk_len: 4,
        max_inline_len: 16,
    };
    for limits in [Limits::default(), small] {
        let mut buf = BytesMut::from(data);
        loop {
            let before = buf.len();
            match decode_request(&mut buf, &limits) {
                Ok(Some(_)) => assert!(buf.len() < before),
                Ok(None) | Err(_) => {
                    assert_eq!(buf.len(), before);
                    break;
                }
            }
        }
    }
});

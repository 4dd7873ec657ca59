//! Numbers as Redis reads and writes them: strict integers, and floats
//! (parsed, added and printed like Redis: `keyspace::number`, which float
//! counters share).

pub use keyspace::delta::parse_i64;
pub use keyspace::number::{float_sum, format_f64, parse_f64};

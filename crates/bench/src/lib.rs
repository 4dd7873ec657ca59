//! Benchmark programs for a deltagrid node.
//!
//! Benchmarks here are programs that print tables (and write JSON for
//! charts), never timed assertions in tests. Each is a module with a clap
//! `Args` struct and a `run` function, so the `deltagrid bench ...`
//! subcommands and the stand-alone examples share one implementation.
//!
//! - [`latency`]: REFERENCE.md experiment 4 (GigaSpaces' remote write
//!   latency): one client, one op in flight, optional throttled rate,
//!   average of the best 80%, against a loopback TCP echo floor.
//!
//! Throughput is measured with the stock `redis-benchmark` by
//! `bench/throughput.sh`, so that it needs no code here.

pub mod latency;

mod echo;
mod stats;
mod wire;

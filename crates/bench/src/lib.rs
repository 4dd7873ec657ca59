//! Benchmark programs for a deltagrid node, and the experiments that
//! replay other grids' published ones.
//!
//! Benchmarks here are programs that print tables (and write JSON for
//! charts), never timed assertions in tests. Each is a module with a clap
//! `Args` struct and a `run` function, so the `deltagrid demo` and
//! `deltagrid bench ...` subcommands (and the stand-alone examples) share
//! one implementation; the `deltagrid` binary only wires them into its CLI.
//!
//! - [`latency`]: REFERENCE.md experiment 4 (GigaSpaces' remote write
//!   latency): one client, one op in flight, optional throttled rate,
//!   average of the best 80%, against a loopback TCP echo floor.
//! - [`demo`]: `deltagrid demo`, GemFire's WAN delta experiment
//!   (REFERENCE.md #1) in a few seconds on loopback.
//! - [`wan_delta`]: `deltagrid bench wan-delta`, the same experiment as a
//!   benchmark, optionally across network namespaces, with result files.
//! - [`wan_load`]: `deltagrid bench wan-load`, Hazelcast's WAN replication
//!   under load (REFERENCE.md #2): ack modes, partition counts, an outage.
//!
//! The last three start two sites of `deltagrid server` processes
//! (`gemfire::sites`) by running the program they are in again: they work
//! inside the `deltagrid` binary, not from a stand-alone example.
//!
//! Throughput is measured with the stock `redis-benchmark` by
//! `bench/throughput.sh`, so that it needs no code here.

pub mod demo;
pub mod latency;
pub mod wan_delta;
pub mod wan_load;

mod admin_http;
mod echo;
mod gemfire;
mod result_files;
mod stats;
mod wire;

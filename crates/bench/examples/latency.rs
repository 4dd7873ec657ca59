//! Stand-alone entry to the latency benchmark, until (and besides)
//! `deltagrid bench latency`: `cargo run --release -p bench --example
//! latency -- --port 6379`.

use clap::Parser;

#[derive(Parser)]
#[command(about = "One client, one op in flight: per-op latency next to a loopback echo floor")]
struct Cli {
    #[command(flatten)]
    latency: bench::latency::LatencyArgs,
}

fn main() -> anyhow::Result<()> {
    bench::latency::run(&Cli::parse().latency)
}

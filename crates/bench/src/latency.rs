//! Remote write latency, the way GigaSpaces measured it (docs/benchmarks.md,
//! experiment 4): one client, one blocking TCP connection with
//! `TCP_NODELAY`, one op in flight, optionally throttled to a fixed rate;
//! warm-up ops are not counted; each op is timed with [`Instant`] in
//! nanoseconds; the headline figure is the average of the best 80%.
//!
//! Latency and throughput are different measurements: nothing here is
//! pipelined or concurrent, so the numbers are round-trip service times.
//!
//! Every workload is also run against an in-process loopback echo server
//! with the very same request bytes (reading back as many bytes): that is
//! the floor of this machine, and `p50 minus floor` is what the server
//! itself costs.
//!
//! Keys are written under `dgbench:lat:*` and left in place.

mod report;
mod workload;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::echo::EchoServer;
use crate::stats::{summarize, Summary};
use crate::wire::{encode_request, ReplyReader};
use workload::RequestGen;
pub use workload::Workload;

/// A server that does not answer within this long fails the workload
/// instead of hanging the benchmark.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Setup writes are pipelined in batches of this many.
const SETUP_BATCH: usize = 100;

/// One client, one op in flight: per-op latency against a Redis-protocol
/// server, next to the loopback echo floor.
#[derive(clap::Args, Debug, Clone)]
pub struct LatencyArgs {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port.
    #[arg(long, default_value_t = 6379)]
    pub port: u16,
    /// Measured ops per workload.
    #[arg(long, default_value_t = 20_000)]
    pub ops: u64,
    /// Warm-up ops per workload, sent first and not counted.
    #[arg(long, default_value_t = 2_000)]
    pub warmup: u64,
    /// Ops per second; 0 = unthrottled. Throttled: one op, then wait for
    /// the next tick (no catching up after a slow op).
    #[arg(long, default_value_t = 0, value_name = "OPS_PER_SEC")]
    pub rate: u64,
    /// One workload: empty | hash8 | bytes:N | get:N. Default: all of
    /// empty, hash8, bytes:100, get:100.
    #[arg(long, value_name = "WORKLOAD")]
    pub value: Option<Workload>,
    /// Also measure the loopback echo floor (`--echo-floor false` to skip).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub echo_floor: bool,
    /// Write the results as JSON to this file.
    #[arg(long, value_name = "PATH")]
    pub json: Option<std::path::PathBuf>,
    /// Key prefix; put a {hash tag} in it to send every key to one slot of a site
    #[arg(long, default_value = "dgbench:lat")]
    pub key_prefix: String,
    /// Follow every op with `WAIT N 0` in the same write, and time both
    /// replies: Redis's synchronous replication to N replicas. 0 = off.
    /// The echo floor is measured without it.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub wait_replicas: u32,
}

/// The measurements of one workload.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadResult {
    pub workload: String,
    pub label: String,
    pub request_bytes: usize,
    pub server: Option<Summary>,
    pub echo_floor: Option<Summary>,
    pub error: Option<String>,
}

/// Runs every selected workload, prints the tables, writes JSON if asked.
/// Fails if the server cannot be reached, or after printing if any workload
/// failed (an error reply, a wrong reply, a timeout).
pub fn run(args: &LatencyArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.ops > 0, "--ops must be at least 1");
    let target = format!("{}:{}", args.host, args.port);
    connect(&target).with_context(|| format!("cannot connect to {target}: is the server up?"))?;
    let echo = if args.echo_floor {
        Some(EchoServer::start().context("starting the loopback echo server")?)
    } else {
        None
    };
    let workloads = match args.value {
        Some(w) => vec![w],
        None => Workload::DEFAULTS.to_vec(),
    };

    let mut results = Vec::new();
    for workload in workloads {
        let gen = RequestGen::with_prefix(workload, &args.key_prefix);
        let mut req = Vec::new();
        gen.request(0, &mut req);
        eprintln!(
            "latency: {} ({} request bytes) ...",
            workload.label(),
            req.len()
        );
        let echo_floor = match &echo {
            Some(server) => Some(measure_echo(&server.addr().to_string(), &gen, args)?),
            None => None,
        };
        let (server, error) = match measure_server(&target, &gen, args) {
            Ok(summary) => (Some(summary), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        results.push(WorkloadResult {
            workload: workload.to_string(),
            label: workload.label(),
            request_bytes: req.len(),
            server,
            echo_floor,
            error,
        });
    }

    report::print(&target, args, &results);
    if let Some(path) = &args.json {
        report::write_json(path, &target, args, &results)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let failed = results.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        bail!(
            "{failed} of {} workloads failed against {target}",
            results.len()
        );
    }
    Ok(())
}

fn connect(addr: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    Ok(stream)
}

fn measure_server(target: &str, gen: &RequestGen, args: &LatencyArgs) -> anyhow::Result<Summary> {
    let mut stream = connect(target).with_context(|| format!("connecting to {target}"))?;
    let mut replies = ReplyReader::default();
    let mut wait = Vec::new();
    if args.wait_replicas > 0 {
        let n = args.wait_replicas.to_string();
        encode_request(&[b"WAIT", n.as_bytes(), b"0"], &mut wait);
    }
    let want = i64::from(args.wait_replicas);
    // One write per op: the request and its WAIT in the same buffer.
    let mut out = Vec::new();
    for batch in gen.setup_requests().chunks(SETUP_BATCH) {
        for req in batch {
            stream.write_all(req)?;
        }
        for _ in batch {
            replies.read_reply(&mut stream).context("setup")?;
        }
    }
    let ns = client_loop(&mut stream, gen, args, |stream, req| {
        out.clear();
        out.extend_from_slice(req);
        out.extend_from_slice(&wait);
        stream.write_all(&out)?;
        let head = replies.read_reply(stream)?;
        gen.check_reply(head).map_err(anyhow::Error::msg)?;
        if want > 0 {
            let acked = replies.read_reply(stream).context("WAIT")?.int;
            anyhow::ensure!(
                acked.is_some_and(|n| n >= want),
                "WAIT {want} 0 replied {acked:?}, expected an integer >= {want}"
            );
        }
        Ok(())
    })?;
    summarize(ns).context("no samples")
}

fn measure_echo(addr: &str, gen: &RequestGen, args: &LatencyArgs) -> anyhow::Result<Summary> {
    let mut stream = connect(addr).context("connecting to the echo server")?;
    let mut back = Vec::new();
    let ns = client_loop(&mut stream, gen, args, |stream, req| {
        back.resize(req.len(), 0);
        stream.write_all(req)?;
        stream.read_exact(&mut back)?;
        Ok(())
    })
    .context("echo floor")?;
    summarize(ns).context("no samples")
}

/// The one loop both the server and the echo floor are measured with: build
/// the request outside the timed region, pace, time one exchange.
fn client_loop(
    stream: &mut TcpStream,
    gen: &RequestGen,
    args: &LatencyArgs,
    mut exchange: impl FnMut(&mut TcpStream, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<u64>> {
    let mut req = Vec::new();
    let mut samples = Vec::with_capacity(usize::try_from(args.ops).unwrap_or(0));
    let mut pacer = Pacer::new(args.rate);
    for seq in 0..args.warmup + args.ops {
        gen.request(seq, &mut req);
        pacer.wait();
        let start = Instant::now();
        exchange(stream, &req).with_context(|| format!("op {seq}"))?;
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        if seq >= args.warmup {
            samples.push(ns);
        }
    }
    Ok(samples)
}

/// Fixed-rate ticks. An op that overruns its tick is followed at once and
/// the schedule restarts from there: no burst to catch up, since a burst
/// would measure queueing, not the latency of one op.
struct Pacer {
    period: Option<Duration>,
    next: Option<Instant>,
}

impl Pacer {
    fn new(rate: u64) -> Self {
        let period = (rate > 0).then(|| Duration::from_nanos(1_000_000_000 / rate.max(1)));
        Self { period, next: None }
    }

    fn wait(&mut self) {
        let Some(period) = self.period else { return };
        let now = Instant::now();
        let start = match self.next {
            Some(tick) if tick > now => {
                std::thread::sleep(tick - now);
                tick
            }
            _ => now,
        };
        self.next = Some(start + period);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        latency: LatencyArgs,
    }

    #[test]
    fn defaults_and_flags_parse() {
        let a = Cli::parse_from(["x"]).latency;
        assert_eq!(
            (a.host.as_str(), a.port, a.ops, a.warmup, a.rate),
            ("127.0.0.1", 6379, 20_000, 2_000, 0)
        );
        assert!(a.echo_floor && a.value.is_none() && a.json.is_none());
        let a = Cli::parse_from([
            "x",
            "--value",
            "bytes:1024",
            "--echo-floor",
            "false",
            "--rate",
            "500",
        ])
        .latency;
        assert_eq!(a.value, Some(Workload::Bytes(1024)));
        assert!(!a.echo_floor);
        assert_eq!((a.rate, a.wait_replicas), (500, 0));
        let a = Cli::parse_from(["x", "--wait-replicas", "1"]).latency;
        assert_eq!(a.wait_replicas, 1);
    }

    #[test]
    fn pacer_holds_the_rate() {
        let mut p = Pacer::new(1000);
        let start = Instant::now();
        for _ in 0..21 {
            p.wait();
        }
        // 20 periods of 1 ms after the first tick.
        assert!(start.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn runs_against_the_echo_server_as_a_fake_target() {
        // The echo server is not Redis, but it proves the loop and pacing
        // end to end without a server: measure the floor only.
        let echo = EchoServer::start().unwrap();
        let args = LatencyArgs {
            host: "127.0.0.1".into(),
            port: echo.addr().port(),
            ops: 50,
            warmup: 5,
            rate: 0,
            value: None,
            echo_floor: true,
            json: None,
            key_prefix: "dgbench:lat".into(),
            wait_replicas: 0,
        };
        let s = measure_echo(
            &echo.addr().to_string(),
            &RequestGen::new(Workload::Hash8),
            &args,
        )
        .unwrap();
        assert_eq!(s.samples, 50);
        assert!(s.p50_us > 0.0 && s.p50_us <= s.max_us);
    }
}

//! Where the two sites of a WAN experiment run: each site's address,
//! network namespace and CPUs, and the command-line options that say so
//! (`PlacementArgs`, taken by every WAN benchmark).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;

/// Where one site's nodes run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct SitePlacement {
    /// Every port of the site's nodes (client, admin, cluster, WAN) binds this address.
    pub ip: IpAddr,
    /// Started with `ip netns exec NS` when set.
    pub netns: Option<String>,
    /// CPUs the site's processes are confined to (`taskset -c LIST`), so
    /// that two sites sharing one machine do not take each other's CPU, as
    /// two data centers would not.
    pub cpus: Option<String>,
}

impl SitePlacement {
    /// "10.77.0.1 (netns ns_dg1, CPUs 0)", for the printed header.
    pub fn describe(&self) -> String {
        let ns = self
            .netns
            .as_deref()
            .map_or("this namespace".into(), |n| format!("netns {n}"));
        let cpus = self
            .cpus
            .as_deref()
            .map_or(String::new(), |c| format!(", CPUs {c}"));
        format!("{} ({ns}{cpus})", self.ip)
    }

    /// A command that runs `exe` where this site runs: on its CPUs (taskset)
    /// and in its namespace (ip netns exec). Both exec in place, so the
    /// child's pid is `exe`'s.
    pub fn command(&self, exe: &Path) -> Command {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        if let Some(cpus) = &self.cpus {
            argv.extend(["taskset".into(), "-c".into(), cpus.into()]);
        }
        if let Some(ns) = &self.netns {
            argv.extend(["ip".into(), "netns".into(), "exec".into(), ns.into()]);
        }
        argv.push(exe.into());
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }
}

/// Where sites 1 and 2 run. The process running the workload (the client)
/// must be able to reach both addresses; GemFire's client sat in site 1.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Placement {
    pub sites: [SitePlacement; 2],
}

/// Where the two sites run and how they are linked: the options every WAN
/// benchmark takes.
#[derive(clap::Args, Debug)]
pub struct PlacementArgs {
    /// Network namespace to start site 1's nodes in (ip netns exec)
    #[arg(long, requires = "site1_ip")]
    site1_netns: Option<String>,
    /// Address site 1's nodes bind (default 127.0.0.1)
    #[arg(long)]
    site1_ip: Option<IpAddr>,
    /// Network namespace to start site 2's nodes (and its clients) in
    #[arg(long, requires = "site2_ip")]
    site2_netns: Option<String>,
    /// Address site 2's nodes bind (default 127.0.0.1)
    #[arg(long)]
    site2_ip: Option<IpAddr>,
    /// CPUs for site 1's nodes (taskset -c LIST, e.g. 0); the benchmark
    /// process, which runs site 1's clients, should be started on them too
    #[arg(long)]
    site1_cpus: Option<String>,
    /// CPUs for site 2's nodes and its clients (e.g. 1)
    #[arg(long)]
    site2_cpus: Option<String>,
    /// How the sites are linked, recorded in the results (e.g. "netem delay 10ms rate 200mbit")
    #[arg(long)]
    link: Option<String>,
}

impl PlacementArgs {
    /// The placement, and the link's description for the results.
    pub fn resolve(&self) -> (Placement, String) {
        let mut placement = Placement::loopback();
        for (site, netns, ip) in [
            (0, &self.site1_netns, self.site1_ip),
            (1, &self.site2_netns, self.site2_ip),
        ] {
            if let Some(ip) = ip {
                placement.sites[site] = SitePlacement {
                    ip,
                    netns: netns.clone(),
                    cpus: None,
                };
            }
        }
        placement.sites[0].cpus = self.site1_cpus.clone();
        placement.sites[1].cpus = self.site2_cpus.clone();
        let link = self.link.clone().unwrap_or_else(|| {
            match (&placement.sites[0].netns, &placement.sites[1].netns) {
                (None, None) => "none (both sites on one host, no emulation)".into(),
                _ => "network namespaces (link not described: pass --link)".into(),
            }
        });
        (placement, link)
    }
}

impl Placement {
    /// Both sites on 127.0.0.1, in this process's namespace.
    pub fn loopback() -> Placement {
        let lo = SitePlacement {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            netns: None,
            cpus: None,
        };
        Placement {
            sites: [lo.clone(), lo],
        }
    }
}

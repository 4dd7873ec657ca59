//! What `deltagrid bench wan-load` runs: the settings every run shares and
//! each run's kind (`wan-off[-N]`, `wan-off-mirror[-N]`, `on-apply-N`,
//! `pipelined-N`, `outage-N`), parsed from its name.

use serde::Serialize;

/// The settings every run shares.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    pub seconds: u64,
    pub outage_seconds: u64,
    pub keys: usize,
    pub value_bytes: usize,
    pub site1_threads: usize,
    pub site2_threads: usize,
    pub pipeline: usize,
    pub site2_rate: f64,
    pub memory_budget: Option<String>,
    pub disk_budget: Option<String>,
    pub catch_up_timeout: u64,
    pub smoke: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct RunSpec {
    pub name: String,
    pub wan: bool,
    pub ack: Option<&'static str>,
    pub partitions: u16,
    pub outage: bool,
    /// WAN off, and site 2 SETs as many values as site 1's clients do
    /// (its own clients), so its CPUs are as busy as when it applies them.
    pub mirror: bool,
}

impl RunSpec {
    /// `wan-off[-N]`, `wan-off-mirror[-N]`, `on-apply-N`, `pipelined-N` or `outage-N`.
    pub fn parse(name: &str) -> Option<RunSpec> {
        let (kind, partitions) = match name.rsplit_once('-') {
            Some((kind, n)) if n.bytes().all(|b| b.is_ascii_digit()) => {
                (kind, n.parse::<u16>().ok()?)
            }
            _ => (name, 271),
        };
        if partitions == 0 || partitions > keyspace::slot::SLOTS {
            return None;
        }
        let (wan, ack, outage) = match kind {
            "wan-off" | "wan-off-mirror" => (false, None, false),
            "on-apply" => (true, Some("on-apply"), false),
            "pipelined" => (true, Some("pipelined"), false),
            "outage" => (true, Some("pipelined"), true),
            _ => return None,
        };
        let mirror = kind == "wan-off-mirror";
        Some(RunSpec {
            name: name.to_string(),
            wan,
            ack,
            partitions,
            outage,
            mirror,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::RunSpec;

    #[test]
    fn run_names_parse() {
        let m = RunSpec::parse("wan-off-mirror").unwrap();
        assert!(!m.wan && m.mirror && m.partitions == 271);
        let m = RunSpec::parse("wan-off-mirror-2048").unwrap();
        assert!(!m.wan && m.mirror && m.partitions == 2048);
        let off = RunSpec::parse("wan-off-16384").unwrap();
        assert!(!off.wan && !off.mirror && off.partitions == 16384);
        let o = RunSpec::parse("outage-271").unwrap();
        assert!(o.wan && o.outage && !o.mirror);
        assert!(RunSpec::parse("wan-on").is_none());
        assert!(RunSpec::parse("pipelined-0").is_none());
    }
}

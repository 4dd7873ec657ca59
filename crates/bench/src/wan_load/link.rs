//! The link between the sites as `deltagrid bench wan-load` knows it: a
//! rate given as `tc` writes it (`200mbit`), and the command that narrows
//! it for the outage runs (`--drain-link-rate`, `--set-link-rate`).

use anyhow::{bail, Context};

/// "200mbit" -> bytes per second.
pub fn parse_rate(r: &str) -> anyhow::Result<f64> {
    let r = r.trim().to_ascii_lowercase();
    let split = r
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(r.len());
    let (n, unit) = r.split_at(split);
    let n: f64 = n.parse()?;
    let mult = match unit {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        _ => bail!("unknown unit {unit:?} (use bit, kbit, mbit, gbit)"),
    };
    Ok(n * mult / 8.0)
}

/// The outage runs' narrower link (--drain-link-rate).
pub struct LinkRate {
    pub drain: String,
    pub drain_bps: f64,
    pub normal: String,
    pub cmd: String,
}

impl LinkRate {
    pub fn set(&self, rate: &str) -> anyhow::Result<()> {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{} {rate}", self.cmd))
            .output()
            .with_context(|| format!("running {:?}", self.cmd))?;
        if !out.status.success() {
            bail!(
                "setting the link rate to {rate} ({} {rate}): {}",
                self.cmd,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn link_rates_are_bytes_per_second() {
        assert_eq!(parse_rate("200mbit").unwrap(), 25e6);
        assert_eq!(parse_rate("1Gbit").unwrap(), 125e6);
        assert_eq!(parse_rate("8000").unwrap(), 1000.0);
        assert!(parse_rate("200mb").is_err());
    }
}

//! `#!lua flags=...` on the first line of an EVAL script (Redis 7): the
//! flags it declares, and where the code starts (the line is skipped but
//! its line feed kept, so line numbers in errors stay the user's).

/// What a script declares. Without a shebang a script runs in Redis's
/// compatibility mode (it may write; declared keys are not enforced).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    pub shebang: bool,
    pub no_writes: bool,
    pub allow_oom: bool,
    pub allow_stale: bool,
    pub no_cluster: bool,
    pub allow_cross_slot_keys: bool,
}

/// The flags and the offset of the code in `body`, or the error text
/// (without its "ERR ").
pub fn parse(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..end]);
    let mut parts = line.split_ascii_whitespace();
    let Some(engine) = parts.next() else {
        return Err("Invalid engine in script shebang".into());
    };
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = ScriptFlags {
        shebang: true,
        ..Default::default()
    };
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            match f {
                "no-writes" => flags.no_writes = true,
                "allow-oom" => flags.allow_oom = true,
                "allow-stale" => flags.allow_stale = true,
                "no-cluster" => flags.no_cluster = true,
                "allow-cross-slot-keys" => flags.allow_cross_slot_keys = true,
                other => return Err(format!("Unexpected flag in script shebang: {other}")),
            }
        }
    }
    Ok((flags, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_flags_and_errors() {
        assert_eq!(parse(b"return 1").unwrap(), (ScriptFlags::default(), 0));
        let (f, at) = parse(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(f.shebang && f.no_writes && f.allow_oom && !f.no_cluster);
        assert_eq!(at, 31);
        assert_eq!(
            parse(b"#!python\nx").unwrap_err(),
            "Unexpected engine in script shebang: #!python"
        );
        assert_eq!(
            parse(b"#!lua flags=bad\nx").unwrap_err(),
            "Unexpected flag in script shebang: bad"
        );
        assert_eq!(parse(b"#!lua").unwrap_err(), "Invalid script shebang");
    }
}

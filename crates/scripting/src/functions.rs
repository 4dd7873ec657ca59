//! Redis 7 functions: FUNCTION LOAD's libraries (`#!lua name=<lib>`, code
//! that calls `redis.register_function`), the functions they register,
//! and FCALL. Kept in the engine made for functions.

use std::collections::{BTreeMap, HashMap};

use mlua::{Function, Table, Value};
use resp::ReplyWriter;

use crate::engine::{Engine, Host, Invocation};
use crate::shebang::ScriptFlags;

pub(crate) const LOAD_TIMEOUT: &str = "FUNCTION LOAD timeout";

/// Milliseconds a library's code may run while it loads (Redis: 500).
const LOAD_TIMEOUT_MS: u64 = 500;

/// What FUNCTION RESTORE does with the libraries already there.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    /// All are deleted first.
    Flush,
    /// A library of the same name is an error.
    Append,
    /// A library of the same name is replaced.
    Replace,
}

pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    /// Its functions' names, sorted.
    pub functions: Vec<String>,
}

pub struct FunctionInfo {
    pub library: String,
    pub flags: ScriptFlags,
    pub flag_names: Vec<String>,
    pub description: Option<String>,
    callback: Function,
}

#[derive(Default)]
pub(crate) struct Libraries {
    libraries: BTreeMap<String, Library>,
    functions: HashMap<String, FunctionInfo>,
}

impl Engine {
    /// FUNCTION LOAD: the library's name, or the error reply.
    pub fn load_library(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let name = library_name(code).map_err(|e| format!("ERR {e}"))?;
        if !replace && self.libraries.libraries.contains_key(&name) {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let skip = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        let chunk = self.compile(&code[skip..], "@user_function", "Error compiling function")?;
        self.watchdog().begin_load(LOAD_TIMEOUT_MS);
        let loaded = self.load.call::<(bool, Value)>(chunk);
        let overdue = self.watchdog().load_overdue();
        self.watchdog().end_load();
        let registered = match loaded {
            _ if overdue => return Err(format!("ERR Error registering functions: {LOAD_TIMEOUT}")),
            Ok((true, Value::Table(t))) => t,
            Ok((_, v)) => {
                let msg = v.to_string().unwrap_or_default();
                return Err(format!("ERR Error registering functions: {msg}"));
            }
            Err(e) => return Err(format!("ERR Error registering functions: {e}")),
        };
        let mut new = Vec::new();
        for entry in registered.sequence_values::<Table>() {
            let entry = entry.map_err(|e| format!("ERR {e}"))?;
            let fname: String = entry.get("name").map_err(|e| format!("ERR {e}"))?;
            let flag_names: Vec<String> = entry
                .get::<Table>("flags")
                .and_then(|t| t.sequence_values::<String>().collect())
                .unwrap_or_default();
            let mut flags = ScriptFlags {
                shebang: true,
                ..Default::default()
            };
            for f in &flag_names {
                match f.as_str() {
                    "no-writes" => flags.no_writes = true,
                    "allow-oom" => flags.allow_oom = true,
                    "allow-stale" => flags.allow_stale = true,
                    "no-cluster" => flags.no_cluster = true,
                    _ => flags.allow_cross_slot_keys = true,
                }
            }
            let info = FunctionInfo {
                library: name.clone(),
                flags,
                flag_names,
                description: entry.get("description").ok(),
                callback: entry.get("callback").map_err(|e| format!("ERR {e}"))?,
            };
            new.push((fname, info));
        }
        if new.is_empty() {
            return Err("ERR No functions registered".into());
        }
        let libs = &mut self.libraries;
        for (fname, _) in &new {
            if let Some(other) = libs.functions.get(&fname.to_ascii_lowercase()) {
                if other.library != name {
                    return Err(format!("ERR Function {fname} already exists"));
                }
            }
        }
        libs.remove(&name);
        let mut names: Vec<String> = new.iter().map(|(n, _)| n.clone()).collect();
        names.sort();
        libs.functions
            .extend(new.into_iter().map(|(n, f)| (n.to_ascii_lowercase(), f)));
        libs.libraries.insert(
            name.clone(),
            Library {
                name: name.clone(),
                code: code.to_vec(),
                functions: names,
            },
        );
        Ok(name)
    }

    /// FUNCTION RESTORE: the libraries' codes loaded by `policy`, all or
    /// none (on an error the libraries are as they were).
    pub fn restore_libraries(
        &mut self,
        codes: &[Vec<u8>],
        policy: RestorePolicy,
    ) -> Result<(), String> {
        if policy == RestorePolicy::Append {
            for code in codes {
                if let Ok(name) = library_name(code) {
                    if self.libraries.libraries.contains_key(&name) {
                        return Err(format!("ERR Library {name} already exists"));
                    }
                }
            }
        }
        let saved: Vec<Vec<u8>> = self.libraries().map(|l| l.code.clone()).collect();
        let mut result = Ok(());
        if policy == RestorePolicy::Flush {
            result = self.flush().map_err(|e| format!("ERR {e}"));
        }
        for code in codes {
            if result.is_err() {
                break;
            }
            result = self
                .load_library(code, policy == RestorePolicy::Replace)
                .map(drop);
        }
        if result.is_err() {
            // Back to what it was: the saved libraries loaded before.
            self.flush().map_err(|e| format!("ERR {e}"))?;
            for code in &saved {
                let _ = self.load_library(code, false);
            }
        }
        result
    }

    /// FUNCTION DELETE: whether the library was there.
    pub fn delete_library(&mut self, name: &str) -> bool {
        self.libraries.remove(name)
    }

    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.libraries.values()
    }

    /// A function by name, in any case (Redis's are case-insensitive).
    pub fn function(&self, name: &str) -> Option<&FunctionInfo> {
        self.libraries.functions.get(&name.to_ascii_lowercase())
    }

    /// (libraries, functions).
    pub fn function_counts(&self) -> (usize, usize) {
        (
            self.libraries.libraries.len(),
            self.libraries.functions.len(),
        )
    }

    /// FCALL / FCALL_RO of a function that exists.
    pub fn call_function(
        &mut self,
        name: &str,
        keys: &[&[u8]],
        argv: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyWriter,
    ) {
        let Some(f) = self.function(name) else {
            out.error("ERR Function not found");
            return;
        };
        let callback = f.callback.clone();
        self.invoke(Invocation::Function(callback), name, keys, argv, host, out);
    }
}

impl Libraries {
    fn remove(&mut self, name: &str) -> bool {
        match self.libraries.remove(name) {
            Some(lib) => {
                for f in &lib.functions {
                    self.functions.remove(&f.to_ascii_lowercase());
                }
                true
            }
            None => false,
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The library's name from its first line, `#!lua name=<name>`.
fn library_name(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[..end]);
    let mut parts = line.split_ascii_whitespace();
    let engine = parts
        .next()
        .and_then(|p| p.strip_prefix("#!"))
        .ok_or("Invalid library metadata")?;
    let mut name = None;
    for part in parts {
        match part.strip_prefix("name=") {
            Some(_) if name.is_some() => {
                return Err("Invalid metadata value, name argument was given multiple times".into())
            }
            Some(n) => name = Some(unquote(n).to_string()),
            None => return Err(format!("Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    if !valid_name(&name) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    Ok(name)
}

/// `"x"` or `'x'` as x (the metadata line is split as Redis splits
/// arguments).
fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::library_name;

    #[test]
    fn library_metadata() {
        assert_eq!(library_name(b"#!lua name=mylib\nx").unwrap(), "mylib");
        assert_eq!(
            library_name(b"return 1").unwrap_err(),
            "Missing library metadata"
        );
        assert_eq!(
            library_name(b"#!lua\n").unwrap_err(),
            "Library name was not given"
        );
        assert_eq!(
            library_name(b"#!js name=x\n").unwrap_err(),
            "Engine 'js' not found"
        );
        assert_eq!(
            library_name(b"#!lua foo=bar\n").unwrap_err(),
            "Invalid metadata value given: foo=bar"
        );
        assert_eq!(
            library_name(b"#! name=x\n").unwrap_err(),
            "Engine '' not found"
        );
        assert_eq!(library_name(b"#!lua name=\"q\"\n").unwrap(), "q");
    }
}

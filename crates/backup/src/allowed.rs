//! Which storage URLs a node may write backups to or restore from
//! (`[backup] allowed_urls`): a `BACKUPJOB` names its URL, and the node
//! must not write wherever a client says. A URL is allowed when it lies
//! under one of the configured ones: same scheme and host (bucket), and
//! its path is the allowed path or below it, compared segment by segment
//! after the URL standard's normalisation (`..` and `%2e%2e` resolved), so
//! `file:///backups/../etc` is not under `file:///backups`.

use crate::Error;

/// The configured URLs (none: nothing is allowed).
#[derive(Clone, Debug, Default)]
pub struct AllowedUrls {
    prefixes: Vec<url::Url>,
}

impl AllowedUrls {
    /// Parses each configured URL; a bad one is an error naming it.
    pub fn new<S: AsRef<str>>(urls: &[S]) -> Result<AllowedUrls, Error> {
        let prefixes = urls
            .iter()
            .map(|u| {
                let u = u.as_ref();
                url::Url::parse(u).map_err(|e| Error::Url(format!("{u}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(AllowedUrls { prefixes })
    }

    /// Ok when `url` is under an allowed URL; else the refusal a client sees.
    pub fn check(&self, url: &str) -> Result<(), Error> {
        let parsed = url::Url::parse(url).map_err(|e| Error::Url(format!("{url}: {e}")))?;
        if self.prefixes.iter().any(|p| under(&parsed, p)) {
            return Ok(());
        }
        let allowed: Vec<&str> = self.prefixes.iter().map(url::Url::as_str).collect();
        Err(Error::Refused(format!(
            "{url} is not under [backup] allowed_urls ({})",
            if allowed.is_empty() {
                "none configured".to_string()
            } else {
                allowed.join(", ")
            }
        )))
    }
}

/// The decoded, non-empty path segments; None when one would escape
/// (a decoded `/` or `..`).
fn segments(u: &url::Url) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for s in u.path_segments()?.filter(|s| !s.is_empty()) {
        let d = percent_decode(s)?;
        if d.contains('/') || d.contains('\\') || d == ".." || d == "." {
            return None;
        }
        out.push(d);
    }
    Some(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn under(u: &url::Url, prefix: &url::Url) -> bool {
    if u.scheme() != prefix.scheme()
        || u.host_str() != prefix.host_str()
        || u.port() != prefix.port()
        || u.query().is_some()
    {
        return false;
    }
    match (segments(u), segments(prefix)) {
        (Some(s), Some(p)) => s.starts_with(&p),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn allowed(list: &[&str], url: &str) -> bool {
        AllowedUrls::new(list).unwrap().check(url).is_ok()
    }

    #[test]
    fn a_url_is_allowed_only_under_a_configured_one() {
        let list = ["file:///srv/backups", "s3://bucket/site-a/"];
        assert!(allowed(&list, "file:///srv/backups"));
        assert!(allowed(&list, "file:///srv/backups/"));
        assert!(allowed(&list, "file:///srv/backups/daily"));
        assert!(allowed(&list, "s3://bucket/site-a/x"));
        assert!(!allowed(&list, "file:///srv/backups-other"));
        assert!(!allowed(&list, "file:///srv"));
        assert!(!allowed(&list, "file:///etc"));
        assert!(!allowed(&list, "s3://other/site-a/x"));
        assert!(!allowed(&list, "s3://bucket/site-b"));
        assert!(!allowed(&list, "http://bucket/site-a"));
        assert!(!allowed(&[], "file:///srv/backups"));
    }

    #[test]
    fn dot_segments_and_encoded_separators_do_not_escape() {
        let list = ["file:///srv/backups"];
        assert!(!allowed(&list, "file:///srv/backups/../etc"));
        assert!(!allowed(&list, "file:///srv/backups/%2e%2e/etc"));
        assert!(!allowed(&list, "file:///srv/backups/..%2fetc"));
        assert!(!allowed(&list, "file:///srv/backups/a%2f..%2f..%2fetc"));
        assert!(allowed(&list, "file:///srv/backups/a/../b"));
    }

    #[test]
    fn the_refusal_names_the_url_and_the_list() {
        let e = AllowedUrls::new(&["file:///srv/b"])
            .unwrap()
            .check("file:///tmp/x");
        let text = e.unwrap_err().to_string();
        assert!(
            text.contains("file:///tmp/x") && text.contains("file:///srv/b"),
            "{text}"
        );
        let none = AllowedUrls::default().check("file:///tmp/x").unwrap_err();
        assert!(none.to_string().contains("none configured"));
    }

    proptest! {
        #[test]
        fn any_input_is_answered_without_panic(url in ".{0,64}", tail in "[a-z%./]{0,24}") {
            let list = AllowedUrls::new(&["file:///srv/backups"]).unwrap();
            let _ = list.check(&url);
            let full = format!("file:///srv/backups/{tail}");
            if list.check(&full).is_ok() {
                // Whatever was allowed really is below the directory.
                let path = url::Url::parse(&full).unwrap().to_file_path().unwrap();
                prop_assert!(path.starts_with("/srv/backups"), "{path:?}");
                prop_assert!(!path.components().any(|c| c == std::path::Component::ParentDir));
            }
        }
    }
}

//! Splitting rule text into rules: Redis's `sdssplitargs` (used inside a
//! `(...)` selector) and `ACLMergeSelectorArguments` (a selector written
//! across several arguments, `(~key1` `+get)`, becomes one rule).

/// Redis's `isspace` plus NUL: bytes not allowed in patterns and names.
pub(crate) fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0)
}

pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| is_space(c))
}

fn hex_val(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// sdssplitargs: whitespace-separated arguments with `"..."` (escapes
/// `\n \r \t \b \a \xHH`) and `'...'` quoting. None on unbalanced quotes or
/// a closing quote not followed by a space.
pub(crate) fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut p = 0;
    let n = line.len();
    loop {
        while p < n && matches!(line[p], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            p += 1;
        }
        if p >= n {
            return Some(out);
        }
        let mut cur = Vec::new();
        let (mut inq, mut insq) = (false, false);
        loop {
            if inq {
                if p >= n {
                    return None;
                }
                let c = line[p];
                if c == b'\\'
                    && p + 3 < n
                    && line[p + 1] == b'x'
                    && hex_val(line[p + 2]).is_some()
                    && hex_val(line[p + 3]).is_some()
                {
                    cur.push(hex_val(line[p + 2])? * 16 + hex_val(line[p + 3])?);
                    p += 3;
                } else if c == b'\\' && p + 1 < n {
                    p += 1;
                    cur.push(match line[p] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                } else if c == b'"' {
                    if p + 1 < n && !is_space(line[p + 1]) {
                        return None;
                    }
                    p += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else if insq {
                if p >= n {
                    return None;
                }
                let c = line[p];
                if c == b'\\' && p + 1 < n && line[p + 1] == b'\'' {
                    p += 1;
                    cur.push(b'\'');
                } else if c == b'\'' {
                    if p + 1 < n && !is_space(line[p + 1]) {
                        return None;
                    }
                    p += 1;
                    break;
                } else {
                    cur.push(c);
                }
            } else {
                if p >= n {
                    break;
                }
                match line[p] {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        p += 1;
                        break;
                    }
                    b'"' => inq = true,
                    b'\'' => insq = true,
                    c => cur.push(c),
                }
            }
            p += 1;
        }
        out.push(cur);
    }
}

/// ACLMergeSelectorArguments: joins `(a` `b` `c)` into `(a b c)`. Err
/// holds the index of the argument opening an unclosed selector.
pub(crate) fn merge_selectors<A: AsRef<[u8]>>(args: &[A]) -> Result<Vec<Vec<u8>>, usize> {
    let mut out = Vec::with_capacity(args.len());
    let mut open: Option<(usize, Vec<u8>)> = None;
    for (j, op) in args.iter().enumerate() {
        let op = op.as_ref();
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((j, op.to_vec()));
            continue;
        }
        if let Some((_, sel)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().map(|(_, s)| s).unwrap_or_default());
            }
            continue;
        }
        out.push(op.to_vec());
    }
    match open {
        Some((j, _)) => Err(j),
        None => Ok(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &str) -> Option<Vec<String>> {
        split_args(s.as_bytes()).map(|v| {
            v.into_iter()
                .map(|a| String::from_utf8(a).unwrap())
                .collect()
        })
    }

    #[test]
    fn splits_like_sdssplitargs() {
        assert_eq!(split(" a  b ").unwrap(), ["a", "b"]);
        assert_eq!(
            split(r#""a b" 'c d' "\x41\n""#).unwrap(),
            ["a b", "c d", "A\n"]
        );
        assert!(split(r#""abc"#).is_none());
        assert!(split(r#""a"b"#).is_none());
        assert_eq!(split("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn merges_selectors() {
        let m = merge_selectors(&["on", "(~a", "+get", "x)", "(+set)"]).unwrap();
        assert_eq!(
            m,
            [b"on".to_vec(), b"(~a +get x)".to_vec(), b"(+set)".to_vec()]
        );
        assert_eq!(merge_selectors(&["on", "(", "x"]), Err(1));
        assert_eq!(merge_selectors(&[")"]).unwrap(), [b")".to_vec()]);
        assert_eq!(merge_selectors(&["", "()"]).unwrap().len(), 2);
    }
}

//! Describing a selector's command bitset as rules, as acl.c
//! `ACLDescribeSelectorCommandRules`: start from `+@all` (if the selector
//! was built from `+@all`) or `-@all`, greedily apply the categories that
//! fit best, then fix single commands and add first-arg rules. The rules
//! are replayed on a scratch selector as they are emitted, so applying the
//! output to a fresh selector rebuilds exactly the same bitset.

use crate::registry::{categories, registry, INTERNAL};
use crate::selector::Selector;

/// (allowed, denied) commands of category bit `flag` in `sel`.
fn count(sel: &Selector, flag: u32) -> (usize, usize) {
    let reg = registry();
    let (mut on, mut off) = (0, 0);
    for id in 0..reg.len() as u16 {
        if reg.info(id).categories & flag != 0 {
            if sel.bit(id) {
                on += 1;
            } else {
                off += 1;
            }
        }
    }
    (on, off)
}

fn apply(sel: &mut Selector, rule: &[u8]) {
    // Rules built here are always valid.
    let _ = sel.apply(rule);
}

pub(crate) fn command_rules(sel: &Selector) -> Vec<u8> {
    let reg = registry();
    let mut rules: Vec<u8> = Vec::new();
    let mut fake = Selector::new();
    let additive = !sel.future;
    if additive {
        rules.extend_from_slice(b"-@all ");
    } else {
        rules.extend_from_slice(b"+@all ");
        apply(&mut fake, b"+@all");
    }

    let mut temp = Selector::new();
    temp.bits = sel.bits;
    let cats = categories();
    let mut applied = vec![false; cats.len()];
    loop {
        let mut best = None;
        let (mut mindiff, mut maxsame) = (usize::MAX, 0);
        for (j, _) in cats.iter().enumerate() {
            // `+@all` never grants @internal: nothing to take away.
            if applied[j] || (!additive && 1 << j == INTERNAL) {
                continue;
            }
            let (on, off) = count(&temp, 1 << j);
            let (diff, same) = if additive { (off, on) } else { (on, off) };
            if same > diff && (diff < mindiff || (diff == mindiff && same > maxsame)) {
                best = Some(j);
                mindiff = diff;
                maxsame = same;
            }
        }
        let Some(j) = best else { break };
        let (op, inv) = if additive { ("+@", "-@") } else { ("-@", "+@") };
        let rule = format!("{op}{}", cats[j]);
        apply(&mut fake, rule.as_bytes());
        apply(&mut temp, format!("{inv}{}", cats[j]).as_bytes());
        rules.extend_from_slice(rule.as_bytes());
        rules.push(b' ');
        applied[j] = true;
    }

    for &id in &reg.top_level {
        single(sel, &mut fake, &mut rules, id);
        for &sub in &reg.info(id).subs {
            single(sel, &mut fake, &mut rules, sub);
        }
        if !sel.bit(id) {
            if let Some(args) = sel.firstargs.get(&id) {
                for a in args {
                    let mut rule = format!("+{}|", reg.info(id).name).into_bytes();
                    rule.extend_from_slice(a);
                    apply(&mut fake, &rule);
                    rules.extend_from_slice(&rule);
                    rules.push(b' ');
                }
            }
        }
    }
    rules.pop();
    debug_assert_eq!(fake.bits, sel.bits, "{}", String::from_utf8_lossy(&rules));
    rules
}

fn single(sel: &Selector, fake: &mut Selector, rules: &mut Vec<u8>, id: u16) {
    let user = sel.bit(id);
    if user != fake.bit(id) {
        rules.push(if user { b'+' } else { b'-' });
        rules.extend_from_slice(registry().info(id).name.as_bytes());
        rules.push(b' ');
        fake.change_perm(id, user);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn describe(rules: &[&str]) -> String {
        let mut s = Selector::new();
        for r in rules {
            s.apply(r.as_bytes()).unwrap();
        }
        String::from_utf8(command_rules(&s)).unwrap()
    }

    #[test]
    fn compacts_like_redis() {
        assert_eq!(describe(&[]), "-@all");
        assert_eq!(describe(&["+@all"]), "+@all");
        assert_eq!(describe(&["+@all", "-debug"]), "+@all -debug");
        assert_eq!(describe(&["+get"]), "-@all +get");
        assert_eq!(describe(&["+config|get"]), "-@all +config|get");
        assert_eq!(describe(&["+@all", "-config|set"]), "+@all -config|set");
        assert_eq!(describe(&["+select|0"]), "-@all +select|0");
        assert_eq!(describe(&["+@hyperloglog"]), "-@all +@hyperloglog");
        assert_eq!(describe(&["+@all", "-@string"]), "+@all -@string");
        assert_eq!(describe(&["+@all", "+wanapply"]), "+@all +wanapply");
        assert_eq!(describe(&["+@internal"]), "-@all +@internal");
    }
}

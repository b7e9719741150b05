//! Halo's names for MCP tools: `mcp__<server>__<tool>`, made valid for every provider.
//!
//! Providers accept tool names of at most 64 characters of `[A-Za-z0-9_-]` (OpenAI's
//! function names; Anthropic and Gemini accept a superset), while MCP allows 128 characters
//! and `.` (MCP server/tools, "Tool names"). So every other character becomes `_`, and a
//! name over 64 characters is cut and given `_` plus 8 hex digits of a SHA-256 of the
//! original server and tool names. Two tools whose names sanitize alike (`a.b` and `a_b`)
//! collide: the first in (server, tool) order keeps the name, the others get the hash
//! suffix. The result depends only on the set of names, never on the order servers
//! answered in.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};

/// The longest name providers accept: 64 characters.
pub const MAX_NAME_LEN: usize = 64;

/// `s` with every character outside `[A-Za-z0-9_-]` replaced by `_`.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` is 1 to 64 characters of `[A-Za-z0-9_-]`.
pub fn is_valid(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The name of `tool` of `server` when nothing collides with it: `mcp__<server>__<tool>`,
/// sanitized and cut to 64 characters (with a hash suffix when cut).
pub fn tool_name(server: &str, tool: &str) -> String {
    let base = format!("mcp__{}__{}", sanitize(server), sanitize(tool));
    if base.len() <= MAX_NAME_LEN {
        base
    } else {
        suffixed(&base, server, tool, 0)
    }
}

/// `base` cut to fit, plus `_` and 8 hex digits of the hash of (server, tool, round).
fn suffixed(base: &str, server: &str, tool: &str, round: u32) -> String {
    let mut hasher = Sha256::new();
    hasher.update(server.as_bytes());
    hasher.update([0]);
    hasher.update(tool.as_bytes());
    if round > 0 {
        hasher.update([0]);
        hasher.update(round.to_le_bytes());
    }
    let digest = hasher.finalize();
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let keep = MAX_NAME_LEN - 1 - hex.len();
    format!("{}_{hex}", &base[..base.len().min(keep)])
}

/// Names for `(server, tool)` pairs, in the input's order: each as [`tool_name`], except
/// that on a collision the first pair in (server, tool) order keeps the name and the others
/// get a hash suffix. Equal pairs get equal names. Every name is valid ([`is_valid`]) and
/// distinct pairs get distinct names, whatever the input order.
pub fn assign_names<S: AsRef<str>, T: AsRef<str>>(pairs: &[(S, T)]) -> Vec<String> {
    let unique: BTreeSet<(&str, &str)> = pairs
        .iter()
        .map(|(s, t)| (s.as_ref(), t.as_ref()))
        .collect();
    // By plain name: the pairs that want it, in (server, tool) order.
    let mut wanted: BTreeMap<String, Vec<(&str, &str)>> = BTreeMap::new();
    for &(s, t) in &unique {
        wanted.entry(tool_name(s, t)).or_default().push((s, t));
    }
    let mut used: BTreeSet<String> = wanted.keys().cloned().collect();
    let mut names: BTreeMap<(&str, &str), String> = BTreeMap::new();
    for (name, group) in &wanted {
        names.insert(group[0], name.clone());
    }
    for group in wanted.values() {
        for &(s, t) in &group[1..] {
            let base = tool_name(s, t);
            let mut round = 0;
            let name = loop {
                let candidate = suffixed(&base, s, t, round);
                if used.insert(candidate.clone()) {
                    break candidate;
                }
                round += 1;
            };
            names.insert((s, t), name);
        }
    }
    pairs
        .iter()
        .map(|(s, t)| names[&(s.as_ref(), t.as_ref())].clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_names_are_prefixed_and_sanitized() {
        assert_eq!(tool_name("everything", "echo"), "mcp__everything__echo");
        assert_eq!(
            tool_name("everything", "get-sum"),
            "mcp__everything__get-sum"
        );
        assert_eq!(tool_name("my.server", "a b/c"), "mcp__my_server__a_b_c");
        assert_eq!(tool_name("ünï", "x"), "mcp___n___x");
    }

    #[test]
    fn long_names_are_cut_with_a_stable_hash() {
        let long = "t".repeat(100);
        let name = tool_name("srv", &long);
        assert_eq!(name.len(), 64);
        assert!(is_valid(&name));
        assert_eq!(name, tool_name("srv", &long), "stable");
        assert!(name.starts_with("mcp__srv__ttt"));
        // A different long name with the same first 55 characters gets a different suffix.
        let other = format!("{}u", "t".repeat(99));
        assert_ne!(tool_name("srv", &other), name);
    }

    #[test]
    fn collisions_get_a_suffix_whatever_the_order() {
        let a = assign_names(&[("a.b", "x"), ("a_b", "x"), ("c", "y")]);
        let b = assign_names(&[("c", "y"), ("a_b", "x"), ("a.b", "x")]);
        // `a.b` sorts before `a_b`, so it keeps the plain name.
        assert_eq!(a[0], "mcp__a_b__x");
        assert_ne!(a[1], a[0]);
        assert!(a[1].starts_with("mcp__a_b__x_"), "{}", a[1]);
        assert_eq!(a[2], "mcp__c__y");
        assert_eq!((&b[2], &b[1], &b[0]), (&a[0], &a[1], &a[2]));
    }

    proptest! {
        #[test]
        fn names_are_always_valid_unique_and_order_independent(
            pairs in proptest::collection::vec(("[a-z._ ]{0,6}", "[a-zA-Z0-9.\\-_é]{0,80}"), 0..12)
        ) {
            let names = assign_names(&pairs);
            let mut by_pair = BTreeMap::new();
            for (pair, name) in pairs.iter().zip(&names) {
                prop_assert!(is_valid(name), "{name}");
                by_pair.insert(pair.clone(), name.clone());
            }
            let distinct: BTreeSet<&String> = by_pair.values().collect();
            prop_assert_eq!(distinct.len(), by_pair.len());
            let mut reversed = pairs.clone();
            reversed.reverse();
            let again = assign_names(&reversed);
            for (pair, name) in reversed.iter().zip(&again) {
                prop_assert_eq!(&by_pair[pair], name);
            }
        }
    }
}

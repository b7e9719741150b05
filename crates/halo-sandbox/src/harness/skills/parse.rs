//! Parsing one `SKILL.md` (agentskills.io specification, "SKILL.md format"): YAML
//! frontmatter between `---` lines, then a Markdown body.
//!
//! The spec's rules are applied to `name` (1–64 lowercase letters, digits and `-`, no
//! leading, trailing or doubled `-`, equal to the folder's name) and `description`
//! (1–1024 characters), and to `compatibility` (at most 500 characters). Where real skills
//! are sloppy the parser is lenient and says so in a warning: a byte order mark, CRLF line
//! endings, an unquoted `: ` in a value (the client guide's retry), flow-style `metadata`,
//! non-string `metadata` values, an `allowed-tools` list and unknown top-level fields.
//! Anything else wrong is a [`SkillProblem`]: the skill is skipped, and the message says why.

use std::collections::BTreeMap;

use serde_norway::Value;

/// The spec's longest `name`, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The spec's longest `description`, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The spec's longest `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;

/// The top-level fields the spec names.
const FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// The frontmatter and body of a usable `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    /// `name`, as written (it equals the folder's name).
    pub name: String,
    /// `description`: what the skill does and when to use it.
    pub description: String,
    /// `license`, when given.
    pub license: Option<String>,
    /// `compatibility`, when given: environment requirements.
    pub compatibility: Option<String>,
    /// `metadata`: string keys to string values (other scalars written as text).
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools` (experimental): a space-separated list of pre-approved tools.
    pub allowed_tools: Option<String>,
    /// The Markdown after the frontmatter, line endings normalized to `\n`.
    pub body: String,
}

/// Why a `SKILL.md` cannot be used (the skill is skipped): a message naming the problem.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SkillProblem(pub String);

/// A parsed skill and what was lenient about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSkill {
    /// The skill.
    pub file: SkillFile,
    /// One line per leniency (lowercase, no trailing period).
    pub warnings: Vec<String>,
}

/// Parses the bytes of a `SKILL.md` found in the folder named `folder`.
///
/// # Errors
/// [`SkillProblem`] when the file is not UTF-8, has no closed frontmatter, its YAML does
/// not parse (even after quoting values with an unquoted `: `) or is not a mapping, or a
/// field breaks the spec's rules.
///
/// ```
/// use halo_sandbox::harness::parse_skill;
///
/// let text = "---\r\nname: pdf\r\ndescription: Fill PDF forms. Use when: a form is given\r\n---\r\nSteps.\r\n";
/// let parsed = parse_skill(text.as_bytes(), "pdf").unwrap();
/// assert_eq!(parsed.file.description, "Fill PDF forms. Use when: a form is given");
/// assert_eq!(parsed.file.body, "Steps.\n");
/// assert_eq!(parsed.warnings.len(), 2); // CRLF, and the unquoted `: `
/// assert!(parse_skill(b"---\nname: PDF\ndescription: x\n---\n", "PDF").is_err());
/// ```
pub fn parse_skill(bytes: &[u8], folder: &str) -> Result<ParsedSkill, SkillProblem> {
    let problem = |m: String| Err(SkillProblem(m));
    let mut warnings = Vec::new();
    let Ok(text) = std::str::from_utf8(bytes) else {
        return problem("it is not UTF-8 text".into());
    };
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => {
            warnings.push("it starts with a byte order mark, which was ignored".into());
            rest
        }
        None => text,
    };
    let text = if text.contains("\r\n") {
        warnings.push("it has CRLF line endings, read as LF".into());
        text.replace("\r\n", "\n")
    } else {
        text.to_string()
    };
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| (text.trim_end() == "---").then_some(""))
    else {
        return problem(
            "it does not start with YAML frontmatter: the first line must be `---`".into(),
        );
    };
    let (front, body) = match split_closing(rest) {
        Some(split) => split,
        None => return problem("its frontmatter is not closed by a `---` line".into()),
    };
    let value = match serde_norway::from_str::<Value>(front) {
        Ok(v) => v,
        Err(first) => match quote_colon_values(front) {
            Some((fixed, keys)) => match serde_norway::from_str::<Value>(&fixed) {
                Ok(v) => {
                    for key in keys {
                        warnings.push(format!(
                            "the value of `{key}` has an unquoted `: `; it was read as a quoted string"
                        ));
                    }
                    v
                }
                Err(_) => return problem(format!("its frontmatter is not valid YAML: {first}")),
            },
            None => return problem(format!("its frontmatter is not valid YAML: {first}")),
        },
    };
    let Value::Mapping(map) = value else {
        return problem("its frontmatter is not a YAML mapping of fields".into());
    };
    let mut fields: BTreeMap<String, Value> = BTreeMap::new();
    for (k, v) in map {
        let Some(key) = scalar(&k) else {
            return problem("its frontmatter has a key that is not a string".into());
        };
        if !FIELDS.contains(&key.as_str()) {
            warnings.push(format!(
                "unknown field `{key}` was ignored (the spec's fields are {}; put extras under `metadata`)",
                FIELDS.join(", ")
            ));
            continue;
        }
        fields.insert(key, v);
    }
    let text_field = |key: &str| -> Result<Option<String>, SkillProblem> {
        match fields.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => scalar(v)
                .map(Some)
                .ok_or_else(|| SkillProblem(format!("`{key}` must be a string"))),
        }
    };
    let Some(name) = text_field("name")? else {
        return problem("`name` is missing".into());
    };
    check_name(&name, folder)?;
    // Trimmed: a folded or literal block (`description: >`) keeps a trailing newline.
    let description = text_field("description")?
        .unwrap_or_default()
        .trim()
        .to_string();
    if description.trim().is_empty() {
        return problem("`description` is missing or empty".into());
    }
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return problem(format!(
            "`description` is {chars} characters long, over the spec's {MAX_DESCRIPTION_CHARS}"
        ));
    }
    let compatibility = text_field("compatibility")?;
    if let Some(c) = &compatibility {
        let chars = c.chars().count();
        if chars == 0 || chars > MAX_COMPATIBILITY_CHARS {
            return problem(format!(
                "`compatibility` must be 1 to {MAX_COMPATIBILITY_CHARS} characters, not {chars}"
            ));
        }
    }
    let license = text_field("license")?;
    let metadata = match fields.get("metadata") {
        None | Some(Value::Null) => BTreeMap::new(),
        Some(Value::Mapping(m)) => {
            if is_flow_metadata(front) {
                warnings.push(
                    "`metadata` is written in flow style `{...}`; it was read as a mapping".into(),
                );
            }
            let mut out = BTreeMap::new();
            for (k, v) in m {
                let Some(key) = scalar(k) else {
                    return problem("`metadata` has a key that is not a string".into());
                };
                let value = match v {
                    Value::String(s) => s.clone(),
                    other => {
                        // A nested value is kept as one line of JSON.
                        let text = scalar(other)
                            .unwrap_or_else(|| serde_json::to_string(other).unwrap_or_default());
                        warnings.push(format!(
                            "`metadata.{key}` is not a string; it was read as `{text}`"
                        ));
                        text
                    }
                };
                out.insert(key, value);
            }
            out
        }
        Some(_) => return problem("`metadata` must be a mapping of strings to strings".into()),
    };
    let allowed_tools = match fields.get("allowed-tools") {
        None | Some(Value::Null) => None,
        Some(Value::Sequence(items)) => {
            let names: Option<Vec<String>> = items.iter().map(scalar).collect();
            let Some(names) = names else {
                return problem("`allowed-tools` must be a space-separated string".into());
            };
            warnings.push(
                "`allowed-tools` is a YAML list; the spec's form is a space-separated string"
                    .into(),
            );
            Some(names.join(" "))
        }
        Some(v) => Some(scalar(v).ok_or_else(|| {
            SkillProblem("`allowed-tools` must be a space-separated string".into())
        })?),
    };
    Ok(ParsedSkill {
        file: SkillFile {
            name,
            description,
            license,
            compatibility,
            metadata,
            allowed_tools,
            body: body.to_string(),
        },
        warnings,
    })
}

/// Whether `metadata` is written in flow style: `metadata: {` on its line, or `{` opening
/// the next non-empty line.
fn is_flow_metadata(front: &str) -> bool {
    let mut lines = front.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("metadata:") {
            let rest = rest.trim();
            if !rest.is_empty() {
                return rest.starts_with('{');
            }
            return lines
                .find(|l| !l.trim().is_empty())
                .is_some_and(|l| l.trim_start().starts_with('{'));
        }
    }
    false
}

/// The spec's `name` rules, and the folder match.
fn check_name(name: &str, folder: &str) -> Result<(), SkillProblem> {
    let problem = |m: String| Err(SkillProblem(m));
    if name.is_empty() {
        return problem("`name` is empty".into());
    }
    let chars = name.chars().count();
    if chars > MAX_NAME_CHARS {
        return problem(format!(
            "`name` is {chars} characters long, over the spec's {MAX_NAME_CHARS}"
        ));
    }
    if name.chars().any(char::is_uppercase) {
        return problem(format!("`name` `{name}` must be lowercase"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return problem(format!("`name` `{name}` must not start or end with `-`"));
    }
    if name.contains("--") {
        return problem(format!("`name` `{name}` must not contain `--`"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_alphanumeric() || *c == '-')) {
        return problem(format!(
            "`name` `{name}` has `{c}`; use only lowercase letters, digits and `-`"
        ));
    }
    if name != folder {
        return problem(format!(
            "`name` `{name}` does not match its folder `{folder}`; rename one of them"
        ));
    }
    Ok(())
}

/// Splits the text after the opening `---` at the closing `---` line: (frontmatter, body).
fn split_closing(rest: &str) -> Option<(&str, &str)> {
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// The client guide's retry: top-level `key: value` lines whose plain value holds `: `
/// get the value double-quoted. `None` when no line needed it.
fn quote_colon_values(front: &str) -> Option<(String, Vec<String>)> {
    let mut keys = Vec::new();
    let mut out = String::with_capacity(front.len() + 16);
    for line in front.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let fixed = body.split_once(": ").and_then(|(key, value)| {
            let plain = !key.is_empty()
                && !key.starts_with([' ', '\t', '#', '-'])
                && key
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '-' || c == '_');
            let value = value.trim();
            let quotable = value.contains(": ")
                && !value.starts_with(['"', '\'', '|', '>', '{', '[', '&', '*', '!']);
            (plain && quotable).then(|| {
                keys.push(key.to_string());
                let escaped = value.replace('\\', "\\\\").replace('"', "\\\"");
                format!("{key}: \"{escaped}\"")
            })
        });
        out.push_str(fixed.as_deref().unwrap_or(body));
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    (!keys.is_empty()).then_some((out, keys))
}

/// A YAML scalar as text (strings as they are, numbers and booleans as written).
fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str, folder: &str) -> ParsedSkill {
        parse_skill(text.as_bytes(), folder).unwrap()
    }

    fn err(text: &str, folder: &str) -> String {
        parse_skill(text.as_bytes(), folder).unwrap_err().0
    }

    #[test]
    fn a_clean_skill_has_no_warnings_and_keeps_its_optional_fields() {
        let p = ok(
            "---\nname: pdf-tools\ndescription: Work with PDFs.\nlicense: Apache-2.0\ncompatibility: needs python3\nmetadata:\n  author: me\n  version: \"1.0\"\nallowed-tools: Bash(git:*) Read\n---\n# PDF\n",
            "pdf-tools",
        );
        assert_eq!(p.warnings, Vec::<String>::new());
        assert_eq!(p.file.license.as_deref(), Some("Apache-2.0"));
        assert_eq!(p.file.compatibility.as_deref(), Some("needs python3"));
        assert_eq!(p.file.metadata["version"], "1.0");
        assert_eq!(p.file.allowed_tools.as_deref(), Some("Bash(git:*) Read"));
        assert_eq!(p.file.body, "# PDF\n");
    }

    #[test]
    fn sloppy_files_load_with_a_warning_each() {
        let p = ok(
            "\u{feff}---\r\nname: a\r\ndescription: Does x. Use when: y\r\nmetadata: {author: me, version: 2}\r\nversion: 3\r\nallowed-tools:\r\n  - Read\r\n  - Bash\r\n---\r\nbody\r\n",
            "a",
        );
        assert_eq!(p.file.description, "Does x. Use when: y");
        assert_eq!(p.file.metadata["version"], "2");
        assert_eq!(p.file.allowed_tools.as_deref(), Some("Read Bash"));
        let w = p.warnings.join("\n");
        for needle in [
            "byte order mark",
            "CRLF",
            "unquoted `: `",
            "flow style",
            "`metadata.version` is not a string",
            "unknown field `version`",
            "`allowed-tools` is a YAML list",
        ] {
            assert!(w.contains(needle), "{needle} in {w}");
        }
        assert_eq!(p.warnings.len(), 7, "{w}");
    }

    #[test]
    fn unusable_files_name_the_problem() {
        let cases = [
            (
                "name: a\ndescription: b\n",
                "a",
                "does not start with YAML frontmatter",
            ),
            ("---\nname: a\ndescription: b\n", "a", "not closed"),
            ("---\n- a\n- b\n---\n", "a", "not a YAML mapping"),
            (
                "---\nname: a\ndescription: [unclosed\n---\n",
                "a",
                "not valid YAML",
            ),
            ("---\ndescription: b\n---\n", "a", "`name` is missing"),
            (
                "---\nname: Bad--Name\ndescription: b\n---\n",
                "Bad--Name",
                "must be lowercase",
            ),
            (
                "---\nname: bad--name\ndescription: b\n---\n",
                "bad--name",
                "must not contain `--`",
            ),
            ("---\nname: -a\ndescription: b\n---\n", "-a", "start or end"),
            ("---\nname: a_b\ndescription: b\n---\n", "a_b", "has `_`"),
            (
                "---\nname: a\ndescription: b\n---\n",
                "b",
                "does not match its folder `b`",
            ),
            ("---\nname: a\n---\n", "a", "`description` is missing"),
            (
                "---\nname: a\ndescription: \"\"\n---\n",
                "a",
                "`description` is missing or empty",
            ),
            (
                "---\nname: a\ndescription: b\nmetadata: x\n---\n",
                "a",
                "`metadata` must be a mapping",
            ),
            (
                "---\nname: a\ndescription: {x: y}\n---\n",
                "a",
                "`description` must be a string",
            ),
        ];
        for (text, folder, want) in cases {
            let got = err(text, folder);
            assert!(got.contains(want), "{text:?}: {got}");
        }
        let long = format!("---\nname: {}\ndescription: b\n---\n", "a".repeat(65));
        assert!(err(&long, &"a".repeat(65)).contains("65 characters"));
        let long = format!("---\nname: a\ndescription: {}\n---\n", "d".repeat(1025));
        assert!(err(&long, "a").contains("1025 characters"));
        let long = format!(
            "---\nname: a\ndescription: b\ncompatibility: {}\n---\n",
            "c".repeat(501)
        );
        assert!(err(&long, "a").contains("not 501"));
        assert!(
            parse_skill(b"---\nname: a\ndescription: \xff\n---\n", "a")
                .unwrap_err()
                .0
                .contains("UTF-8")
        );
    }

    #[test]
    fn a_quoted_colon_needs_no_retry_and_an_unfixable_file_reports_the_first_error() {
        let p = ok("---\nname: a\ndescription: \"x: y\"\n---\n", "a");
        assert!(p.warnings.is_empty());
        let e = err("---\nname: a\ndescription: x: y\n  bad: [\n---\n", "a");
        assert!(e.starts_with("its frontmatter is not valid YAML: "), "{e}");
    }
}

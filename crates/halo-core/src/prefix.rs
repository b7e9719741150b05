//! The stable prefix: everything a request starts with that does not change per turn.
//!
//! A [`StablePrefix`] holds the system prompt, the tool specs, few-shot example turns and
//! the skill catalog (agentskills.io "progressive disclosure", tier 1). Providers cache a
//! request by its longest previously-seen prefix, so these bytes must be identical on every
//! call of a session. [`StablePrefix::canonical_bytes`] serializes them canonically (tools
//! and skills sorted by name, object keys sorted, no whitespace) and
//! [`StablePrefix::fingerprint`] hashes those bytes with SHA-256: any change gives a new
//! fingerprint, and nothing else can. There is no clock, random value or unordered map in
//! this type, so nothing per-turn can enter it.

use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::message::Message;

/// What a tool looks like to the model: name, description and the JSON Schema of its
/// parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name, matching `[a-zA-Z0-9_-]{1,64}` (the common subset of the providers' rules).
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema (draft 2020-12 subset) of the arguments object, with keys in canonical order.
    pub parameters: Value,
}

impl ToolSpec {
    /// A spec; the parameter schema is put in canonical key order and its `$schema` key
    /// dropped (Gemini rejects it and no provider needs it).
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        let mut parameters = canonicalize(parameters);
        if let Value::Object(map) = &mut parameters {
            map.remove("$schema");
        }
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// One entry of the skill catalog: an agentskills.io skill's frontmatter `name` and
/// `description`, and where its `SKILL.md` lives. The body is loaded later by a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillMeta {
    /// The skill's `name` (lowercase letters, digits and hyphens, at most 64 characters).
    pub name: String,
    /// The skill's `description`: what it does and when to use it.
    pub description: String,
    /// Where the skill's `SKILL.md` is, as the model should name it (optional).
    pub location: Option<String>,
}

/// Why a prefix change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PrefixError {
    /// Two tools share a name.
    #[error("tool `{0}` is already in the prefix; tool names must be unique")]
    DuplicateTool(String),
    /// A tool name outside `[a-zA-Z0-9_-]{1,64}`.
    #[error("tool name `{0}` is invalid; use 1 to 64 of a-z, A-Z, 0-9, `_` and `-`")]
    InvalidToolName(String),
    /// A tool's parameter schema is not a JSON object schema.
    #[error(
        "tool `{0}` has a parameter schema that is not a JSON object with `\"type\": \"object\"`"
    )]
    InvalidSchema(String),
}

/// The system prompt, tools, few-shot turns and skill catalog that start every request.
///
/// Build it with the `with_*` methods or through the agent builder. Tools and skills are
/// kept sorted by name, so the order they were added in does not matter.
///
/// Cheap to clone: clones share the parts and, once computed, the canonical bytes (one
/// copy in memory however many agents hold the prefix); a change to one clone copies its
/// parts first and leaves the others as they were.
///
/// ```
/// use halo_core::{StablePrefix, ToolSpec};
/// use serde_json::json;
///
/// let a = StablePrefix::new("You are terse.")
///     .with_tool(ToolSpec::new("b", "B", json!({"type": "object"}))).unwrap()
///     .with_tool(ToolSpec::new("a", "A", json!({"type": "object"}))).unwrap();
/// let b = StablePrefix::new("You are terse.")
///     .with_tool(ToolSpec::new("a", "A", json!({"type": "object"}))).unwrap()
///     .with_tool(ToolSpec::new("b", "B", json!({"type": "object"}))).unwrap();
/// assert_eq!(a.fingerprint(), b.fingerprint());
/// assert_ne!(a.fingerprint(), StablePrefix::new("You are verbose.").fingerprint());
/// ```
#[derive(Clone, Default)]
pub struct StablePrefix {
    /// The parts, shared by clones (an agent's forks and sub-agents, every session of a
    /// [`Halo`](crate::Halo) factory) and copied on the first change of one of them.
    parts: Arc<Parts>,
    /// The canonical bytes and their fingerprint, computed once per change: every mutator
    /// empties it. A clone shares it.
    canonical: OnceLock<Arc<Canonical>>,
}

/// What a prefix is made of.
#[derive(Clone, Default, PartialEq)]
struct Parts {
    system: String,
    tools: Vec<ToolSpec>,
    few_shot: Vec<Message>,
    skills: Vec<SkillMeta>,
    /// The volatile zone (the date after a marker), rendered after the catalog at the very
    /// end of the system text; empty for none.
    volatile: String,
}

#[derive(Debug)]
struct Canonical {
    bytes: Vec<u8>,
    fingerprint: Fingerprint,
}

impl PartialEq for StablePrefix {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.parts, &other.parts) || self.parts == other.parts
    }
}

impl fmt::Debug for StablePrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = &self.parts;
        f.debug_struct("StablePrefix")
            .field("system", &p.system)
            .field("tools", &p.tools)
            .field("few_shot", &p.few_shot)
            .field("skills", &p.skills)
            .field("volatile", &p.volatile)
            .finish()
    }
}

impl StablePrefix {
    /// A prefix with this system prompt and nothing else.
    pub fn new(system: impl Into<String>) -> Self {
        StablePrefix {
            parts: Arc::new(Parts {
                system: system.into(),
                ..Parts::default()
            }),
            canonical: OnceLock::new(),
        }
    }

    /// The parts, to change: the canonical bytes are emptied, and parts shared with clones
    /// are copied first.
    fn parts_mut(&mut self) -> &mut Parts {
        self.canonical = OnceLock::new();
        Arc::make_mut(&mut self.parts)
    }

    /// The system prompt as given (without the skill catalog).
    pub fn system(&self) -> &str {
        &self.parts.system
    }

    /// The system text sent to the model: the system prompt followed, when there are
    /// skills, by the `<available_skills>` catalog (agentskills.io integration guide,
    /// "Disclosure"), then by the volatile zone when one is set
    /// ([`set_volatile`](Self::set_volatile); see [`crate::zones`]).
    pub fn system_text(&self) -> String {
        let p = &self.parts;
        let mut out = p.system.clone();
        let mut push = |part: &str| {
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(part);
        };
        if !p.skills.is_empty() {
            push(&skill_catalog(&p.skills));
        }
        if !p.volatile.is_empty() {
            push(&p.volatile);
        }
        out
    }

    /// The volatile zone: the text rendered at the very end of the system text (the date,
    /// to the day, after [`crate::zones::VOLATILE_MARKER`]); empty for none.
    pub fn volatile(&self) -> &str {
        &self.parts.volatile
    }

    /// Replaces the volatile zone. A different text changes the prefix: one cache miss.
    pub fn set_volatile(&mut self, text: impl Into<String>) {
        self.parts_mut().volatile = text.into();
    }

    /// Replaces the whole skill catalog (kept sorted by name; a later duplicate name
    /// replaces an earlier one).
    pub fn set_skills(&mut self, skills: impl IntoIterator<Item = SkillMeta>) {
        self.parts_mut().skills.clear();
        for s in skills {
            self.add_skill(s);
        }
    }

    /// The tool specs, sorted by name.
    pub fn tools(&self) -> &[ToolSpec] {
        &self.parts.tools
    }

    /// The few-shot example turns, in order.
    pub fn few_shot(&self) -> &[Message] {
        &self.parts.few_shot
    }

    /// The skill catalog, sorted by name.
    pub fn skills(&self) -> &[SkillMeta] {
        &self.parts.skills
    }

    /// Replaces the system prompt.
    pub fn set_system(&mut self, system: impl Into<String>) {
        self.parts_mut().system = system.into();
    }

    /// Adds a tool, keeping tools sorted by name.
    ///
    /// # Errors
    /// [`PrefixError`] for a duplicate or invalid name, or a schema that is not an object schema.
    pub fn add_tool(&mut self, spec: ToolSpec) -> Result<(), PrefixError> {
        validate_tool(&spec)?;
        match self
            .parts
            .tools
            .binary_search_by(|t| t.name.cmp(&spec.name))
        {
            Ok(_) => Err(PrefixError::DuplicateTool(spec.name)),
            Err(at) => {
                self.parts_mut().tools.insert(at, spec);
                Ok(())
            }
        }
    }

    /// Whether [`add_tool`](Self::add_tool) would accept `spec`, without adding it.
    ///
    /// # Errors
    /// As [`add_tool`](Self::add_tool).
    pub fn check_tool(&self, spec: &ToolSpec) -> Result<(), PrefixError> {
        validate_tool(spec)?;
        match self
            .parts
            .tools
            .binary_search_by(|t| t.name.cmp(&spec.name))
        {
            Ok(_) => Err(PrefixError::DuplicateTool(spec.name.clone())),
            Err(_) => Ok(()),
        }
    }

    /// Removes a tool by name; returns whether it was there.
    pub fn remove_tool(&mut self, name: &str) -> bool {
        if !self.parts.tools.iter().any(|t| t.name == name) {
            return false;
        }
        self.parts_mut().tools.retain(|t| t.name != name);
        true
    }

    /// Builder form of [`add_tool`](Self::add_tool).
    ///
    /// # Errors
    /// As [`add_tool`](Self::add_tool).
    pub fn with_tool(mut self, spec: ToolSpec) -> Result<Self, PrefixError> {
        self.add_tool(spec)?;
        Ok(self)
    }

    /// Appends a few-shot example turn.
    pub fn push_few_shot(&mut self, message: Message) {
        self.parts_mut().few_shot.push(message);
    }

    /// Builder form of [`push_few_shot`](Self::push_few_shot).
    pub fn with_few_shot(mut self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.parts_mut().few_shot.extend(messages);
        self
    }

    /// Adds or replaces (by name) a skill in the catalog, keeping it sorted by name.
    pub fn add_skill(&mut self, skill: SkillMeta) {
        let skills = &mut self.parts_mut().skills;
        match skills.binary_search_by(|s| s.name.cmp(&skill.name)) {
            Ok(at) => skills[at] = skill,
            Err(at) => skills.insert(at, skill),
        }
    }

    /// The canonical serialization: a JSON document with sorted keys and no whitespace,
    /// holding a format version, the system text, the tools, the few-shot turns and the
    /// skills. Equal prefixes give equal bytes on every run and machine.
    ///
    /// Computed once per change of the prefix (with the fingerprint), then borrowed.
    pub fn canonical_bytes(&self) -> &[u8] {
        &self.canonical().bytes
    }

    /// SHA-256 of [`canonical_bytes`](Self::canonical_bytes), computed once per change.
    pub fn fingerprint(&self) -> Fingerprint {
        self.canonical().fingerprint
    }

    fn canonical(&self) -> &Canonical {
        self.canonical.get_or_init(|| {
            let p = &self.parts;
            let mut doc = serde_json::json!({
                "format": 1,
                "system": p.system,
                "tools": p.tools,
                "few_shot": p.few_shot,
                "skills": p.skills,
            });
            // Only when set, so the bytes of a prefix without zones are unchanged.
            if !p.volatile.is_empty() {
                doc["volatile"] = Value::String(p.volatile.clone());
            }
            let mut bytes = Vec::with_capacity(256);
            write_canonical(&canonicalize(doc), &mut bytes);
            let digest = Sha256::digest(&bytes);
            let mut fingerprint = [0u8; 32];
            fingerprint.copy_from_slice(&digest);
            Arc::new(Canonical {
                bytes,
                fingerprint: Fingerprint(fingerprint),
            })
        })
    }
}

/// The SHA-256 fingerprint of a [`StablePrefix`]'s canonical bytes. Displays as 16 hex
/// digits (the first 8 bytes); `{:#}` shows all 64.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// All 64 hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.to_hex();
        if f.alternate() {
            f.write_str(&hex)
        } else {
            f.write_str(&hex[..16])
        }
    }
}

/// Serialized as its 64 hex digits.
impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(d)?;
        Fingerprint::from_hex(&hex).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "`{hex}` is not a prefix fingerprint (64 hex digits)"
            ))
        })
    }
}

impl Fingerprint {
    /// Parses 64 hex digits ([`to_hex`](Self::to_hex)'s form).
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 64 || !hex.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Fingerprint(out))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

fn validate_tool(spec: &ToolSpec) -> Result<(), PrefixError> {
    let n = &spec.name;
    let ok = !n.is_empty()
        && n.len() <= 64
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !ok {
        return Err(PrefixError::InvalidToolName(n.clone()));
    }
    match &spec.parameters {
        Value::Object(m) if m.get("type") == Some(&Value::String("object".into())) => Ok(()),
        _ => Err(PrefixError::InvalidSchema(n.clone())),
    }
}

/// Returns `value` with every object's keys in sorted order, whatever map type
/// `serde_json` was built with (its `preserve_order` feature keeps insertion order).
pub fn canonicalize(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut out = Map::new();
            for (k, v) in entries {
                out.insert(k, canonicalize(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(canonicalize).collect()),
        other => other,
    }
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    // `canonicalize` already ordered the keys; serde_json writes maps in their iteration order.
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(out, value);
}

/// The `<available_skills>` catalog with its one-line instruction (agentskills.io client
/// guide, "Disclosure"): name, description and location of each skill, XML-escaped, the
/// description's line endings normalized as a file's are ([`crate::zones::normalize_text`]).
fn skill_catalog(skills: &[SkillMeta]) -> String {
    let mut out = String::from(
        "The following skills provide specialized instructions for specific tasks. \
         When a task matches a skill's description, load the skill before acting.\n\n<available_skills>\n",
    );
    for s in skills {
        out.push_str("<skill>\n<name>");
        out.push_str(&xml_escape(&s.name));
        out.push_str("</name>\n<description>");
        out.push_str(&xml_escape(&crate::zones::normalize_text(&s.description)));
        out.push_str("</description>\n");
        if let Some(loc) = &s.location {
            out.push_str("<location>");
            out.push_str(&xml_escape(loc));
            out.push_str("</location>\n");
        }
        out.push_str("</skill>\n");
    }
    out.push_str("</available_skills>");
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec::new(
            name,
            "d",
            json!({"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}),
        )
    }

    #[test]
    fn canonical_bytes_sort_keys_and_tools() {
        let p = StablePrefix::new("s")
            .with_tool(spec("b"))
            .unwrap()
            .with_tool(spec("a"))
            .unwrap();
        let s = String::from_utf8(p.canonical_bytes().to_vec()).unwrap();
        assert!(s.find("\"name\":\"a\"").unwrap() < s.find("\"name\":\"b\"").unwrap());
        assert!(s.find("\"a\":{\"type\":\"integer\"}").unwrap() < s.find("\"z\":{").unwrap());
        assert!(!s.contains(' '), "no whitespace in canonical bytes: {s}");
    }

    #[test]
    fn every_part_changes_the_fingerprint() {
        let base = StablePrefix::new("s").with_tool(spec("a")).unwrap();
        let fp = base.fingerprint();
        let mut p = base.clone();
        p.set_system("t");
        assert_ne!(p.fingerprint(), fp);
        let p = base.clone().with_tool(spec("b")).unwrap();
        assert_ne!(p.fingerprint(), fp);
        let p = base.clone().with_few_shot([Message::user("hi")]);
        assert_ne!(p.fingerprint(), fp);
        let mut p = base.clone();
        p.add_skill(SkillMeta {
            name: "pdf".into(),
            description: "PDFs".into(),
            location: None,
        });
        assert_ne!(p.fingerprint(), fp);
        assert!(p.system_text().contains("<name>pdf</name>"));
        assert_eq!(base.clone().fingerprint(), fp);
    }

    #[test]
    fn duplicate_and_invalid_tools_are_refused() {
        let p = StablePrefix::new("s").with_tool(spec("a")).unwrap();
        assert_eq!(
            p.clone().with_tool(spec("a")).unwrap_err(),
            PrefixError::DuplicateTool("a".into())
        );
        assert!(matches!(
            p.clone().with_tool(spec("has space")),
            Err(PrefixError::InvalidToolName(_))
        ));
        let bad = ToolSpec::new("x", "d", json!({"type": "string"}));
        assert!(matches!(
            p.with_tool(bad),
            Err(PrefixError::InvalidSchema(_))
        ));
    }

    #[test]
    fn fingerprint_displays_short_and_long_hex() {
        let fp = StablePrefix::new("s").fingerprint();
        assert_eq!(format!("{fp}").len(), 16);
        assert_eq!(format!("{fp:#}").len(), 64);
    }
}

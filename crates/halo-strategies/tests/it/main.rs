//! halo-strategies' integration tests: the repair tables, loop detection, the strategies
//! inside a `HaloAgent` on the scripted model, and property tests.

mod agent;
mod arguments;
mod loops;
mod names;
mod props;

/// A file of `tests/data`, parsed.
fn data(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

//! Reading the input.

/// Parses a comma-separated list of integers, skipping what is not a number.
pub fn parse_list(s: &str) -> Vec<i64> {
    s.split(',').filter_map(|p| p.trim().parse().ok()).collect()
}

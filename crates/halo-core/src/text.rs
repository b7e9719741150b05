//! Cutting long text for the model: the head and the tail kept, the middle replaced by a line
//! that says how much was cut and why, on UTF-8 character boundaries.

/// The tool output limit an agent applies unless told otherwise: 64 KiB (65,536 bytes) per
/// tool result, about 16,000 tokens of English. Above the sandbox tools' own 32 KiB limit, so
/// their results pass unchanged; a tool that answers megabytes is cut here before its result
/// enters the history. Set per agent and per tool with
/// [`HaloAgentBuilder::tool_output_limit`](crate::HaloAgentBuilder::tool_output_limit) and
/// [`tool_output_limit_for`](crate::HaloAgentBuilder::tool_output_limit_for).
pub const DEFAULT_TOOL_OUTPUT_LIMIT: usize = 64 * 1024;

/// The smallest limit a cut works with, in bytes: room for the note and a little text on
/// both sides of it. Smaller limits are raised to it.
pub const MIN_CUT_BYTES: usize = 256;

/// `text` cut to at most `max_bytes` bytes (at least [`MIN_CUT_BYTES`]) when it is longer:
/// about the first half and the last half of the budget are kept, cut on character
/// boundaries, with a line `[... N bytes omitted: WHY ...]` between them. `None` when `text`
/// fits.
///
/// ```
/// use halo_core::text::cut_middle;
/// let cut = cut_middle(&"ab".repeat(1000), 300, "the tool output limit is 300 bytes").unwrap();
/// assert!(cut.len() <= 300);
/// assert!(cut.starts_with("abab") && cut.ends_with("abab"));
/// assert!(cut.contains("bytes omitted: the tool output limit is 300 bytes ...]"));
/// assert_eq!(cut_middle("short", 300, "why"), None);
/// ```
pub fn cut_middle(text: &str, max_bytes: usize, why: &str) -> Option<String> {
    let max_bytes = max_bytes.max(MIN_CUT_BYTES);
    if text.len() <= max_bytes {
        return None;
    }
    // The note's length depends on the count it carries: reserve room for the largest count.
    let note_len = format!("\n[... {} bytes omitted: {why} ...]\n", text.len()).len();
    let budget = max_bytes.saturating_sub(note_len);
    let head_end = floor_char_boundary(text, budget / 2);
    let tail_start = ceil_char_boundary(text, text.len() - (budget - budget / 2));
    let tail_start = tail_start.max(head_end);
    let omitted = tail_start - head_end;
    Some(format!(
        "{}\n[... {omitted} bytes omitted: {why} ...]\n{}",
        &text[..head_end],
        &text[tail_start..]
    ))
}

/// The largest character boundary at or before `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary at or after `at`.
fn ceil_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_multibyte_character_at_either_cut_is_kept_whole_or_dropped_whole() {
        let text = "é".repeat(500);
        let cut = cut_middle(&text, 300, "why").unwrap();
        assert!(cut.len() <= 300);
        let (head, rest) = cut.split_once('\n').unwrap();
        assert!(head.chars().all(|c| c == 'é'));
        assert!(rest.rsplit_once('\n').unwrap().1.chars().all(|c| c == 'é'));
    }

    proptest! {
        #[test]
        fn a_cut_is_within_the_limit_and_says_what_it_dropped(
            text in "\\PC{0,3000}",
            max in 0usize..2000,
        ) {
            match cut_middle(&text, max, "limit") {
                None => prop_assert!(text.len() <= max.max(MIN_CUT_BYTES)),
                Some(cut) => {
                    prop_assert!(cut.len() <= max.max(MIN_CUT_BYTES));
                    let note = cut.split('\n').find(|l| l.starts_with("[... ")).unwrap();
                    let omitted: usize = note[5..].split(' ').next().unwrap().parse().unwrap();
                    let kept = cut.len() - note.len() - 2;
                    prop_assert_eq!(kept + omitted, text.len());
                }
            }
        }
    }
}

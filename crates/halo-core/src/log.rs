//! The message log: the append-only, bounded history that follows the stable prefix.
//!
//! [`MessageLog`] is a ring buffer with a capacity counted in messages. When a push takes it
//! over capacity, the oldest *units* go: a unit is a user or system message on its own, or
//! an assistant message together with the tool results that answer its calls. So the log
//! never holds a tool call without its results, or a result without its call. The newest
//! unit is never evicted, even if it alone is larger than the capacity.

use std::collections::VecDeque;

use crate::message::Message;

/// Default capacity of a [`MessageLog`], in messages.
pub const DEFAULT_LOG_CAPACITY: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    message: Message,
    discardable: bool,
}

/// The bounded history of a conversation. See the [module docs](self).
///
/// ```
/// use halo_core::{Message, MessageLog};
///
/// let mut log = MessageLog::with_capacity(2);
/// log.push(Message::user("one"));
/// log.push(Message::assistant("two"));
/// log.push(Message::user("three"));
/// let texts: Vec<String> = log.messages().map(|m| m.text()).collect();
/// assert_eq!(texts, ["two", "three"]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MessageLog {
    entries: VecDeque<Entry>,
    capacity: usize,
    evicted: u64,
}

impl Default for MessageLog {
    fn default() -> Self {
        MessageLog::with_capacity(DEFAULT_LOG_CAPACITY)
    }
}

impl MessageLog {
    /// An empty log holding at most `capacity` messages (at least 1).
    pub fn with_capacity(capacity: usize) -> Self {
        MessageLog {
            entries: VecDeque::new(),
            capacity: capacity.max(1),
            evicted: 0,
        }
    }

    /// The capacity, in messages.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The number of messages held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many messages were evicted over capacity since the log was made.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = &Message> + '_ {
        self.entries.iter().map(|e| &e.message)
    }

    /// The messages, oldest first, as a vector (what an adapter receives as history).
    pub fn to_vec(&self) -> Vec<Message> {
        self.messages().cloned().collect()
    }

    /// Whether the message at `index` was pushed as discardable.
    pub fn is_discardable(&self, index: usize) -> bool {
        self.entries.get(index).is_some_and(|e| e.discardable)
    }

    /// Appends a message, then evicts the oldest units while over capacity.
    pub fn push(&mut self, message: Message) {
        self.push_entry(message, false);
    }

    /// Appends a message that a context strategy may drop first (a loaded skill body, say).
    pub fn push_discardable(&mut self, message: Message) {
        self.push_entry(message, true);
    }

    /// Appends an assistant message and the tool results answering its calls as one step,
    /// so no eviction can fall between them.
    pub fn push_step(&mut self, assistant: Message, results: impl IntoIterator<Item = Message>) {
        self.entries.push_back(Entry {
            message: assistant,
            discardable: false,
        });
        for r in results {
            self.entries.push_back(Entry {
                message: r,
                discardable: false,
            });
        }
        self.evict();
    }

    /// Empties the log. The stable prefix lives elsewhere and is untouched.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Removes the messages for which `keep` returns false, then drops any tool result
    /// left without its call and any assistant call left without all its results.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &Message, bool) -> bool) {
        let mut i = 0;
        self.entries.retain(|e| {
            let k = keep(i, &e.message, e.discardable);
            i += 1;
            k
        });
        self.repair_pairs();
    }

    fn push_entry(&mut self, message: Message, discardable: bool) {
        self.entries.push_back(Entry {
            message,
            discardable,
        });
        self.evict();
    }

    /// Length of the unit starting at `start`: the message, plus the tool results that
    /// follow an assistant message with calls.
    fn unit_len(&self, start: usize) -> usize {
        let calls = self.entries[start].message.tool_calls();
        if calls.is_empty() {
            return 1;
        }
        let mut n = 1;
        while let Some(Entry {
            message: Message::Tool(r),
            ..
        }) = self.entries.get(start + n)
        {
            if !calls.iter().any(|c| c.id == r.tool_call_id) {
                break;
            }
            n += 1;
        }
        n
    }

    fn evict(&mut self) {
        while self.entries.len() > self.capacity {
            let n = self.unit_len(0);
            if n >= self.entries.len() {
                break; // the newest unit stays whole
            }
            for _ in 0..n {
                self.entries.pop_front();
            }
            self.evicted += n as u64;
        }
    }

    fn repair_pairs(&mut self) {
        use std::collections::HashSet;
        let answered: HashSet<String> = self
            .entries
            .iter()
            .filter_map(|e| match &e.message {
                Message::Tool(r) => Some(r.tool_call_id.clone()),
                _ => None,
            })
            .collect();
        let complete_calls: HashSet<String> = self
            .entries
            .iter()
            .filter(|e| {
                e.message
                    .tool_calls()
                    .iter()
                    .all(|c| answered.contains(&c.id))
            })
            .flat_map(|e| e.message.tool_calls().iter().map(|c| c.id.clone()))
            .collect();
        self.entries.retain(|e| match &e.message {
            Message::Tool(r) => complete_calls.contains(&r.tool_call_id),
            m => m.tool_calls().iter().all(|c| answered.contains(&c.id)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{AssistantMessage, ToolCall, ToolResult};

    fn call_step(ids: &[&str]) -> (Message, Vec<Message>) {
        let calls: Vec<ToolCall> = ids.iter().map(|id| ToolCall::new(*id, "t", "{}")).collect();
        let results = calls
            .iter()
            .map(|c| Message::Tool(ToolResult::ok(c, "r")))
            .collect();
        (
            Message::Assistant(AssistantMessage {
                tool_calls: calls,
                ..Default::default()
            }),
            results,
        )
    }

    fn assert_paired(log: &MessageLog) {
        let msgs = log.to_vec();
        for (i, m) in msgs.iter().enumerate() {
            if let Message::Tool(r) = m {
                assert!(
                    msgs[..i]
                        .iter()
                        .any(|p| p.tool_calls().iter().any(|c| c.id == r.tool_call_id)),
                    "orphan result {}",
                    r.tool_call_id
                );
            }
            for c in m.tool_calls() {
                let n = msgs
                    .iter()
                    .filter(|p| matches!(p, Message::Tool(r) if r.tool_call_id == c.id))
                    .count();
                assert_eq!(n, 1, "call {} has {n} results", c.id);
            }
        }
    }

    #[test]
    fn eviction_never_splits_a_call_from_its_results() {
        let mut log = MessageLog::with_capacity(4);
        log.push(Message::user("go"));
        let (a, r) = call_step(&["c1", "c2"]);
        log.push_step(a, r);
        assert_eq!(log.len(), 4);
        let (a, r) = call_step(&["c3"]);
        log.push_step(a, r);
        // The user message and then the whole c1/c2 unit had to go.
        assert_eq!(log.len(), 2);
        assert_eq!(log.evicted(), 4);
        assert_paired(&log);
        assert_eq!(log.to_vec()[0].tool_calls()[0].id, "c3");
    }

    #[test]
    fn the_newest_unit_stays_whole_even_over_capacity() {
        let mut log = MessageLog::with_capacity(2);
        log.push(Message::user("go"));
        let (a, r) = call_step(&["c1", "c2", "c3"]);
        log.push_step(a, r);
        assert_eq!(log.len(), 4);
        assert_paired(&log);
    }

    #[test]
    fn clear_empties_and_retain_repairs_pairs() {
        let mut log = MessageLog::with_capacity(10);
        log.push(Message::user("go"));
        let (a, r) = call_step(&["c1", "c2"]);
        log.push_step(a, r);
        log.push_discardable(Message::user("skill body"));
        assert!(log.is_discardable(4));
        // Dropping one result drops the call and the other result too.
        log.retain(|i, _, _| i != 2);
        assert_eq!(log.len(), 2);
        assert_paired(&log);
        log.clear();
        assert!(log.is_empty());
    }
}

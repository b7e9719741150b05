//! The message log: the append-only, bounded history that follows the stable prefix.
//!
//! [`MessageLog`] is a ring buffer with a capacity counted in messages. When a push takes it
//! over capacity, the oldest *units* go: a unit is a user or system message on its own, or
//! an assistant message together with the tool results that answer its calls. So the log
//! never holds a tool call without its results, or a result without its call. The newest
//! unit is never evicted, even if it alone is larger than the capacity.
//!
//! A log also knows where its messages come from ([`HistoryKey`]): an identity unique in
//! the process (a clone or a deserialized log gets a new one, a clone remembers where it
//! forked), the generation counter that edits bump, and the eviction count. With it an
//! adapter can tell that a request's history extends an earlier request's without
//! comparing messages, and write only the new ones.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::ledger::LogKey;
use crate::message::{Message, SmolStr};

/// Default capacity of a [`MessageLog`], in messages.
pub const DEFAULT_LOG_CAPACITY: usize = 1024;

/// What the log knows of a message besides its content.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Meta {
    /// A context strategy may drop it first (a loaded skill body, say).
    #[serde(default, skip_serializing_if = "is_false")]
    discardable: bool,
    /// A user message queued from outside the run (steering) and injected at a step boundary.
    #[serde(default, skip_serializing_if = "is_false")]
    injected: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The next [`Lineage::id`]: identities are never reused within a process.
static NEXT_LOG_ID: AtomicU64 = AtomicU64::new(1);

/// Which log this is, in this process: a fresh identity for every log made, cloned or
/// deserialized, and for a clone the point it forked from. Not content: two logs with the
/// same messages are equal whatever their lineage.
#[derive(Debug)]
struct Lineage {
    id: u64,
    fork: Option<Fork>,
}

impl Default for Lineage {
    fn default() -> Self {
        Lineage {
            id: NEXT_LOG_ID.fetch_add(1, Ordering::Relaxed),
            fork: None,
        }
    }
}

/// Where a cloned log came from: the original's identity, generation, eviction count and
/// length at the moment of the clone. While neither log is edited or evicts, the first
/// `len` messages of both are those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fork {
    log: u64,
    at: LogKey,
    len: usize,
}

/// Where a request's history comes from: a [`MessageLog`]'s identity in this process, its
/// [`LogKey`] (generation and eviction count) and, for a cloned log, the point it forked
/// from. The run engine makes one for the history it lends out as the log stands
/// ([`Driver::request`](crate::driver::Driver::request) sets it); a repaired (copied) history
/// has none.
///
/// With the key of an earlier request, [`shared_prefix`](Self::shared_prefix) says how many
/// leading messages the two histories are known to share, without comparing them: the log
/// only appends while its generation and eviction count stay, and identities are never
/// reused. An adapter that kept the serialized bytes of the earlier request's messages
/// writes only the rest (the OpenAI-compatible adapter does). A key vouches for the history
/// slice it was made for and no other ([`ModelRequest::history_key`](crate::ModelRequest::history_key)
/// checks the slice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryKey {
    log: u64,
    at: LogKey,
    fork: Option<Fork>,
    /// The address and length of the history slice the key was made for.
    addr: usize,
    len: usize,
}

impl HistoryKey {
    /// The messages of the history the key was made for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether that history is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the key was made for `history` (the same slice, not an equal one).
    pub fn is_for(&self, history: &[Message]) -> bool {
        self.addr == history.as_ptr() as usize && self.len == history.len()
    }

    /// How many leading messages this key's history shares with `earlier`'s, known from
    /// where both come from (0 when nothing is known): all of `earlier`'s when this one is
    /// the same log since grown at the end; the messages up to the fork when one log is a
    /// clone of the other, or both are clones of one log, and none was edited or evicted
    /// since. An edit (generation) or an eviction in either log since shares nothing.
    pub fn shared_prefix(&self, earlier: &HistoryKey) -> usize {
        let shared = if self.log == earlier.log {
            (self.at == earlier.at).then_some(earlier.len)
        } else {
            // A fork point both logs still stand on (unedited, nothing evicted since).
            let on = |key: &HistoryKey, fork: &Fork| key.at == fork.at;
            match (self.fork, earlier.fork) {
                (Some(f), _) if f.log == earlier.log && on(self, &f) && on(earlier, &f) => {
                    Some(f.len)
                }
                (_, Some(f)) if f.log == self.log && on(self, &f) && on(earlier, &f) => Some(f.len),
                (Some(a), Some(b)) if a == b && on(self, &a) && on(earlier, &b) => Some(a.len),
                _ => None,
            }
        };
        shared.map_or(0, |n| n.min(self.len).min(earlier.len))
    }
}

/// The bounded history of a conversation. See the [module docs](self).
///
/// Serializes with serde (messages, their marks, the capacity and the eviction count), so a
/// run's history can be saved and restored. Equality compares those; a log's identity in
/// the process ([`HistoryKey`]) is not compared, and a clone or a deserialized log has an
/// identity of its own.
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
#[derive(Debug, Serialize, Deserialize)]
pub struct MessageLog {
    messages: VecDeque<Message>,
    meta: VecDeque<Meta>,
    capacity: usize,
    evicted: u64,
    /// Bumped by every change other than an append or an eviction (clear, retain, edits), so
    /// the cache ledger knows when digests of earlier messages can be reused.
    #[serde(default)]
    generation: u64,
    #[serde(skip)]
    lineage: Lineage,
}

/// `items` cloned into a deque with the same room (`VecDeque::clone` keeps only the length).
fn clone_with_room<T: Clone>(items: &VecDeque<T>) -> VecDeque<T> {
    let mut clone = VecDeque::with_capacity(items.capacity());
    clone.extend(items.iter().cloned());
    clone
}

impl Clone for MessageLog {
    /// The same messages, marks, capacity, eviction count and generation, under a new
    /// identity that remembers this log as where it forked. The clone has the room its
    /// origin had grown to, so its first append does not move every message (a cloned run
    /// state goes on growing, as its origin did).
    fn clone(&self) -> Self {
        MessageLog {
            messages: clone_with_room(&self.messages),
            meta: clone_with_room(&self.meta),
            capacity: self.capacity,
            evicted: self.evicted,
            generation: self.generation,
            lineage: Lineage {
                fork: Some(Fork {
                    log: self.lineage.id,
                    at: LogKey::of(self),
                    len: self.messages.len(),
                }),
                ..Lineage::default()
            },
        }
    }
}

impl PartialEq for MessageLog {
    fn eq(&self, other: &Self) -> bool {
        self.messages == other.messages
            && self.meta == other.meta
            && self.capacity == other.capacity
            && self.evicted == other.evicted
            && self.generation == other.generation
    }
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
            messages: VecDeque::new(),
            meta: VecDeque::new(),
            capacity: capacity.max(1),
            evicted: 0,
            generation: 0,
            lineage: Lineage::default(),
        }
    }

    /// The capacity, in messages.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The number of messages held.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// How many messages were evicted over capacity since the log was made.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }

    /// A counter bumped by every change other than an append or an eviction: while it stays
    /// the same, the message at position `i` is the one that was at `i + k` before `k`
    /// more messages were evicted.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The key of `history`, which must be this log's messages as [`contiguous`](Self::contiguous)
    /// lends them (else `None`): where they come from, for an adapter that reuses what it
    /// serialized of an earlier request ([`HistoryKey`]).
    pub fn history_key(&self, history: &[Message]) -> Option<HistoryKey> {
        let slice = self.contiguous()?;
        let same = slice.as_ptr() == history.as_ptr() && slice.len() == history.len();
        same.then(|| HistoryKey {
            log: self.lineage.id,
            at: LogKey::of(self),
            fork: self.lineage.fork,
            addr: history.as_ptr() as usize,
            len: history.len(),
        })
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> impl ExactSizeIterator<Item = &Message> + '_ {
        self.messages.iter()
    }

    /// The messages, oldest first, as one slice (what an adapter receives as history),
    /// without copying them.
    pub fn as_slice(&mut self) -> &[Message] {
        self.meta.make_contiguous();
        self.messages.make_contiguous()
    }

    /// The messages as a slice when they are already contiguous in memory (always after
    /// [`as_slice`](Self::as_slice) and before the next push that wraps around).
    pub fn contiguous(&self) -> Option<&[Message]> {
        let (a, b) = self.messages.as_slices();
        b.is_empty().then_some(a)
    }

    /// The messages, oldest first, as a vector.
    pub fn to_vec(&self) -> Vec<Message> {
        self.messages().cloned().collect()
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.messages.back()
    }

    /// Whether the message at `index` was pushed as discardable.
    pub fn is_discardable(&self, index: usize) -> bool {
        self.meta.get(index).is_some_and(|m| m.discardable)
    }

    /// Whether the message at `index` was injected by steering (see
    /// [`SteeringHandle`](crate::SteeringHandle)).
    pub fn is_injected(&self, index: usize) -> bool {
        self.meta.get(index).is_some_and(|m| m.injected)
    }

    /// Appends a message, then evicts the oldest units while over capacity.
    pub fn push(&mut self, message: Message) {
        self.push_meta(message, Meta::default());
    }

    /// Appends a message that a context strategy may drop first (a loaded skill body, say).
    pub fn push_discardable(&mut self, message: Message) {
        self.push_meta(
            message,
            Meta {
                discardable: true,
                ..Meta::default()
            },
        );
    }

    /// Appends a user message marked as injected from outside the run (steering).
    pub fn push_injected(&mut self, message: Message) {
        self.push_meta(
            message,
            Meta {
                injected: true,
                ..Meta::default()
            },
        );
    }

    /// Appends an assistant message and the tool results answering its calls as one step,
    /// so no eviction can fall between them. A result with
    /// [`ToolResult::discardable`](crate::ToolResult::discardable) set is marked
    /// discardable.
    pub fn push_step(&mut self, assistant: Message, results: impl IntoIterator<Item = Message>) {
        self.messages.push_back(assistant);
        self.meta.push_back(Meta::default());
        for r in results {
            let discardable = matches!(&r, Message::Tool(t) if t.discardable);
            self.messages.push_back(r);
            self.meta.push_back(Meta {
                discardable,
                ..Meta::default()
            });
        }
        self.evict();
    }

    /// Removes and returns the last message (the run engine takes back a turn whose calls
    /// have no results, to run them).
    pub(crate) fn pop_last(&mut self) -> Option<Message> {
        self.meta.pop_back();
        let m = self.messages.pop_back();
        self.generation += 1;
        m
    }

    /// Empties the log. The stable prefix lives elsewhere and is untouched.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.meta.clear();
        self.generation += 1;
    }

    /// Removes the messages for which `keep` returns false, then drops any tool result
    /// left without its call and any assistant call left without all its results.
    pub fn retain(&mut self, mut keep: impl FnMut(usize, &Message, bool) -> bool) {
        let keeps: Vec<bool> = self
            .messages
            .iter()
            .zip(&self.meta)
            .enumerate()
            .map(|(i, (m, meta))| keep(i, m, meta.discardable))
            .collect();
        self.keep_where(&keeps);
        self.repair_pairs();
        self.generation += 1;
    }

    /// Replaces the message at `index` with `message`, keeping its marks; returns whether
    /// `index` was in the log. The caller keeps the pairing: a tool result replaced by a
    /// result of the same call, an assistant turn by one with the same call ids.
    pub fn replace(&mut self, index: usize, message: Message) -> bool {
        let Some(slot) = self.messages.get_mut(index) else {
            return false;
        };
        *slot = message;
        self.generation += 1;
        true
    }

    /// Inserts `message` before the message at `index` (at the end when `index` is the
    /// length or more), unmarked. The caller keeps the pairing (a summary is a user or an
    /// assistant message without calls, inserted between units).
    pub fn insert(&mut self, index: usize, message: Message) {
        let index = index.min(self.messages.len());
        self.messages.insert(index, message);
        self.meta.insert(index, Meta::default());
        self.generation += 1;
    }

    /// The indices of the messages marked injected.
    pub fn injected_indices(&self) -> Vec<usize> {
        (0..self.meta.len())
            .filter(|&i| self.meta[i].injected)
            .collect()
    }

    /// The indices of the messages marked discardable.
    pub fn discardable_indices(&self) -> Vec<usize> {
        (0..self.meta.len())
            .filter(|&i| self.meta[i].discardable)
            .collect()
    }

    /// Replaces the whole history with `messages`, marking those at `injected` and
    /// `discardable` (a history rewritten by a context strategy, restored from the journal).
    pub fn reset_to(&mut self, messages: Vec<Message>, injected: &[usize], discardable: &[usize]) {
        self.meta = (0..messages.len())
            .map(|i| Meta {
                injected: injected.contains(&i),
                discardable: discardable.contains(&i),
            })
            .collect();
        self.messages = messages.into();
        self.generation += 1;
    }

    fn keep_where(&mut self, keeps: &[bool]) {
        let mut i = 0;
        self.messages.retain(|_| {
            i += 1;
            keeps[i - 1]
        });
        let mut i = 0;
        self.meta.retain(|_| {
            i += 1;
            keeps[i - 1]
        });
    }

    /// Room for `more` messages beyond the length (at most up to the capacity), made at
    /// once: a run makes it at its first step, so its history is not copied as the deques
    /// double at 4, 8, 16 and 32 messages.
    pub(crate) fn reserve(&mut self, more: usize) {
        let room = more.min((self.capacity + 1).saturating_sub(self.messages.len()));
        self.messages.reserve(room);
        self.meta.reserve(room);
    }

    /// Gives back the room [`reserve`](Self::reserve) made that a run did not use, when it
    /// is more than the length again: an idle session holds no more than doubling would
    /// have left it.
    pub(crate) fn trim(&mut self) {
        if self.messages.capacity() > 2 * self.messages.len().max(4) {
            self.messages.shrink_to_fit();
            self.meta.shrink_to_fit();
        }
    }

    fn push_meta(&mut self, message: Message, meta: Meta) {
        self.messages.push_back(message);
        self.meta.push_back(meta);
        self.evict();
    }

    /// Length of the unit starting at `start`: the message, plus the tool results that
    /// follow an assistant message with calls.
    fn unit_len(&self, start: usize) -> usize {
        let calls = self.messages[start].tool_calls();
        if calls.is_empty() {
            return 1;
        }
        let mut n = 1;
        while let Some(Message::Tool(r)) = self.messages.get(start + n) {
            if !calls.iter().any(|c| c.id == r.tool_call_id) {
                break;
            }
            n += 1;
        }
        n
    }

    fn evict(&mut self) {
        while self.messages.len() > self.capacity {
            let n = self.unit_len(0);
            if n >= self.messages.len() {
                break; // the newest unit stays whole
            }
            self.messages.drain(..n);
            self.meta.drain(..n);
            self.evicted += n as u64;
        }
    }

    fn repair_pairs(&mut self) {
        use std::collections::HashSet;
        let answered: HashSet<SmolStr> = self
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool(r) => Some(r.tool_call_id.clone()),
                _ => None,
            })
            .collect();
        let complete_calls: HashSet<SmolStr> = self
            .messages
            .iter()
            .filter(|m| m.tool_calls().iter().all(|c| answered.contains(&c.id)))
            .flat_map(|m| m.tool_calls().iter().map(|c| c.id.clone()))
            .collect();
        let keeps: Vec<bool> = self
            .messages
            .iter()
            .map(|m| match m {
                Message::Tool(r) => complete_calls.contains(&r.tool_call_id),
                m => m.tool_calls().iter().all(|c| answered.contains(&c.id)),
            })
            .collect();
        self.keep_where(&keeps);
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

    #[test]
    fn the_log_round_trips_through_serde_with_its_marks() {
        let mut log = MessageLog::with_capacity(3);
        log.push(Message::user("a"));
        log.push_discardable(Message::user("skill"));
        log.push_injected(Message::user("also this"));
        log.push(Message::assistant("ok"));
        let json = serde_json::to_string(&log).unwrap();
        let back: MessageLog = serde_json::from_str(&json).unwrap();
        assert_eq!(back, log);
        assert_eq!(back.evicted(), 1);
        assert!(back.is_discardable(0) && back.is_injected(1) && !back.is_injected(2));
    }

    #[test]
    fn as_slice_borrows_every_message_in_order() {
        let mut log = MessageLog::with_capacity(3);
        for i in 0..7 {
            log.push(Message::user(i.to_string()));
        }
        let texts: Vec<String> = log.as_slice().iter().map(Message::text).collect();
        assert_eq!(texts, ["4", "5", "6"]);
        assert!(log.contiguous().is_some());
        let g = log.generation();
        log.push(Message::user("7"));
        assert_eq!(
            log.generation(),
            g,
            "appends and evictions keep the generation"
        );
        log.retain(|_, _, _| true);
        assert_ne!(log.generation(), g);
    }

    /// The key of the log's messages as an adapter would get them.
    fn key(log: &mut MessageLog) -> HistoryKey {
        log.as_slice();
        let history = log.contiguous().unwrap();
        log.history_key(history).unwrap()
    }

    #[test]
    fn a_history_key_shares_what_the_log_kept_and_nothing_after_an_edit_or_eviction() {
        let mut log = MessageLog::with_capacity(4);
        log.push(Message::user("a"));
        let first = key(&mut log);
        log.push(Message::assistant("b"));
        let grown = key(&mut log);
        assert_eq!(grown.shared_prefix(&first), 1);
        assert_eq!(first.shared_prefix(&grown), 1);
        assert_eq!(grown.shared_prefix(&grown), 2);
        log.retain(|_, _, _| true);
        let edited = key(&mut log);
        assert_eq!(edited.shared_prefix(&grown), 0, "an edit shares nothing");
        for i in 0..4 {
            log.push(Message::user(i.to_string()));
        }
        assert!(log.evicted() > 0);
        assert_eq!(
            key(&mut log).shared_prefix(&edited),
            0,
            "nor does an eviction"
        );
        // Another log with the same messages shares nothing: identities are never reused.
        let mut other = MessageLog::with_capacity(4);
        other.push(Message::user("a"));
        assert_eq!(key(&mut other).shared_prefix(&first), 0);
    }

    #[test]
    fn clones_share_the_messages_up_to_the_fork_until_either_is_edited() {
        let mut parent = MessageLog::with_capacity(100);
        parent.push(Message::user("a"));
        parent.push(Message::assistant("b"));
        let before = key(&mut parent);
        let mut left = parent.clone();
        let mut right = parent.clone();
        assert_eq!(left, parent, "a clone is equal, its identity aside");
        parent.push(Message::user("parent"));
        left.push(Message::user("left"));
        right.push(Message::user("right"));
        let (p, l, r) = (key(&mut parent), key(&mut left), key(&mut right));
        assert_eq!(l.shared_prefix(&r), 2, "siblings share the fork");
        assert_eq!(r.shared_prefix(&l), 2);
        assert_eq!(
            l.shared_prefix(&p),
            2,
            "a clone shares the fork with its origin"
        );
        assert_eq!(p.shared_prefix(&l), 2);
        assert_eq!(l.shared_prefix(&before), 2);
        right.retain(|_, _, _| true);
        assert_eq!(
            key(&mut right).shared_prefix(&l),
            0,
            "an edited clone shares nothing"
        );
        parent.clear();
        assert_eq!(l.shared_prefix(&key(&mut parent)), 0);
        // A grandchild knows only its own fork.
        let mut grandchild = left.clone();
        assert_eq!(key(&mut grandchild).shared_prefix(&p), 0);
        assert_eq!(key(&mut grandchild).shared_prefix(&l), 3);
        // A log read back from serde is a log of its own.
        let mut back: MessageLog =
            serde_json::from_str(&serde_json::to_string(&left).unwrap()).unwrap();
        assert_eq!(back, left);
        assert_eq!(key(&mut back).shared_prefix(&l), 0);
    }

    #[test]
    fn a_history_key_is_made_only_for_the_log_s_own_slice() {
        let mut log = MessageLog::with_capacity(4);
        log.push(Message::user("a"));
        let copy = log.to_vec();
        assert!(log.history_key(&copy).is_none());
        let k = key(&mut log);
        assert!(k.is_for(log.contiguous().unwrap()));
        assert!(!k.is_for(&copy));
        assert_eq!(k.len(), 1);
    }

    #[test]
    fn a_clone_keeps_the_room_its_origin_grew_to() {
        // Trigger: every run of `bench loop` starts from a clone of a 2,000-message state,
        // whose first append moved the whole log into a new buffer.
        let mut log = MessageLog::with_capacity(10_000);
        for i in 0..1000 {
            log.push(Message::user(i.to_string()));
        }
        let clone = log.clone();
        assert!(clone.messages.capacity() >= log.messages.capacity());
        assert!(clone.meta.capacity() >= log.meta.capacity());
        assert_eq!(clone, log);
    }

    #[test]
    fn a_run_s_room_is_made_once_and_what_it_did_not_use_is_given_back() {
        let mut log = MessageLog::with_capacity(100);
        log.push(Message::user("q"));
        log.reserve(41);
        let (messages, meta) = (log.messages.capacity(), log.meta.capacity());
        assert!(messages >= 42 && meta >= 42, "{messages} {meta}");
        for i in 0..41 {
            log.push(Message::user(i.to_string()));
        }
        assert_eq!(
            log.messages.capacity(),
            messages,
            "no copy while the run's messages came"
        );
        // A log about as full as its room keeps it.
        log.trim();
        assert_eq!(log.messages.capacity(), messages);
        // Never past the log's capacity (plus the one message an append holds before eviction).
        log.reserve(1_000);
        assert!(log.messages.capacity() < 1_000);

        // A one-step run: the room it did not use is given back.
        let mut short = MessageLog::with_capacity(100);
        short.push(Message::user("q"));
        short.reserve(41);
        short.push(Message::user("a"));
        short.trim();
        assert!(
            short.messages.capacity() < 8,
            "{}",
            short.messages.capacity()
        );
        assert!(short.meta.capacity() < 8);
        assert_eq!(short.len(), 2);
    }
}

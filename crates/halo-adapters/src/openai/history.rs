//! What the adapter keeps of its last bodies, so a request whose history extends an earlier
//! one writes only its new messages.
//!
//! A chat-completions body carries the whole history every time, and writing it (JSON
//! string escaping, mostly) costs about 0.8 ns per byte: at 2,000 messages, over 200 µs a
//! step. But the engine says where a history comes from ([`HistoryKey`]), so the adapter
//! knows which leading messages an earlier request already carried without comparing them
//! ([`HistoryKey::shared_prefix`]). It keeps the last bodies it wrote — the head (`model`,
//! the prefix's messages), the history's messages, the tail — with where each message
//! ends; the next body of that history takes the kept buffer back (the request that sent it
//! is over, so nothing else holds it and no byte is copied), cuts it after the messages it
//! shares, and appends the new messages and its own tail. The bytes are those a rewrite
//! would give (`tests/it/openai/history.rs` checks every body against a rewrite).
//!
//! One adapter serves many agents (`Arc`, clones share this): up to [`KEPT_HISTORIES`]
//! histories are kept, the least recently written dropped first, each taken out while a
//! body is written from it, so two requests never write into one buffer. A body is reused
//! only for a history whose key shares its first messages, and only with the same prefix
//! (fingerprint) and the same trimmed-history note, so the head is the same bytes too; any
//! other request writes its body anew, as before.

use std::sync::{Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use halo_core::{Fingerprint, HistoryKey};

/// How many histories one adapter keeps the last body of (about one body's bytes each, plus
/// room to grow).
pub(crate) const KEPT_HISTORIES: usize = 4;

/// The last body of one history.
#[derive(Debug)]
pub(crate) struct Kept {
    /// The history's key.
    pub(crate) key: HistoryKey,
    /// The model the head names (the portable reasoning setting can change it).
    pub(crate) model: String,
    /// The prefix the head was written for.
    pub(crate) fingerprint: Fingerprint,
    /// Whether the head ends with the trimmed-history note.
    pub(crate) note: bool,
    /// The body as sent.
    pub(crate) body: Bytes,
    /// Where each history message ends in `body`, one per message of the key's history.
    pub(crate) ends: Vec<usize>,
}

/// A body to continue: the head and the first `from` history messages are in `out`, and
/// `ends` holds where those messages end. `model` is the kept body's (the model asked for),
/// handed back so keeping the new body needs no copy of it.
#[derive(Debug)]
pub(crate) struct Start {
    pub(crate) out: BytesMut,
    pub(crate) ends: Vec<usize>,
    pub(crate) from: usize,
    pub(crate) model: String,
}

/// The kept bodies, least recently written first. Shared by an adapter's clones.
#[derive(Debug, Default)]
pub(crate) struct Histories {
    kept: Mutex<Vec<Kept>>,
}

impl Histories {
    /// Takes the kept body that shares the most leading messages with `key`'s history under
    /// the same prefix and note, cut after those messages; `None` when none shares any.
    pub(crate) fn take(
        &self,
        key: &HistoryKey,
        fingerprint: Fingerprint,
        note: bool,
        model: &str,
    ) -> Option<Start> {
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        let (i, shared) = kept
            .iter()
            .enumerate()
            .filter(|(_, k)| k.fingerprint == fingerprint && k.note == note && k.model == model)
            .map(|(i, k)| (i, key.shared_prefix(&k.key).min(k.ends.len())))
            .filter(|&(_, shared)| shared > 0)
            .max_by_key(|&(_, shared)| shared)?;
        let Kept {
            body,
            mut ends,
            model,
            ..
        } = kept.remove(i);
        drop(kept);
        let cut = ends[shared - 1];
        ends.truncate(shared);
        let out = match body.try_into_mut() {
            // The request that sent it is over: the buffer is ours again, nothing is copied.
            Ok(mut out) => {
                out.truncate(cut);
                out
            }
            // Still held (a stream not yet dropped): copy the shared part once.
            Err(body) => {
                let mut out = BytesMut::with_capacity(body.len() + body.len() / 8 + 4096);
                out.extend_from_slice(&body[..cut]);
                out
            }
        };
        Some(Start {
            out,
            ends,
            from: shared,
            model,
        })
    }

    /// Keeps `body`, dropping the kept bodies it supersedes (whose every message it shares)
    /// and, beyond [`KEPT_HISTORIES`], the least recently written.
    pub(crate) fn keep(&self, body: Kept) {
        if body.ends.is_empty() {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.retain(|k| {
            k.fingerprint != body.fingerprint || body.key.shared_prefix(&k.key) < k.ends.len()
        });
        if kept.len() >= KEPT_HISTORIES {
            kept.remove(0);
        }
        kept.push(body);
    }
}

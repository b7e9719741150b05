//! # halo-stream
//!
//! Turns a Halo agent's event stream into the Vercel AI SDK UI Message Stream protocol, for
//! `useChat` front ends.
//!
//! **Status: empty.** This crate has no API yet; streaming is a later issue. It exists so the
//! workspace layout is final and the dependency rules are checked from the start.

//! The embedded llama.cpp model (work in progress).

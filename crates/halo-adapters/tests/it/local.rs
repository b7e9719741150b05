//! The embedded llama.cpp model.

//! Integration tests of halo-sandbox.

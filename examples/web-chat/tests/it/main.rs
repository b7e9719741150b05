//! web-chat's black-box tests: the binary as users run it.

mod shared;

//! The seccomp filter of commands in the OS sandbox: bubblewrap loads it (`--seccomp FD`)
//! last, just before it runs the command.
//!
//! It answers `ENOSYS` ("no such call in this kernel", which programs already handle) to:
//!
//! - the kernel keyring calls `add_key`, `request_key` and `keyctl`: keyrings are not
//!   namespaced, so a command run as root would share root's keys with the machine both
//!   ways, reading a key the machine stored and planting one that outlives it (the session
//!   keyring it inherits, `/proc/keys` and key ids); Docker's default profile refuses them
//!   for the same reason;
//! - a new user namespace: `unshare` and `clone` with `CLONE_NEWUSER`, and every `clone3`,
//!   whose flags lie in memory a filter cannot read (the C library falls back to `clone` on
//!   `ENOSYS`). bubblewrap's `--disable-userns` does the same where it exists (0.8.0 and
//!   later); the filter is what holds with an older one.
//!
//! The program is compiled once per process by `seccompiler` for the machine's architecture;
//! where it cannot be (an architecture `seccompiler` does not know), commands run without it
//! and `docs/sandbox.md` says what is then not refused.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// The filter as bubblewrap reads it: the BPF instructions (8 bytes each, native byte order,
/// `struct sock_filter`); `None` where it cannot be compiled here.
pub(crate) fn program() -> Option<&'static [u8]> {
    static PROGRAM: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    PROGRAM
        .get_or_init(|| match compile() {
            Ok(bytes) => Some(bytes),
            Err(e) => {
                tracing::warn!(error = %e, "no seccomp filter for commands on this machine");
                None
            }
        })
        .as_deref()
}

fn compile() -> Result<Vec<u8>, Box<dyn std::error::Error>> {
    let new_user = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        let flag = libc::CLONE_NEWUSER as u64;
        Ok(vec![SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?])
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in [
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_keyctl,
        libc::SYS_clone3,
    ] {
        rules.insert(nr, Vec::new());
    }
    rules.insert(libc::SYS_unshare, new_user()?);
    rules.insert(libc::SYS_clone, new_user()?);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        std::env::consts::ARCH.try_into()?,
    )?;
    let program: BpfProgram = filter.try_into()?;
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for op in &program {
        bytes.extend_from_slice(&op.code.to_ne_bytes());
        bytes.push(op.jt);
        bytes.push(op.jf);
        bytes.extend_from_slice(&op.k.to_ne_bytes());
    }
    Ok(bytes)
}

/// A pipe holding the program, its write end closed: the read end for bubblewrap's
/// `--seccomp FD`. It is close-on-exec; the child clears that on its copy before it runs
/// bubblewrap (so no other child of this process inherits it).
///
/// # Errors
/// The pipe cannot be made or written.
pub(crate) fn pipe(program: &[u8]) -> std::io::Result<std::io::PipeReader> {
    let (reader, mut writer) = std::io::pipe()?;
    // A few hundred bytes: far below a pipe's capacity, so this never blocks.
    writer.write_all(program)?;
    drop(writer);
    Ok(reader)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_on_this_machine() {
        let program = program().expect("a filter for this architecture");
        assert_eq!(program.len() % 8, 0);
        assert!(program.len() >= 8 * 10, "{} bytes", program.len());
    }
}

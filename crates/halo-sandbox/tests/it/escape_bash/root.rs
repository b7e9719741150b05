//! The escape suite's attempts to gain what root has, made from a command (CI and containers
//! run as root): a user namespace of its own (whose capabilities would let it mount the
//! cgroup filesystem, and write the machine's cgroup files, which root owns), the cgroup
//! filesystem mounted directly, and root's kernel keyrings, which are not namespaced: a key
//! the machine stored read from inside, a key planted inside seen outside after.
//!
//! Each attempt is harmless when it works (the unconfined run shows the suite can fail):
//! the cgroup files are opened for writing, never written; mounts land on the suite's own
//! `visible` folder, which the suite unmounts; planted keys are removed.

use std::process::Command;

use super::{MARKER, OK, PY_LIBC, PY_OK, Suite, Watch, installed, py};

/// `unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP)`: a user namespace of the
/// command's own, with every capability in it, and mount and cgroup namespaces it owns.
const PY_USERNS_CGROUP: &str = "call(\"unshare\", 0x10000000 | 0x20000 | 0x02000000)\n";

/// The key the machine stores before the attempts, its payload the secret marker; removed
/// when dropped.
pub(super) struct HostKey {
    pub(super) name: String,
}

impl HostKey {
    /// Adds the key to root's user keyring (`@u`), which every process of root shares when
    /// it has no user namespace of its own; `None` without `keyctl`.
    pub(super) fn add(name: String) -> Option<Self> {
        if !installed("keyctl") {
            return None;
        }
        let out = Command::new("keyctl")
            .args(["add", "user", &name, MARKER, "@u"])
            .output()
            .expect("keyctl add");
        assert!(out.status.success(), "keyctl add: {out:?}");
        Some(HostKey { name })
    }
}

impl Drop for HostKey {
    fn drop(&mut self) {
        purge(&self.name);
    }
}

/// Removes the keys named `name` from this process's keyrings.
pub(super) fn purge(name: &str) {
    let _ = Command::new("keyctl")
        .args(["purge", "user", name])
        .output();
}

/// Whether a key named `name` is on the machine: in any keyring this process may view.
pub(super) fn key_on_host(name: &str) -> bool {
    std::fs::read_to_string("/proc/keys").is_ok_and(|keys| keys.contains(name))
}

/// Runs every attempt to gain what root has.
pub(super) async fn attempts(s: &mut Suite, python: bool) {
    let vis = s.visible.display().to_string();
    s.attempt(
        "userns: make a user namespace of its own (unshare -U)",
        &format!("unshare -U true && {OK}"),
        Watch::Nothing,
    )
    .await;
    s.attempt(
        "userns: make one mapped to root (unshare -Ur)",
        &format!("unshare -Ur true && {OK}"),
        Watch::Nothing,
    )
    .await;
    s.attempt(
        "cgroup: mount the cgroup filesystem",
        &format!("mount -t cgroup2 none {vis} && {OK}"),
        Watch::Nothing,
    )
    .await;
    if python {
        s.attempt(
            "cgroup: mount it in a user namespace of its own and open the machine's files to write",
            &py(&format!(
                "{PY_LIBC}{PY_USERNS_CGROUP}call(\"mount\", b\"none\", b\"{vis}\", b\"cgroup2\", 0, None)\n\
                 f = open(\"{vis}/cgroup.subtree_control\", \"w\")\n{PY_OK}"
            )),
            Watch::Nothing,
        )
        .await;
    } else {
        s.skip("cgroup: in a user namespace of its own", "no python3");
    }

    let name = format!("{}-key", s.outsider_prefix);
    let Some(host_key) = HostKey::add(name) else {
        s.skip(
            "keyring: the machine's keys",
            "keyctl (keyutils) is not installed",
        );
        return;
    };
    let key = host_key.name.clone();
    // The marker, the key's payload, in the result is the escape.
    let reads = [
        (
            "keyring: read the machine's key from the user keyring",
            format!("keyctl print %user:{key}"),
        ),
        (
            "keyring: find the machine's key through the session keyring",
            format!("keyctl pipe $(keyctl search @s user {key})"),
        ),
        (
            "keyring: read the machine's key by its id from /proc/keys",
            format!(
                "for id in $(grep {key} /proc/keys | cut -d' ' -f1); do \
                 keyctl pipe $((16#$id)); done"
            ),
        ),
    ];
    for (name, command) in &reads {
        s.attempt(name, command, Watch::Nothing).await;
    }
    s.attempt(
        "keyring: the machine's key names show in /proc/keys",
        &format!("grep -q {key} /proc/keys && {OK}"),
        Watch::Nothing,
    )
    .await;
    for keyring in ["@u", "@s"] {
        let planted = format!("{}-planted-{}", s.outsider_prefix, &keyring[1..]);
        s.attempt(
            &format!("keyring: plant a key in {keyring} that outlives the command"),
            &format!("keyctl add user {planted} pwned {keyring}"),
            Watch::Key(&planted),
        )
        .await;
        purge(&planted);
    }
    drop(host_key);
}

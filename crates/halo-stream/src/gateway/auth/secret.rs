//! Secrets: scrypt password hashes (the RustCrypto `scrypt` crate, PHC strings), random
//! tokens, their SHA-256 digests, and the machine token's file.

use std::io::Write as _;
use std::path::Path;
use std::sync::OnceLock;

use scrypt::password_hash::{PasswordHasher as _, PasswordVerifier as _};
use scrypt::phc::PasswordHash;
use scrypt::{Params, Scrypt};
use sha2::{Digest as _, Sha256};

use crate::gateway::GatewayError;

/// The scrypt PHC string (`$scrypt$ln=17,r=8,p=1$SALT$HASH`) of `password` with cost
/// `log_n` (`N = 2^log_n`; r = 8, p = 1: 128 × 2^log_n bytes of memory) and a random salt.
pub(crate) fn hash_password(password: &str, log_n: u8) -> Result<String, GatewayError> {
    let params = Params::new(log_n, Params::RECOMMENDED_R, Params::RECOMMENDED_P)
        .map_err(|e| GatewayError::Invalid(format!("scrypt cost {log_n}: {e}")))?;
    Scrypt::new_with_params(params)
        .hash_password(password.as_bytes())
        .map(|hash| hash.to_string())
        .map_err(|e| GatewayError::Busy(format!("cannot hash the password: {e}")))
}

/// Whether `password` matches the PHC string `hash` (its own parameters apply).
pub(crate) fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|hash| {
        Scrypt::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// A hash of a password no one knows, checked for unknown users so that a wrong name
/// takes as long as a wrong password.
pub(crate) fn dummy_hash(log_n: u8) -> &'static str {
    static DUMMY: OnceLock<String> = OnceLock::new();
    DUMMY.get_or_init(|| hash_password(&new_token(), log_n).unwrap_or_default())
}

/// 32 random bytes from the operating system, as 64 lowercase hex digits.
pub(crate) fn new_token() -> String {
    let mut bytes = [0u8; 32];
    // Without the OS's randomness no token can be safe: stop rather than make a weak one.
    getrandom::fill(&mut bytes).expect("the operating system gives no random bytes");
    hex(&bytes)
}

/// The SHA-256 of `token`, as 64 lowercase hex digits: what the store keeps of a token.
pub(crate) fn digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Writes `token` and a newline to `path`, readable and writable by its owner only (mode
/// 0600 on Unix; its folder is made with mode 0700 when missing). An existing file is
/// replaced.
pub(crate) fn write_token_file(path: &Path, token: &str) -> Result<(), GatewayError> {
    let io = |e: std::io::Error| GatewayError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(dir).map_err(io)?;
    }
    // A new file, so no one keeps a handle opened on an older, wider one.
    let _ = std::fs::remove_file(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(io)?;
    file.write_all(format!("{token}\n").as_bytes())
        .map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_verifies_its_password_only_and_holds_no_clear_text() {
        let hash = hash_password("correct horse", 4).unwrap();
        assert!(hash.starts_with("$scrypt$ln=4,r=8,p=1$"), "{hash}");
        assert!(!hash.contains("correct horse"));
        assert!(verify_password("correct horse", &hash));
        assert!(!verify_password("correct hors", &hash));
        assert!(!verify_password("correct horse", "not a phc string"));
    }

    #[test]
    fn tokens_are_random_hex_and_digests_are_sha_256() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(
            digest("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}

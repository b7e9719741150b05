//! The bearer token the streamable HTTP transport requires (RFC 6750 §2.1, the
//! `Authorization: Bearer <token>` header; MCP 2025-11-25 `basic/authorization`, "Access
//! Token Usage"): [`BearerToken`], generated from the OS's random source, read from a file or
//! given; compared in constant time. A request without it, or with another, is answered
//! `401 Unauthorized` with a `WWW-Authenticate: Bearer` challenge and a JSON-RPC error body.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use http::{HeaderValue, StatusCode, header};
use subtle::ConstantTimeEq as _;

/// The fewest characters a token given by the user may have.
pub const MIN_TOKEN_LEN: usize = 16;

/// A secret every HTTP request must carry as `Authorization: Bearer <token>`.
///
/// Its characters are RFC 6750's `b64token` set (`A-Z a-z 0-9 - . _ ~ + /`, then `=`
/// padding), at least [`MIN_TOKEN_LEN`] of them. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Arc<str>);

/// Why a token could not be made or kept.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// The token is shorter than [`MIN_TOKEN_LEN`] (an empty file too).
    #[error("the token has {0} characters; use at least {MIN_TOKEN_LEN} (a generated one has 64)")]
    TooShort(usize),
    /// The token has a character a bearer token cannot carry.
    #[error(
        "the token has a character a bearer token cannot carry ({0:?}); use letters, digits and - . _ ~ + /"
    )]
    InvalidChar(char),
    /// Reading or writing the token file failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The IO error.
        error: std::io::Error,
    },
    /// The OS gave no random bytes.
    #[error("the OS's random source failed: {0}")]
    Random(String),
}

impl std::fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BearerToken(<redacted>)")
    }
}

impl BearerToken {
    /// A new token: 32 bytes from the OS's random source (`getrandom`), as 64 lowercase hex
    /// characters (256 bits).
    ///
    /// # Errors
    /// [`TokenError::Random`] when the OS has no random source.
    pub fn generate() -> Result<BearerToken, TokenError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(BearerToken(hex.into()))
    }

    /// The token `secret`, checked.
    ///
    /// # Errors
    /// [`TokenError::TooShort`], [`TokenError::InvalidChar`].
    pub fn new(secret: impl Into<String>) -> Result<BearerToken, TokenError> {
        let secret = secret.into();
        let body = secret.trim_end_matches('=');
        if let Some(c) = body
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-._~+/".contains(*c)))
        {
            return Err(TokenError::InvalidChar(c));
        }
        if secret.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort(secret.len()));
        }
        Ok(BearerToken(secret.into()))
    }

    /// The token in the first line of `path`, without surrounding whitespace.
    ///
    /// # Errors
    /// [`TokenError::Io`] when the file cannot be read, and those of [`new`](Self::new).
    pub fn from_file(path: &Path) -> Result<BearerToken, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|error| TokenError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        BearerToken::new(text.lines().next().unwrap_or_default().trim())
    }

    /// Writes the token and a newline to `path`, which only this user may read or write
    /// (mode 0600 from its creation on); a file already there is replaced. The folder must
    /// exist; keep it private too (`$XDG_RUNTIME_DIR` is).
    ///
    /// # Errors
    /// [`TokenError::Io`].
    pub fn write_private(&self, path: &Path) -> Result<(), TokenError> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let io = |error| TokenError::Io {
            path: path.to_path_buf(),
            error,
        };
        // A fresh file, so that no earlier file's mode or owner is kept.
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(e)),
            _ => {}
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        writeln!(file, "{}", self.0).map_err(io)?;
        file.sync_all().map_err(io)
    }

    /// The secret itself, to hand to a client.
    pub fn secret(&self) -> &str {
        &self.0
    }

    /// Whether an `Authorization` header value carries this token (scheme `Bearer`, any
    /// case); the token is compared in constant time.
    pub(crate) fn accepts(&self, authorization: &HeaderValue) -> bool {
        let value = authorization.as_bytes();
        let Some((scheme, presented)) = value
            .iter()
            .position(|b| *b == b' ')
            .map(|i| (&value[..i], value[i + 1..].trim_ascii()))
        else {
            return false;
        };
        scheme.eq_ignore_ascii_case(b"bearer") && bool::from(presented.ct_eq(self.0.as_bytes()))
    }
}

/// The axum middleware: the request goes on only with the token.
pub(crate) async fn require_token(
    State(token): State<BearerToken>,
    request: Request,
    next: Next,
) -> Response {
    let mut values = request.headers().get_all(header::AUTHORIZATION).iter();
    let verdict = match (values.next(), values.next()) {
        (None, _) => Err(None),
        (Some(value), None) if token.accepts(value) => Ok(()),
        (Some(_), _) => Err(Some(
            "the bearer token is wrong; send the server's token as `Authorization: Bearer <token>`",
        )),
    };
    match verdict {
        Ok(()) => next.run(request).await,
        Err(wrong) => unauthorized(wrong),
    }
}

/// 401 with RFC 6750's challenge (`error="invalid_token"` when a token was sent) and a
/// JSON-RPC error body, since MCP clients show the body's message.
fn unauthorized(wrong: Option<&str>) -> Response {
    let (challenge, message) = match wrong {
        Some(message) => (r#"Bearer realm="mcp", error="invalid_token""#, message),
        None => (
            r#"Bearer realm="mcp""#,
            "this MCP server needs a bearer token: send it as `Authorization: Bearer <token>` (the server says at start where its token is)",
        ),
    };
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": -32001, "message": message},
    });
    let mut response = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static(challenge),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_token_is_64_hex_characters_and_new_each_time() {
        let a = BearerToken::generate().unwrap();
        let b = BearerToken::generate().unwrap();
        assert_eq!(a.secret().len(), 64);
        assert!(a.secret().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(format!("{a:?}"), "BearerToken(<redacted>)");
    }

    #[test]
    fn given_tokens_are_checked() {
        assert!(matches!(
            BearerToken::new("short"),
            Err(TokenError::TooShort(5))
        ));
        assert!(matches!(
            BearerToken::new("a token with spaces in it"),
            Err(TokenError::InvalidChar(' '))
        ));
        assert!(BearerToken::new("abcdefghijklmnop+/==").is_ok());
    }

    #[test]
    fn only_the_bearer_scheme_with_the_same_token_is_accepted() {
        let token = BearerToken::new("0123456789abcdef").unwrap();
        let accepts = |v: &str| token.accepts(&HeaderValue::from_str(v).unwrap());
        assert!(accepts("Bearer 0123456789abcdef"));
        assert!(accepts("bearer 0123456789abcdef"));
        assert!(!accepts("Bearer 0123456789abcdeF"));
        assert!(!accepts("Bearer 0123456789abcde"));
        assert!(!accepts("Basic 0123456789abcdef"));
        assert!(!accepts("0123456789abcdef"));
        assert!(!accepts("Bearer"));
    }

    #[test]
    fn the_token_file_is_private_and_reads_back() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let token = BearerToken::generate().unwrap();
        token.write_private(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(BearerToken::from_file(&path).unwrap(), token);
        assert!(matches!(
            BearerToken::from_file(&dir.path().join("missing")),
            Err(TokenError::Io { .. })
        ));
    }
}

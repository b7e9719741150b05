//! The HTTP client of streamable HTTP servers, `https://` included: reqwest 0.13 (the one
//! rmcp's client transport is built on) with its rustls backend. A server certificate is
//! checked by `rustls-platform-verifier` against the system's roots (on Linux the certificate
//! store `rustls-native-certs` finds, which honors `SSL_CERT_FILE` and `SSL_CERT_DIR`) plus
//! the PEM files of [`ClientOptions::ca_certificates`](super::ClientOptions::ca_certificates).
//!
//! Redirects: as rmcp's own default client, only same-origin 307 and 308 (which keep the
//! method and body), at most 10; anything else comes back as the redirect response.

use std::path::{Path, PathBuf};

/// Redirects followed at most for one request.
const MAX_REDIRECTS: usize = 10;

/// Why no HTTP client could be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    /// A CA file could not be read or holds no certificate.
    #[error("the CA certificate file {}: {message}", path.display())]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// reqwest refused the setup.
    #[error("cannot set up TLS: {0}")]
    Setup(String),
}

/// The certificates of the PEM file `path`.
fn read_pem(path: &Path) -> Result<Vec<reqwest::Certificate>, TlsError> {
    let fail = |message: String| TlsError::CaFile {
        path: path.to_path_buf(),
        message,
    };
    let pem = std::fs::read(path).map_err(|e| fail(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| fail(e.to_string()))?;
    if certs.is_empty() {
        return Err(fail(
            "no `-----BEGIN CERTIFICATE-----` block in it".to_string(),
        ));
    }
    Ok(certs)
}

/// A reqwest client for the MCP server at `url`: for `https://`, trusting the system's roots
/// and those in `ca_files`; for `http://`, with no roots at all (it never speaks TLS: only
/// same-origin redirects are followed), so a machine without a certificate store still
/// reaches a plain server.
///
/// # Errors
/// [`TlsError::CaFile`] for an unreadable or empty CA file, [`TlsError::Setup`] when
/// reqwest cannot build the client (no CA certificates on the system and none given).
pub(crate) fn http_client(url: &str, ca_files: &[PathBuf]) -> Result<reqwest::Client, TlsError> {
    let builder = reqwest::Client::builder();
    let builder = if url.starts_with("https://") {
        let mut extra = Vec::new();
        for path in ca_files {
            extra.extend(read_pem(path)?);
        }
        builder.tls_certs_merge(extra)
    } else {
        builder.tls_certs_only(Vec::new())
    };
    builder
        // As rmcp's default client: no idle pooling (a pooled connection whose last body
        // was not read to the end stalls the next request by TCP's delayed ACK).
        .pool_max_idle_per_host(0)
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| TlsError::Setup(e.to_string()))
}

/// Same-origin 307 and 308 redirects only: a 301-303 would turn the POST into a GET and
/// lose the message, another origin would get the session id and the custom headers.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_body = matches!(
            attempt.status(),
            reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
        );
        let same_origin = attempt
            .previous()
            .first()
            .is_some_and(|first| first.origin() == attempt.url().origin());
        if !keeps_body || !same_origin {
            attempt.stop()
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
        } else {
            attempt.follow()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_certificates_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let url = "https://localhost:1/mcp";
        let e = http_client(url, std::slice::from_ref(&empty)).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "the CA certificate file {}: no `-----BEGIN CERTIFICATE-----` block in it",
                empty.display()
            )
        );
        let missing = dir.path().join("missing.pem");
        let e = http_client(url, std::slice::from_ref(&missing)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("the CA certificate file {}: ", missing.display()))
        );
        assert!(http_client(url, &[]).is_ok());
        // A plain server needs no CA file, a broken one included.
        assert!(http_client("http://127.0.0.1:1/mcp", std::slice::from_ref(&empty)).is_ok());
    }
}

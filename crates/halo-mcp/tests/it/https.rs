//! `https://` MCP servers: the fake served over TLS on loopback with a certificate for
//! `localhost` signed by a CA made for the test (rcgen); the client connects when the CA is
//! in `ClientOptions::ca_certificates`, and refuses the server when it is not.

use std::sync::Arc;

use halo_mcp::{ClientOptions, McpClients, McpConfig, ServerConfig};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::json;

use crate::fake::Fake;
use crate::in_process::find;

/// A CA's certificate (PEM) and a server configuration whose certificate for `localhost`
/// and `127.0.0.1` that CA signed.
fn certificates() -> (String, rustls::ServerConfig) {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "halo-mcp test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);

    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
        .unwrap();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    (ca_cert.pem(), tls)
}

fn config(url: &str) -> McpConfig {
    let mut config = McpConfig::default();
    config
        .servers
        .insert("secure".into(), ServerConfig::http(url));
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_server_connects_when_its_ca_is_trusted() {
    let (ca_pem, tls) = certificates();
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).unwrap();
    let url = Fake::new().serve_https(tls).await;
    assert!(url.starts_with("https://localhost:"), "{url}");

    let options = ClientOptions::default().with_ca_certificate(&ca_file);
    let clients = McpClients::start(&config(&url), options).await;
    assert!(clients.failures().is_empty(), "{:?}", clients.failures());
    assert_eq!(clients.servers()[0].tools, 5);
    let out = find(&clients.tools(), "mcp__secure__echo")
        .call_json(
            json!({"message": "over tls"}),
            &halo_core::ToolContext::detached(halo_core::ToolCall::new("c1", "tool", "{}")),
        )
        .await
        .unwrap();
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.starts_with("echo: over tls"), "{}", out.content);
    clients.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_server_whose_certificate_is_not_trusted_is_refused() {
    let (_, tls) = certificates();
    let url = Fake::new().serve_https(tls).await;
    let clients = McpClients::start(&config(&url), ClientOptions::default()).await;
    assert!(clients.servers().is_empty());
    let e = clients.failures()[0].to_string();
    assert!(
        e.starts_with(&format!(
            "mcp server `secure`: the MCP handshake failed: {url}: "
        )),
        "{e}"
    );
}

//! The harness loaders and the skill tools, on `VirtualSandbox` fixtures
//! and, where a real folder or commands matter, a `ContainerSandbox`.

mod experience;
mod interop;
mod memory;
mod rules;
mod skills;

use halo_core::Sandbox;
use halo_core::sandbox::SandboxPath;

pub fn p(s: &str) -> SandboxPath {
    SandboxPath::parse(s).unwrap()
}

pub async fn put(sandbox: &dyn Sandbox, path: &str, content: impl AsRef<[u8]>) {
    sandbox
        .write(&p(path), content.as_ref().to_vec())
        .await
        .unwrap();
}

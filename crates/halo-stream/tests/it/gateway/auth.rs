//! Login and who may see what: the cookie, wrong passwords, other users' chats, password
//! changes, the rate limit, the machine token, what the store keeps, and a restart.

use std::sync::Arc;
use std::time::Duration;

use halo_core::session::{MemoryStore, SessionStore};
use halo_core::testing::ScriptedModel;
use serde_json::{Value, json};

use super::harness::*;

fn model() -> Paced {
    Paced::new(
        ScriptedModel::new().text("one").text("two").text("three"),
        Duration::from_millis(1),
    )
}

async fn server(store: Arc<dyn SessionStore>) -> Server {
    let dir = temp();
    Server::start(builder(store, model(), &dir, |b| b), dir.clone()).await
}

#[tokio::test]
async fn the_session_cookie_is_http_only_and_strict_and_a_wrong_password_is_refused() {
    let dir = temp();
    let server = Server::start(builder(jsonl(&dir), model(), &dir, |b| b), dir.clone()).await;
    let anon = Client::new(&server.url);
    assert_eq!(anon.get("/api/me").await.status(), 401);
    assert_eq!(anon.get("/api/chats").await.status(), 401);
    let r = anon
        .post(
            "/api/login",
            json!({"user": "ann", "password": "wrong password"}),
        )
        .await;
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("set-cookie").is_none());
    let r = anon
        .post("/api/login", json!({"user": "ann", "password": PASSWORD}))
        .await;
    assert_eq!(r.status(), 200);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let mut ann = anon.clone();
    ann.take_cookie(&r);
    assert_eq!(
        ann.get("/api/me").await.json::<Value>().await.unwrap()["user"],
        "ann"
    );
    // A forged cookie is nobody.
    let mut forged = anon.clone();
    forged.cookie = Some(format!("halo_session={}", "0".repeat(64)));
    assert_eq!(forged.get("/api/me").await.status(), 401);
}

#[tokio::test]
async fn one_user_never_sees_or_acts_on_another_users_chat() {
    let server = server(Arc::new(MemoryStore::new())).await;
    let ann = server.login("ann").await;
    let bob = server.login("bob").await;
    let frames = Sse::new(ann.send("secret", "hello").await).all().await;
    assert_eq!(text(&frames), "one");
    assert_eq!(ann.get("/api/chats/secret").await.status(), 200);
    for path in [
        "/api/chats/secret",
        "/api/chat/secret/stream",
        "/api/chat/secret/stream?after=0",
    ] {
        assert_eq!(bob.get(path).await.status(), 404, "{path}");
    }
    let r = bob
        .post(
            "/api/chats/secret/approvals/call_1",
            json!({"approved": true}),
        )
        .await;
    assert_eq!(r.status(), 404);
    let list = bob.get("/api/chats").await.json::<Value>().await.unwrap();
    assert_eq!(list["chats"], json!([]));
    let list = ann.get("/api/chats").await.json::<Value>().await.unwrap();
    assert_eq!(list["chats"][0]["id"], "secret");
}

#[tokio::test]
async fn a_password_change_logs_out_every_other_browser_at_once() {
    let server = server(Arc::new(MemoryStore::new())).await;
    let laptop = server.login("ann").await;
    let phone = server.login("ann").await;
    let r = laptop
        .post(
            "/api/password",
            json!({"current": "not it at all", "new": "a new secret 42"}),
        )
        .await;
    assert_eq!(r.status(), 403);
    let r = laptop
        .post(
            "/api/password",
            json!({"current": PASSWORD, "new": "a new secret 42"}),
        )
        .await;
    assert_eq!(r.status(), 204);
    assert_eq!(
        phone.get("/api/me").await.status(),
        401,
        "the other browser is out"
    );
    assert_eq!(
        laptop.get("/api/me").await.status(),
        200,
        "the one that changed it stays"
    );
    let anon = Client::new(&server.url);
    let old = anon
        .post("/api/login", json!({"user": "ann", "password": PASSWORD}))
        .await;
    assert_eq!(old.status(), 401);
    let new = anon
        .post(
            "/api/login",
            json!({"user": "ann", "password": "a new secret 42"}),
        )
        .await;
    assert_eq!(new.status(), 200);
}

#[tokio::test]
async fn twenty_wrong_logins_are_slowed_down() {
    let server = server(Arc::new(MemoryStore::new())).await;
    let anon = Client::new(&server.url);
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let r = anon
            .post(
                "/api/login",
                json!({"user": "ann", "password": "guess guess"}),
            )
            .await;
        if r.status() == 429 {
            assert!(r.headers().get("retry-after").is_some());
        }
        statuses.push(r.status().as_u16());
    }
    let refused = statuses.iter().filter(|s| **s == 401).count();
    let limited = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(refused + limited, 20, "{statuses:?}");
    assert!(refused <= 6, "only a few guesses are checked: {statuses:?}");
    assert!(limited >= 14, "{statuses:?}");
    // Even the right password waits for the lock, and bob is not affected.
    let r = anon
        .post("/api/login", json!({"user": "ann", "password": PASSWORD}))
        .await;
    assert_eq!(r.status(), 429);
    let r = anon
        .post("/api/login", json!({"user": "bob", "password": PASSWORD}))
        .await;
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn the_machine_token_file_is_0600_and_its_token_works_as_bearer() {
    let server = server(Arc::new(MemoryStore::new())).await;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&server.token_file)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let dir = std::fs::metadata(server.token_file.parent().unwrap()).unwrap();
        assert_eq!(
            dir.permissions().mode() & 0o077,
            0,
            "the folder is its owner's"
        );
    }
    let token = std::fs::read_to_string(&server.token_file).unwrap();
    let mut script = Client::new(&server.url);
    script.bearer = Some(token.trim().to_owned());
    assert_eq!(
        script.get("/api/me").await.json::<Value>().await.unwrap()["user"],
        "local"
    );
    let frames = Sse::new(script.send("job", "run").await).all().await;
    assert_eq!(text(&frames), "one");
    script.bearer = Some("not the token".into());
    assert_eq!(script.get("/api/me").await.status(), 401);
}

#[tokio::test]
async fn the_store_holds_no_password_or_session_token_in_clear() {
    let dir = temp();
    let server = Server::start(builder(jsonl(&dir), model(), &dir, |b| b), dir.clone()).await;
    let ann = server.login("ann").await;
    let frames = Sse::new(ann.send("c1", "hello").await).all().await;
    assert_eq!(text(&frames), "one");
    let token = ann.cookie.clone().unwrap();
    let token = token.strip_prefix("halo_session=").unwrap();
    let machine = std::fs::read_to_string(&server.token_file).unwrap();
    let stored = std::fs::read_to_string(dir.path().join("chats.jsonl")).unwrap();
    assert!(
        stored.contains("halo.login") && stored.contains("$scrypt$"),
        "the log is there"
    );
    for secret in [PASSWORD, token, machine.trim()] {
        assert!(
            !stored.contains(secret),
            "the store holds `{secret}` in clear"
        );
    }
}

#[tokio::test]
async fn a_restarted_gateway_keeps_browsers_logged_in_and_their_chats() {
    let store = MemoryStore::new();
    let first = server(Arc::new(store.clone())).await;
    let ann = first.login("ann").await;
    let frames = Sse::new(ann.send("c1", "hello").await).all().await;
    assert_eq!(text(&frames), "one");
    drop(first);
    // A new process on the same store: memory starts empty, the store has it all.
    let second = server(Arc::new(store)).await;
    let mut again = Client::new(&second.url);
    again.cookie = ann.cookie.clone();
    assert_eq!(again.get("/api/me").await.status(), 200);
    let page = again
        .get("/api/chats/c1")
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(page["messages"].as_array().unwrap().len(), 2);
    assert_eq!(page["messages"][1]["parts"][1]["text"], "one");
}

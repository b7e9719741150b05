//! The tool set changes while sessions are open: each change is one
//! `notifications/tools/list_changed`, on a legacy session directly and on a 2026-07-28
//! session's `subscriptions/listen` stream, and the next listing shows it.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{ServerNotification, SubscriptionFilter};
use tokio::time::timeout;

use super::{Echo, Era, Note, Seen, args, call, connect, server, text};

struct Upper;

impl halo_core::Tool for Upper {
    type Args = super::TextArgs;
    fn name(&self) -> &str {
        "upper"
    }
    fn description(&self) -> &str {
        "Upper-cases the text."
    }
    async fn call(
        &self,
        a: super::TextArgs,
    ) -> Result<halo_core::ToolOutput, halo_core::ToolError> {
        Ok(a.text.to_uppercase().into())
    }
}

async fn names(client: &super::Client) -> Vec<String> {
    let tools = client.list_all_tools().await.unwrap();
    tools.iter().map(|t| t.name.to_string()).collect()
}

#[tokio::test]
async fn a_legacy_session_is_told_of_each_change_and_lists_the_new_set() {
    let note = Note::default();
    let server = server(&note);
    let (client, mut seen) = connect(server.clone(), Era::Legacy).await;
    assert_eq!(names(&client).await, ["echo", "note"]);

    server.add_tool(Arc::new(Upper)).await.unwrap();
    let got = timeout(Duration::from_secs(5), seen.recv()).await.unwrap();
    assert_eq!(got, Some(Seen::ListChanged));
    assert_eq!(names(&client).await, ["echo", "note", "upper"]);
    assert_eq!(
        text(&call(&client, "upper", args("hi")).await),
        ("HI".to_string(), false)
    );

    assert!(server.remove_tool("note").await);
    assert_eq!(
        timeout(Duration::from_secs(5), seen.recv()).await.unwrap(),
        Some(Seen::ListChanged)
    );
    assert_eq!(names(&client).await, ["echo", "upper"]);
    // Removing what is not there changes nothing and tells no one.
    assert!(!server.remove_tool("note").await);
    // A refused tool changes nothing either.
    assert!(server.add_tool(Arc::new(Echo)).await.is_err());
    server
        .set_tools([Arc::new(Echo) as Arc<dyn halo_core::DynTool>])
        .await
        .unwrap();
    assert_eq!(
        timeout(Duration::from_secs(5), seen.recv()).await.unwrap(),
        Some(Seen::ListChanged)
    );
    assert_eq!(names(&client).await, ["echo"]);
    assert!(
        seen.try_recv().is_err(),
        "exactly one notification per change"
    );
}

#[tokio::test]
async fn a_2026_07_28_session_hears_of_changes_on_its_listen_stream() {
    let note = Note::default();
    let server = server(&note);
    let (client, _seen) = connect(server.clone(), Era::Modern).await;
    let mut subscription = client
        .listen(SubscriptionFilter::builder().tools_list_changed().build())
        .await
        .unwrap();
    assert_eq!(names(&client).await, ["echo", "note"]);

    server.add_tool(Arc::new(Upper)).await.unwrap();
    let notification = timeout(Duration::from_secs(5), subscription.next())
        .await
        .expect("a notification within 5 s")
        .unwrap();
    assert!(
        matches!(
            notification,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{notification:?}"
    );
    assert_eq!(names(&client).await, ["echo", "note", "upper"]);
}

//! The routes: login and the caller behind each request, the chat endpoints the AI SDK's
//! client calls, the endpoints for approvals and steering. Errors are JSON
//! `{"error": "..."}` with a status that says who must act.

use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::json;

use super::auth::LoginError;
use super::events::{Stored, TurnState};
use super::follow::follow;
use super::runs::Start;
use super::ui::{self, ChatRequest};
use super::{GatewayError, Names, SESSION_COOKIE, STEER, Shared, now_ms};
use crate::{DONE_FRAME, UI_MESSAGE_STREAM_HEADERS, UiMessageChunk};

type App = State<Arc<Shared>>;

pub(crate) fn router(shared: Arc<Shared>) -> axum::Router {
    axum::Router::new()
        .route("/api/login", post(login))
        .route("/api/logout", post(logout))
        .route("/api/password", post(password))
        .route("/api/me", get(me))
        .route("/api/chats", get(chats))
        .route("/api/chats/{id}", get(chat_messages))
        .route("/api/chats/{id}/steer", post(steer))
        .route("/api/chats/{id}/approvals/{call}", post(approve))
        .route("/api/chat", post(chat))
        .route("/api/chat/{id}/stream", get(resume))
        .with_state(shared)
}

/// An error as the client reads it.
pub(crate) struct Failure(StatusCode, String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<GatewayError> for Failure {
    fn from(e: GatewayError) -> Self {
        let status = match &e {
            GatewayError::Invalid(_) => StatusCode::BAD_REQUEST,
            GatewayError::NotFound(_) => StatusCode::NOT_FOUND,
            GatewayError::Busy(_) => StatusCode::CONFLICT,
            GatewayError::Halo(halo_core::HaloError::UnknownToolCall { .. })
            | GatewayError::Halo(halo_core::HaloError::NotAwaitingApproval { .. })
            | GatewayError::Halo(halo_core::HaloError::DuplicateToolResult { .. }) => {
                StatusCode::CONFLICT
            }
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if status == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!("gateway: {e}");
        }
        Failure(status, e.to_string())
    }
}

fn not_found() -> Failure {
    Failure(StatusCode::NOT_FOUND, "no such chat".into())
}

/// Who is calling: a browser session's user (and its digest) or the machine token's user.
pub(crate) struct Caller {
    user: String,
    session: Option<String>,
}

fn cookie_token(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(cookie::Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == SESSION_COOKIE)
        .map(|c| c.value().to_owned())
}

impl FromRequestParts<Arc<Shared>> for Caller {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, shared: &Arc<Shared>) -> Result<Self, Failure> {
        let unauthorized = || Failure(StatusCode::UNAUTHORIZED, "log in first".into());
        if let Some(value) = parts.headers.get(header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(|v| v.strip_prefix("Bearer "))
                .ok_or_else(unauthorized)?;
            let user = shared.auth.machine(token.trim()).ok_or_else(unauthorized)?;
            return Ok(Caller {
                user: user.to_owned(),
                session: None,
            });
        }
        let token = cookie_token(&parts.headers).ok_or_else(unauthorized)?;
        let (user, digest) = shared
            .auth
            .session_user(&token)
            .await
            .map_err(Failure::from)?
            .ok_or_else(unauthorized)?;
        Ok(Caller {
            user,
            session: Some(digest),
        })
    }
}

fn session_cookie(shared: &Shared, token: &str, max_age_s: i64) -> HeaderValue {
    let cookie = cookie::Cookie::build((SESSION_COOKIE, token.to_owned()))
        .http_only(true)
        .same_site(cookie::SameSite::Strict)
        .path("/")
        .secure(shared.options.cookie_secure)
        .max_age(cookie::time::Duration::seconds(max_age_s))
        .build();
    HeaderValue::from_str(&cookie.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[derive(Deserialize)]
struct LoginBody {
    user: String,
    password: String,
}

async fn login(State(shared): App, Json(body): Json<LoginBody>) -> Result<Response, Failure> {
    match shared.auth.login(&body.user, &body.password).await {
        Ok(token) => {
            let max_age = (super::SESSION_TTL_MS / 1000) as i64;
            let cookie = session_cookie(&shared, &token, max_age);
            Ok((
                [(header::SET_COOKIE, cookie)],
                Json(json!({ "user": body.user })),
            )
                .into_response())
        }
        Err(LoginError::Refused) => Err(Failure(
            StatusCode::UNAUTHORIZED,
            "wrong user name or password".into(),
        )),
        Err(LoginError::Limited(wait_ms)) => Ok(limited(wait_ms)),
        Err(LoginError::Store(e)) => Err(e.into()),
    }
}

fn limited(wait_ms: u64) -> Response {
    let seconds = wait_ms.div_ceil(1000).max(1);
    let mut response = Failure(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many failed logins; try again in {seconds} s"),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

async fn logout(State(shared): App, caller: Caller) -> Result<Response, Failure> {
    if let Some(digest) = &caller.session {
        shared.auth.logout(digest).await?;
    }
    let cookie = session_cookie(&shared, "", 0);
    Ok(([(header::SET_COOKIE, cookie)], StatusCode::NO_CONTENT).into_response())
}

#[derive(Deserialize)]
struct PasswordBody {
    current: String,
    new: String,
}

async fn password(
    State(shared): App,
    caller: Caller,
    Json(body): Json<PasswordBody>,
) -> Result<Response, Failure> {
    match shared
        .auth
        .check_password(&caller.user, &body.current)
        .await
    {
        Ok(true) => {}
        Ok(false) => {
            return Err(Failure(
                StatusCode::FORBIDDEN,
                "the current password is wrong".into(),
            ));
        }
        Err(LoginError::Limited(wait_ms)) => return Ok(limited(wait_ms)),
        Err(LoginError::Store(e)) => return Err(e.into()),
        Err(LoginError::Refused) => return Err(Failure(StatusCode::FORBIDDEN, "refused".into())),
    }
    shared
        .auth
        .set_password(&caller.user, &body.new, caller.session.as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn me(caller: Caller) -> Json<serde_json::Value> {
    Json(json!({ "user": caller.user }))
}

async fn chats(State(shared): App, caller: Caller) -> Result<Json<serde_json::Value>, Failure> {
    let mut list: Vec<_> = shared
        .store
        .list()
        .await
        .map_err(GatewayError::from)?
        .into_iter()
        .filter_map(|s| {
            let chat = Names::chat_of(&caller.user, &s.id)?.to_owned();
            Some((s.updated_ms, chat, s.steps))
        })
        .collect();
    list.sort_by_key(|c| std::cmp::Reverse(c.0));
    let chats: Vec<_> = list
        .into_iter()
        .map(|(updated_ms, id, steps)| json!({ "id": id, "updatedMs": updated_ms, "steps": steps }))
        .collect();
    Ok(Json(json!({ "chats": chats })))
}

/// Whether the chat's latest turn can be replayed: a run goes on, or it is paused.
fn replayable(shared: &Shared, names: &Names, stored: &Stored) -> bool {
    match shared.runs.get(&names.events) {
        Some(live) => !live.done(),
        None => matches!(
            stored.latest_turn().1,
            TurnState::Running | TurnState::Paused
        ),
    }
}

async fn chat_messages(
    State(shared): App,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, Failure> {
    let names = Names::new(&caller.user, &id)?;
    let journal = shared
        .store
        .load(&names.journal)
        .await
        .map_err(GatewayError::from)?;
    let stored = Stored::load(shared.store.as_ref(), &names.events).await?;
    if journal.is_empty() && stored.events.is_empty() {
        return Err(not_found());
    }
    let mut messages = super::history::messages_of(&journal);
    let resume = replayable(&shared, &names, &stored);
    if resume && messages.last().is_some_and(|m| m.role == "assistant") {
        // The client gets the latest turn's message from the replay.
        messages.pop();
    }
    Ok(Json(
        json!({ "id": id, "messages": messages, "resume": resume }),
    ))
}

/// The SSE response of the chat's parts after `after`, ended with `[DONE]`.
fn sse(shared: Arc<Shared>, names: Names, after: Option<u64>) -> Response {
    let frames = follow(shared, names, after)
        .map(|part| Ok::<Bytes, Infallible>(part.frame()))
        .chain(futures::stream::once(async {
            Ok(Bytes::from_static(DONE_FRAME))
        }));
    let mut headers = HeaderMap::new();
    for (name, value) in UI_MESSAGE_STREAM_HEADERS {
        headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    (headers, Body::from_stream(frames)).into_response()
}

#[derive(Deserialize)]
struct ResumeQuery {
    after: Option<u64>,
}

async fn resume(
    State(shared): App,
    caller: Caller,
    Path(id): Path<String>,
    Query(query): Query<ResumeQuery>,
    headers: HeaderMap,
) -> Result<Response, Failure> {
    let names = Names::new(&caller.user, &id)?;
    let last_event = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok());
    let stored = Stored::load(shared.store.as_ref(), &names.events).await?;
    if stored.events.is_empty()
        && shared
            .store
            .load(&names.journal)
            .await
            .map_err(GatewayError::from)?
            .is_empty()
    {
        return Err(not_found());
    }
    let after = match query.after.or(last_event) {
        Some(after) => Some(after),
        None => {
            if !replayable(&shared, &names, &stored) {
                return Ok(StatusCode::NO_CONTENT.into_response());
            }
            stored.latest_turn().0
        }
    };
    Ok(sse(shared, names, after))
}

/// Whether the request asks for a JSON answer rather than a stream (no one to ask for
/// approvals then).
fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json") && !v.contains("text/event-stream"))
}

async fn chat(
    State(shared): App,
    caller: Caller,
    headers: HeaderMap,
    Json(body): Json<ChatRequest>,
) -> Result<Response, Failure> {
    let names = Names::new(&caller.user, &body.id)?;
    let ui_channel = !wants_json(&headers);
    let text = ui::last_user_text(&body.messages);
    let seed = match &text {
        Some(_) => ui::history_of(&body.messages[..body.messages.len() - 1]),
        None => Vec::new(),
    };
    let mut prepared = shared.prepare(names.clone(), ui_channel, seed).await?;
    let (approval_ids, waiting_ids) = waiting(&prepared.agent);
    let answers = ui::answers_of(&body.messages, &approval_ids, &waiting_ids);
    let mut options = shared.options.stream.clone();
    let start = if !answers.is_empty() {
        match feed(&mut prepared.agent, &answers) {
            Ok(denied) => {
                options = options.with_denied_calls(denied);
                Start::Continue {
                    responses: responses(&answers),
                }
            }
            Err(e) => {
                let _ = shared.store.release(&prepared.lease).await;
                return Err(GatewayError::from(e).into());
            }
        }
    } else if let Some(text) = text {
        prepared.agent.discard_pending();
        Start::New { text }
    } else {
        let _ = shared.store.release(&prepared.lease).await;
        return Err(Failure(
            StatusCode::BAD_REQUEST,
            "the last message must be the user's, or answer the paused run's calls".into(),
        ));
    };
    let started = shared.spawn(prepared, start, options).await?;
    if ui_channel {
        return Ok(sse(shared, names, started.after));
    }
    let end = started
        .end
        .await
        .map_err(|_| Failure(StatusCode::INTERNAL_SERVER_ERROR, "the run was lost".into()))?;
    match end {
        Ok(result) => Ok(Json(json!({
            "id": body.id,
            "text": result.text,
            "steps": result.steps.len(),
            "pendingToolCalls": result.pending_tool_calls,
        }))
        .into_response()),
        Err(e) => Err(Failure(StatusCode::BAD_GATEWAY, e)),
    }
}

/// The calls of the paused run waiting for approval, and for the client's results.
fn waiting(agent: &halo_core::HaloAgent) -> (Vec<String>, Vec<String>) {
    let approvals: Vec<String> = agent
        .pending_approvals()
        .into_iter()
        .map(|p| p.call.id.into())
        .collect();
    let results = agent
        .run_state()
        .pending()
        .map(|step| {
            step.missing()
                .into_iter()
                .map(|c| String::from(c.id))
                .filter(|id| !approvals.contains(id))
                .collect()
        })
        .unwrap_or_default();
    (approvals, results)
}

/// Feeds the answers; returns the ids of the denied calls.
fn feed(
    agent: &mut halo_core::HaloAgent,
    answers: &ui::Answers,
) -> Result<Vec<String>, halo_core::HaloError> {
    use halo_core::Feedback;
    let mut denied = Vec::new();
    let mut driver = agent.driver();
    for (id, approved, reason) in &answers.approvals {
        let feedback = if *approved {
            Feedback::Approve {
                call_id: id.clone(),
            }
        } else {
            denied.push(id.clone());
            Feedback::Reject {
                call_id: id.clone(),
                reason: reason
                    .clone()
                    .unwrap_or_else(|| "the user denied it".into()),
            }
        };
        driver.feed(feedback, now_ms())?;
    }
    for (id, text, is_error) in &answers.results {
        let output = if *is_error {
            halo_core::ToolOutput::error(text.clone())
        } else {
            halo_core::ToolOutput::text(text.clone())
        };
        driver.feed(driver.submit(id, output), now_ms())?;
    }
    Ok(denied)
}

/// The `tool-approval-response` parts of the answers, sent first when the run goes on.
fn responses(answers: &ui::Answers) -> Vec<UiMessageChunk> {
    answers
        .approvals
        .iter()
        .map(
            |(id, approved, reason)| UiMessageChunk::ToolApprovalResponse {
                approval_id: id.clone(),
                approved: *approved,
                reason: reason.clone(),
            },
        )
        .collect()
}

#[derive(Deserialize)]
struct ApprovalBody {
    approved: bool,
    #[serde(default)]
    reason: Option<String>,
}

async fn approve(
    State(shared): App,
    caller: Caller,
    Path((id, call)): Path<(String, String)>,
    Json(body): Json<ApprovalBody>,
) -> Result<Response, Failure> {
    let names = Names::new(&caller.user, &id)?;
    let mut prepared = shared.prepare(names, true, Vec::new()).await?;
    let (approval_ids, _) = waiting(&prepared.agent);
    if !approval_ids.contains(&call) {
        let _ = shared.store.release(&prepared.lease).await;
        return Err(Failure(
            StatusCode::NOT_FOUND,
            format!("no call `{call}` of this chat waits for approval"),
        ));
    }
    let answers = ui::Answers {
        approvals: vec![(call, body.approved, body.reason)],
        results: Vec::new(),
    };
    let denied = match feed(&mut prepared.agent, &answers) {
        Ok(denied) => denied,
        Err(e) => {
            let _ = shared.store.release(&prepared.lease).await;
            return Err(GatewayError::from(e).into());
        }
    };
    let options = shared.options.stream.clone().with_denied_calls(denied);
    let start = Start::Continue {
        responses: responses(&answers),
    };
    let started = shared.spawn(prepared, start, options).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(json!({ "after": started.after })),
    )
        .into_response())
}

#[derive(Deserialize)]
struct SteerBody {
    text: String,
}

async fn steer(
    State(shared): App,
    caller: Caller,
    Path(id): Path<String>,
    Json(body): Json<SteerBody>,
) -> Result<Response, Failure> {
    let names = Names::new(&caller.user, &id)?;
    if body.text.trim().is_empty() {
        return Err(Failure(
            StatusCode::BAD_REQUEST,
            "the message is empty".into(),
        ));
    }
    if let Some(live) = shared.runs.get(&names.events) {
        if live.steer(body.text) {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        return Err(Failure(
            StatusCode::CONFLICT,
            "the run has made its last step: send the message as a new one".into(),
        ));
    }
    let stored = Stored::load(shared.store.as_ref(), &names.events).await?;
    if !shared.options.shared || stored.latest_turn().1 != TurnState::Running {
        return Err(Failure(
            StatusCode::CONFLICT,
            "no run of this chat is going on: send the message as a new one".into(),
        ));
    }
    // The run goes on in another process, which reads the chat's inbox.
    let event = halo_core::session::JournalEvent::Custom {
        kind: STEER.into(),
        data: json!({ "text": body.text }),
        at_ms: now_ms(),
    };
    for _ in 0..8 {
        let held = shared
            .store
            .load(&names.inbox)
            .await
            .map_err(GatewayError::from)?
            .len() as u64;
        let append = halo_core::session::Append::new(
            &names.inbox,
            held,
            std::slice::from_ref(&event),
            now_ms(),
        );
        match shared.store.append(append).await {
            Ok(_) => return Ok(StatusCode::ACCEPTED.into_response()),
            Err(halo_core::SessionError::Conflict { .. }) => continue,
            Err(e) => return Err(GatewayError::from(e).into()),
        }
    }
    Err(Failure(
        StatusCode::CONFLICT,
        "the chat's inbox is busy; try again".into(),
    ))
}

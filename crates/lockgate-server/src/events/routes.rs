//! The `/v1/events` handlers: a page of the log, and the SSE stream.

use super::{visible, EventOp};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::http::{ok, ApiResult, AppState, Auth, Q};
use crate::listener::{CutListener, StallCut};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Extension;
use axum::Router;
use lockgate_api::{EventList, EventView, StreamCut};
use serde::Deserialize;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::broadcast;

/// Events per catch-up page of a stream.
const PAGE: usize = 256;

/// Bytes of event text per catch-up page of a stream (at least one event): what one
/// stream holds, whatever the log holds.
const PAGE_BYTES: usize = 256 * 1024;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    /// Events with a larger sequence number than this (default 0).
    #[serde(default)]
    after: Option<u64>,
    /// Page size (default 1000).
    #[serde(default)]
    limit: Option<usize>,
}

/// The event routes' part of the OpenAPI document (list every handler of [`routes`] here).
#[derive(utoipa::OpenApi)]
#[openapi(paths(list, stream))]
pub(crate) struct ApiDoc;

/// The event routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/events", get(list))
        .route("/v1/events/stream", get(stream))
}

#[utoipa::path(get, path = "/v1/events", tag = "events", params(EventsQuery),
    responses((status = 200, description = "Events after `after`, oldest first", body = EventList)))]
async fn list(
    State(st): State<AppState>,
    Auth(p): Auth,
    Q(q): Q<EventsQuery>,
) -> ApiResult<EventList> {
    let (after, limit) = (q.after.unwrap_or(0), q.limit.unwrap_or(1000));
    let page = st
        .lp
        .ask(p, |reply| EventOp::List {
            after,
            limit,
            max_bytes: usize::MAX,
            reply,
        })
        .await?;
    ok(page.list)
}

/// The state of one SSE stream.
struct Stream {
    st: AppState,
    p: Principal,
    rx: broadcast::Receiver<Arc<EventView>>,
    /// The last event sent, or read past in the log.
    last: u64,
    /// Where the next catch-up page starts.
    cursor: u64,
    /// One catch-up page at most ([`PAGE`], [`PAGE_BYTES`]).
    backlog: VecDeque<EventView>,
    catch_up: bool,
    /// Told to end by the listener for a write stall (absent without a listener).
    cut: Option<CutListener>,
    /// The last message was sent: the next call ends the stream.
    ended: bool,
    /// Its place under the cap on open streams, given back when the stream is dropped.
    _slot: crate::longlived::Slot,
}

fn sse_event(ev: &EventView) -> SseEvent {
    SseEvent::default()
        .id(ev.seq.to_string())
        .data(serde_json::to_string(ev).expect("serializes"))
}

/// The last message of a stream that its client stopped reading.
fn cut_event(last: u64, stalled: std::time::Duration) -> SseEvent {
    let cut = StreamCut {
        reason: "write_stall".into(),
        message: format!(
            "the server ended this stream after it could not be written for {} s (the client stopped reading); resume with Last-Event-ID: {last}",
            stalled.as_secs()
        ),
        resume_after: last,
    };
    SseEvent::default()
        .event("cut")
        .data(serde_json::to_string(&cut).expect("serializes"))
}

impl Stream {
    /// The next event to send; `None` ends the stream (shutdown, the loop is gone, or
    /// after the last message of a cut).
    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if self.ended {
                return None;
            }
            if let Some(stalled) = self.cut.as_ref().and_then(CutListener::asked) {
                self.ended = true;
                return Some(cut_event(self.last, stalled));
            }
            if let Some(ev) = self.backlog.pop_front() {
                if ev.seq > self.last {
                    self.last = ev.seq;
                    return Some(sse_event(&ev));
                }
                continue;
            }
            if self.catch_up {
                let after = self.cursor;
                let page = self
                    .st
                    .lp
                    .ask(self.p.clone(), |reply| EventOp::List {
                        after,
                        limit: PAGE,
                        max_bytes: PAGE_BYTES,
                        reply,
                    })
                    .await
                    .ok()?;
                self.catch_up = page.more;
                self.cursor = page.next;
                self.backlog.extend(page.list.events);
                continue;
            }
            // Caught up: every event up to the cursor was sent or is not this stream's.
            self.last = self.last.max(self.cursor);
            let mut shutdown = self.st.shutdown.clone();
            if *shutdown.borrow() {
                return None;
            }
            let cut = async {
                match self.cut.as_mut() {
                    Some(c) => c.wait().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = cut => {}
                r = self.rx.recv() => match r {
                    Ok(ev) => {
                        if ev.seq > self.last {
                            self.last = ev.seq;
                            if visible(&self.p, &ev) {
                                return Some(sse_event(&ev));
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.cursor = self.last;
                        self.catch_up = true;
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                _ = shutdown.changed() => return None,
            }
        }
    }
}

/// Where a stream resumes: the `Last-Event-ID` header, else `?after=`, else 0.
///
/// # Errors
/// 400 naming the header when it is not a number, or is ahead of the last event given
/// (a client of another server, or a typo): replaying the whole log instead would hide
/// the mistake.
async fn resume_point(
    st: &AppState,
    p: &Principal,
    headers: &HeaderMap,
    after: Option<u64>,
) -> Result<u64, ApiError> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok(after.unwrap_or(0));
    };
    let text = String::from_utf8_lossy(v.as_bytes());
    let seq: u64 = text.trim().parse().map_err(|_| {
        ApiError::bad_request(format!(
            "Last-Event-ID {text:?} is not an event sequence number (a whole number >= 0)"
        ))
        .field("Last-Event-ID")
    })?;
    let last = st.lp.ask(p.clone(), EventOp::LastSeq).await?;
    if seq > last {
        return Err(ApiError::bad_request(format!(
            "Last-Event-ID {seq} is ahead of the last event given ({last}): it is not from this server"
        ))
        .field("Last-Event-ID"));
    }
    Ok(seq)
}

#[utoipa::path(get, path = "/v1/events/stream", tag = "events", params(EventsQuery,
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event (wins over `after`)")),
    responses((status = 200, description = "Server-sent events: each message's `id` is its `seq`, its `data` an `EventView` as JSON",
        body = String, content_type = "text/event-stream")))]
async fn stream(
    State(st): State<AppState>,
    Auth(p): Auth,
    headers: HeaderMap,
    cut: Option<Extension<StallCut>>,
    Q(q): Q<EventsQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let slot = st.open.take(crate::longlived::Kind::Stream, &p)?;
    let last = resume_point(&st, &p, &headers, q.after).await?;
    let rx = st.events.subscribe();
    let state = Stream {
        st,
        p,
        rx,
        last,
        cursor: last,
        backlog: VecDeque::new(),
        catch_up: true,
        cut: cut.map(|Extension(c)| c.listen()),
        ended: false,
        _slot: slot,
    };
    let events = futures_util::stream::unfold(state, |mut s| async move {
        let ev = s.next().await?;
        Some((Ok::<_, Infallible>(ev), s))
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

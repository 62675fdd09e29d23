//! A call the server runs as a long-running task (protocol 2026-07-28's
//! `io.modelcontextprotocol/tasks` extension): `tools/call` answers with a task handle, which
//! is followed with `tasks/get` at the pace the server asks until the task ends, its questions
//! put to the person and answered with `tasks/update`, and `tasks/cancel` sent when the caller
//! gives up (Stop, the turn dropped) or the task runs past [`McpConfig::max_task_duration`].
//!
//! [`McpConfig::max_task_duration`]: crate::McpConfig::max_task_duration

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, GetTaskParams, GetTaskRequest,
    InputRequests, ServerResult, Task, TaskPayload, TaskStatus, UpdateTaskParams,
    UpdateTaskRequest,
};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient};
use serde_json::Value;
use tokio::time::Instant;

use super::{Fault, McpSession, Unfulfilled};
use crate::ask::{CallNews, MAX_PROGRESS_MESSAGE_BYTES, TaskReport, TaskState};
use crate::canonical::{excerpt, truncate};
use crate::config::TRUNCATION_MARKER;
use crate::error::{McpError, human};
use crate::model::ToolResult;

/// The quickest and slowest the task is polled, whatever the server asks: a server cannot make
/// us poll it in a busy loop, nor keep a person waiting long after its task ended; between
/// the two the server's pace is honoured. At most two polls a second also keeps what is told
/// of the task at the pace of progress reports.
const FASTEST_POLL: Duration = Duration::from_millis(500);
const SLOWEST_POLL: Duration = Duration::from_secs(60);
/// Polls in a row that may fail for a passing reason (a timeout, a busy or restarting server)
/// before the task is given up.
const MAX_FAILED_POLLS: u32 = 3;
/// The pace when the server names none.
const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Task ids longer than this are not followed (an id is sent back with every poll).
const MAX_TASK_ID_BYTES: usize = 256;
/// Questions one task may put to the person over its life: a server that keeps asking is not
/// answered forever.
const MAX_TASK_QUESTIONS: usize = 20;

impl McpSession {
    /// Follows the task `seed` started by the call `operation` until it ends: the call's
    /// result, or why there is none.
    pub(super) async fn follow_task(
        &self,
        seed: Task,
        operation: &str,
        started: Instant,
    ) -> Result<ToolResult, (McpError, Fault)> {
        let ended = |how: String| {
            (
                McpError::TaskEnded { url: self.url.clone(), operation: operation.to_owned(), how },
                Fault::Answered,
            )
        };
        let task_id = seed.task_id.clone();
        if task_id.is_empty() || task_id.len() > MAX_TASK_ID_BYTES {
            return Err((
                McpError::Protocol {
                    url: self.url.clone(),
                    detail: "the server answered with a task whose id is empty or over 256 bytes"
                        .to_owned(),
                },
                Fault::Broken,
            ));
        }
        let bound = self.config.max_task_duration;
        // Until the task ends by itself, leaving (the caller dropped, an error below) cancels it.
        let mut cancel = CancelTaskOnDrop {
            peer: Some(self.service.peer().clone()),
            task_id: task_id.clone(),
            cancels: Arc::clone(&self.cancels),
        };
        let mut reporter = Reporter::new(self, &task_id);
        reporter.tell(seed.status, seed.status_message.as_deref());
        let mut answered: HashSet<String> = HashSet::new();
        let mut pace = seed.poll_interval_ms;
        let get_operation = format!("tasks/get for {operation}");
        let timeout = self.config.request_timeout;
        let mut failed_polls = 0;
        loop {
            let pause = pace
                .map_or(DEFAULT_POLL, Duration::from_millis)
                .clamp(FASTEST_POLL, SLOWEST_POLL)
                .saturating_mul(1 << failed_polls);
            let Some(left) = bound.checked_sub(started.elapsed()).filter(|l| !l.is_zero()) else {
                // Cancelled on the way out, by the guard.
                return Err(ended(format!(
                    "was still running after {}, the longest a task may run on this instance; \
                     it was cancelled (an administrator can raise LLOOMA_MCP_TASK_MAX_SECS)",
                    human(bound)
                )));
            };
            // The last poll falls on the bound, so a task that ended just before it is seen.
            tokio::time::sleep(pause.min(left)).await;
            let request = ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(
                task_id.clone(),
            )));
            let got = self
                .request_classified(
                    request,
                    &get_operation,
                    PeerRequestOptions::with_timeout(timeout),
                    timeout,
                    |_| {},
                )
                .await;
            let detailed = match got {
                Ok(ServerResult::GetTaskResult(got)) => got.task,
                Ok(_) => {
                    return Err((
                        McpError::Protocol {
                            url: self.url.clone(),
                            detail: "the reply to tasks/get is not a task".to_owned(),
                        },
                        Fault::Broken,
                    ));
                }
                Err((McpError::Server { code: -32602, message, .. }, _)) => {
                    // It no longer knows the task (expired, lost in a restart): nothing to cancel.
                    cancel.disarm();
                    return Err(ended(format!(
                        "the server no longer knows ({message}), so whether it finished is unknown"
                    )));
                }
                Err((error, _)) if passing(&error) && failed_polls + 1 < MAX_FAILED_POLLS => {
                    failed_polls += 1;
                    tracing::debug!(url = %self.url, %error, "a poll of a task failed; trying again");
                    continue;
                }
                Err(failed) => return Err(ran(failed)),
            };
            failed_polls = 0;
            if detailed.task.task_id != task_id {
                return Err((
                    McpError::Protocol {
                        url: self.url.clone(),
                        detail: "the reply to tasks/get is about another task".to_owned(),
                    },
                    Fault::Broken,
                ));
            }
            pace = detailed.task.poll_interval_ms;
            reporter.tell(detailed.task.status, detailed.task.status_message.as_deref());
            match detailed.payload {
                TaskPayload::Completed { result } => {
                    cancel.disarm();
                    return Ok(self.tool_result(&Value::Object(result)));
                }
                TaskPayload::Failed { error } => {
                    cancel.disarm();
                    let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .map(|m| excerpt(m, 300))
                        .unwrap_or_else(|| "no reason given".to_owned());
                    return Err(ended(format!("failed: {message} (error {code})")));
                }
                TaskPayload::Cancelled => {
                    cancel.disarm();
                    let why = detailed
                        .task
                        .status_message
                        .as_deref()
                        .map(|m| format!(" ({})", excerpt(m, 300)))
                        .unwrap_or_default();
                    return Err(ended(format!("the server cancelled{why}")));
                }
                TaskPayload::InputRequired { input_requests } => {
                    // The same questions come back on every poll until answered: each is put
                    // to the person once.
                    let fresh: InputRequests = input_requests
                        .into_iter()
                        .filter(|(key, _)| !answered.contains(key))
                        .collect();
                    if fresh.is_empty() {
                        continue;
                    }
                    if answered.len() + fresh.len() > MAX_TASK_QUESTIONS {
                        return Err(ended(format!(
                            "asked more than {MAX_TASK_QUESTIONS} questions; it was cancelled"
                        )));
                    }
                    answered.extend(fresh.keys().cloned());
                    let responses = self.fulfil(fresh).await.map_err(|failed| match failed {
                        Unfulfilled::Broken(detail) => {
                            (McpError::Protocol { url: self.url.clone(), detail }, Fault::Broken)
                        }
                        Unfulfilled::Refused(reason) => ended(format!("was cancelled: {reason}")),
                    })?;
                    let Some(responses) = responses else { continue };
                    let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
                        UpdateTaskParams::new(task_id.clone(), responses),
                    ));
                    self.request_classified(
                        update,
                        &format!("tasks/update for {operation}"),
                        PeerRequestOptions::with_timeout(timeout),
                        timeout,
                        |_| {},
                    )
                    .await
                    .map_err(ran)?;
                }
                _ => {}
            }
        }
    }
}

/// A failed request about a task that already runs: whatever became of the session, the call
/// was made, so it must never be sent again as one the server did not run.
fn ran((error, fault): (McpError, Fault)) -> (McpError, Fault) {
    (error, if fault == Fault::NotRun { Fault::Broken } else { fault })
}

/// Whether a failed poll may pass by itself: no answer in time, a busy or restarting server, a
/// connection cut. A refusal or a reply that is not MCP does not.
fn passing(error: &McpError) -> bool {
    match error {
        McpError::Timeout { .. } | McpError::Disconnected { .. } | McpError::Unreachable { .. } => {
            true
        }
        McpError::HttpStatus { status, .. } => *status == 429 || *status >= 500,
        McpError::Server { code, .. } => *code == -32603,
        _ => false,
    }
}

/// Tells the call's asker where the task stands, only when that changed.
struct Reporter<'a> {
    session: &'a McpSession,
    task_id: String,
    last: Option<(TaskState, Option<String>)>,
}

impl<'a> Reporter<'a> {
    fn new(session: &'a McpSession, task_id: &str) -> Self {
        Self { session, task_id: excerpt(task_id, 80), last: None }
    }

    fn tell(&mut self, status: TaskStatus, message: Option<&str>) {
        let state = match status {
            TaskStatus::Working => TaskState::Working,
            TaskStatus::InputRequired => TaskState::InputRequired,
            _ => return,
        };
        let message = message
            .filter(|m| !m.trim().is_empty())
            .map(|m| truncate(m, MAX_PROGRESS_MESSAGE_BYTES, TRUNCATION_MARKER).0);
        let now = Some((state, message.clone()));
        if self.last == now {
            return;
        }
        // The server answered a poll: it is at work, whatever the call's idle timer thinks.
        let slot = &self.session.service.service().call;
        slot.stirred();
        if let Some(asker) = slot.asker() {
            let report = TaskReport { task_id: self.task_id.clone(), status: state, message };
            // Never waits: a caller busy with a question misses a report, not the task; the
            // next poll tells it again.
            if asker.try_send(CallNews::Task(report)).is_ok() {
                self.last = now;
            }
        }
    }
}

/// Sends `tasks/cancel` for a task left before it ended (the caller gave up, the task ran too
/// long, its questions could not be answered). A task that ended by itself is disarmed.
struct CancelTaskOnDrop {
    peer: Option<Peer<RoleClient>>,
    task_id: String,
    cancels: Arc<tokio::sync::RwLock<()>>,
}

impl CancelTaskOnDrop {
    fn disarm(&mut self) {
        self.peer = None;
    }
}

impl Drop for CancelTaskOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let task_id = std::mem::take(&mut self.task_id);
        // Taken now, before whoever dropped us can close the session: `close` waits for it.
        let pending = Arc::clone(&self.cancels).try_read_owned();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _pending = pending;
                let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
                    CancelTaskParams::new(task_id),
                ));
                let options = PeerRequestOptions::with_timeout(Duration::from_secs(10));
                if let Ok(handle) = peer.send_request_with_option(request, options).await {
                    let _ = handle.await_response().await;
                }
            });
        }
    }
}

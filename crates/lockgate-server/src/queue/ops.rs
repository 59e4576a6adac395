//! The pause operations inside the loop, and how pause events reach the store.

use super::QueueOp;
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{ErrorCode, PauseList, PauseRequest, PauseView, Resumed, Role};
use lockgate_core::engine::{PauseError, PauseSpec};
use lockgate_core::event::Event;
use lockgate_core::Timestamp;

fn pause_error(e: PauseError) -> ApiError {
    match e {
        PauseError::Invalid { field, message } => ApiError::invalid(field, message),
        PauseError::TooMany => ApiError::new(ErrorCode::QuotaExceeded, e.to_string()),
        PauseError::NotFound(_) => ApiError::not_found(e.to_string()),
    }
}

impl Loop {
    /// Applies one pause operation.
    pub(crate) fn queue_op(&mut self, p: &Principal, op: QueueOp, now: Timestamp) {
        match op {
            QueueOp::Pause(req, reply) => {
                let r = self.pause(p, req, now);
                self.answer(reply, r);
            }
            QueueOp::List(reply) => {
                let pauses = self.engine.pauses().map(PauseView::from).collect();
                self.answer(reply, Ok(PauseList { pauses }));
            }
            QueueOp::Resume(id, reply) => {
                let r = p
                    .require(&[Role::Admin], "resume the queue")
                    .and_then(|()| self.engine.resume(id, now).map_err(pause_error))
                    .map(|pause| PauseView::from(&pause));
                self.answer(reply, r);
            }
            QueueOp::ResumeAll(reply) => {
                let r = p.require(&[Role::Admin], "resume the queue").map(|()| {
                    let ids: Vec<u64> = self.engine.pauses().map(|p| p.id).collect();
                    let resumed = ids
                        .into_iter()
                        .filter_map(|id| self.engine.resume(id, now).ok())
                        .map(|p| PauseView::from(&p))
                        .collect();
                    Resumed { resumed }
                });
                self.answer(reply, r);
            }
        }
    }

    fn pause(
        &mut self,
        p: &Principal,
        req: PauseRequest,
        now: Timestamp,
    ) -> Result<PauseView, ApiError> {
        p.require(&[Role::Admin], "pause the queue")?;
        let until = match &req.until {
            Some(t) => {
                Some(lockgate_api::time::parse(t).map_err(|m| ApiError::invalid("until", m))?)
            }
            None => None,
        };
        let spec = PauseSpec {
            selector: req.selector,
            reason: req.reason,
            by: p.name.clone(),
            until,
        };
        let pause = self.engine.pause(spec, now).map_err(pause_error)?;
        Ok(PauseView::from(&pause))
    }

    /// A pause event's row: written with the batch that reports it.
    pub(crate) fn track_pause(&mut self, ev: &Event) {
        match ev {
            Event::Paused { pause } => self.batch.pauses.push(pause.clone()),
            Event::Resumed { pause } => self.batch.removed_pauses.push(pause.id),
            _ => {}
        }
    }
}

//! The event operations inside the loop.

use super::{visible, EventOp};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::event_loop::Loop;
use lockgate_api::{EventList, EventView};
use serde_json::Value;

impl Loop {
    /// Applies one event operation.
    pub(crate) fn event_op(&mut self, p: &Principal, op: EventOp) {
        match op {
            EventOp::List {
                after,
                limit,
                reply,
            } => {
                let r = self.events(p, after, limit);
                self.answer(reply, r);
            }
            EventOp::LastSeq(reply) => {
                let seq = self.seq;
                self.answer(reply, Ok(seq));
            }
        }
    }

    fn events(&mut self, p: &Principal, after: u64, limit: usize) -> Result<EventList, ApiError> {
        let rows = self.store.events_after(after, limit.clamp(1, 10_000))?;
        let mut events = Vec::with_capacity(rows.len());
        for r in rows {
            let Ok(Value::Object(data)) = serde_json::from_str::<Value>(&r.data) else {
                continue;
            };
            let ev = EventView {
                seq: r.seq,
                at: lockgate_api::time::format(r.at),
                data,
            };
            if visible(p, &ev) {
                events.push(ev);
            }
        }
        Ok(EventList { events })
    }
}

//! The event operations inside the loop.

use super::{visible, EventOp, Page};
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
                max_bytes,
                reply,
            } => {
                let r = self.events(p, after, limit, max_bytes);
                self.answer(reply, r);
            }
            EventOp::LastSeq(reply) => {
                let seq = self.seq;
                self.answer(reply, Ok(seq));
            }
        }
    }

    fn events(
        &mut self,
        p: &Principal,
        after: u64,
        limit: usize,
        max_bytes: usize,
    ) -> Result<Page, ApiError> {
        let limit = limit.clamp(1, 10_000);
        let rows = self.store.events_after(after, limit)?;
        let mut more = rows.len() == limit;
        let mut events = Vec::with_capacity(rows.len());
        let mut bytes = 0;
        let mut next = after;
        for r in rows {
            if bytes >= max_bytes {
                more = true;
                break;
            }
            next = r.seq;
            let Ok(Value::Object(data)) = serde_json::from_str::<Value>(&r.data) else {
                continue;
            };
            let ev = EventView {
                seq: r.seq,
                at: lockgate_api::time::format(r.at),
                data,
            };
            if visible(p, &ev) {
                bytes += r.data.len();
                events.push(ev);
            }
        }
        Ok(Page {
            list: EventList { events },
            next,
            more,
        })
    }
}

//! The deliveries the outbox keeps, oldest first: built from the file's lines, held within a
//! bound, and asked what is due and what to list.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use super::delivery::{Delivery, Line, State, Status};

/// How much the outbox keeps: past either bound, the oldest delivered deliveries go first,
/// then the oldest failed ones, and only then the oldest pending ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    pub deliveries: usize,
    /// Of the deliveries' bodies together.
    pub body_bytes: usize,
}

impl Default for Bound {
    fn default() -> Bound {
        Bound {
            deliveries: 1_000,
            body_bytes: 8 * 1024 * 1024,
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Book {
    /// Oldest first (the order they were queued in).
    deliveries: Vec<Delivery>,
    body_bytes: usize,
}

impl Book {
    pub fn len(&self) -> usize {
        self.deliveries.len()
    }

    pub fn body_bytes(&self) -> usize {
        self.body_bytes
    }

    pub fn iter(&self) -> impl Iterator<Item = &Delivery> {
        self.deliveries.iter()
    }

    pub fn get(&self, id: &str) -> Option<&Delivery> {
        self.deliveries.iter().find(|delivery| delivery.id == id)
    }

    /// Applies one line of the file. A change or a drop of a delivery it does not hold (one
    /// dropped before) changes nothing.
    pub fn apply(&mut self, line: Line) {
        match line {
            Line::Queued(delivery) => {
                self.remove(&delivery.id);
                self.body_bytes += delivery.body.len();
                self.deliveries.push(delivery);
            }
            Line::Changed(change) => {
                if let Some(delivery) = self.deliveries.iter_mut().find(|d| d.id == change.id) {
                    delivery.state = change.state;
                }
            }
            Line::Dropped { id } => self.remove(&id),
        }
    }

    fn remove(&mut self, id: &str) {
        if let Some(at) = self.deliveries.iter().position(|d| d.id == id) {
            let gone = self.deliveries.remove(at);
            self.body_bytes -= gone.body.len();
        }
    }

    /// The deliveries to let go so that `bound` holds once `new` ones are added: the oldest
    /// delivered, then the oldest failed, then the oldest pending. The new ones are never
    /// among them.
    pub fn over_bound(&self, new: &[Delivery], bound: Bound) -> Vec<&Delivery> {
        let mut count = self.deliveries.len() + new.len();
        let mut bytes = self.body_bytes + new.iter().map(|d| d.body.len()).sum::<usize>();
        let mut victims = Vec::new();
        for status in [Status::Delivered, Status::Failed, Status::Pending] {
            for delivery in self.deliveries.iter().filter(|d| d.state.status == status) {
                if count <= bound.deliveries && bytes <= bound.body_bytes {
                    return victims;
                }
                count -= 1;
                bytes -= delivery.body.len();
                victims.push(delivery);
            }
        }
        victims
    }

    /// Pending deliveries whose next try is due at `now`, not already being tried, oldest
    /// first, at most `most`.
    pub fn due(&self, now: DateTime<Utc>, busy: &HashSet<String>, most: usize) -> Vec<Delivery> {
        self.deliveries
            .iter()
            .filter(|d| d.state.status == Status::Pending && !busy.contains(&d.id))
            .filter(|d| d.state.next_attempt_at.is_none_or(|next| next <= now))
            .take(most)
            .cloned()
            .collect()
    }

    /// When the next pending delivery not being tried is due.
    pub fn next_due(&self, busy: &HashSet<String>) -> Option<DateTime<Utc>> {
        self.deliveries
            .iter()
            .filter(|d| d.state.status == Status::Pending && !busy.contains(&d.id))
            .map(|d| d.state.next_attempt_at.unwrap_or(d.created_at))
            .min()
    }

    /// Brings every pending delivery's next try forward to `now` at the latest: after a
    /// restart the receiver may well be back, and a schedule made before need not be kept.
    pub fn due_by(&mut self, now: DateTime<Utc>) -> Vec<(String, State)> {
        let mut changed = Vec::new();
        for delivery in &mut self.deliveries {
            let state = &mut delivery.state;
            if state.status == Status::Pending && state.next_attempt_at.is_none_or(|at| at > now) {
                state.next_attempt_at = Some(now);
                changed.push((delivery.id.clone(), state.clone()));
            }
        }
        changed
    }

    /// The newest first, of `status` if given, at most `limit`.
    pub fn newest_first(&self, status: Option<Status>, limit: usize) -> Vec<Delivery> {
        self.deliveries
            .iter()
            .rev()
            .filter(|d| status.is_none_or(|status| d.state.status == status))
            .take(limit)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::outbox::delivery::Change;

    fn delivery(n: usize, status: Status) -> Delivery {
        let mut delivery = Delivery::new(
            format!("hooks.turn_ended[{n}]"),
            "http://127.0.0.1:9/",
            "turn_ended",
            "c_1",
            &"x".repeat(100),
        );
        delivery.id = format!("msg_{n}");
        delivery.state.status = status;
        delivery
    }

    #[test]
    fn over_the_bound_delivered_go_first_then_failed_then_pending() {
        let mut book = Book::default();
        let statuses = [
            Status::Pending,
            Status::Delivered,
            Status::Failed,
            Status::Delivered,
            Status::Pending,
        ];
        for (n, status) in statuses.into_iter().enumerate() {
            book.apply(Line::Queued(delivery(n, status)));
        }
        let bound = Bound {
            deliveries: 5,
            body_bytes: usize::MAX,
        };
        let ids = |victims: Vec<&Delivery>| -> Vec<String> {
            victims.into_iter().map(|d| d.id.clone()).collect()
        };
        assert!(book.over_bound(&[], bound).is_empty());
        let new = [delivery(10, Status::Pending)];
        assert_eq!(ids(book.over_bound(&new, bound)), ["msg_1"]);
        let new: Vec<Delivery> = (10..13).map(|n| delivery(n, Status::Pending)).collect();
        assert_eq!(
            ids(book.over_bound(&new, bound)),
            ["msg_1", "msg_3", "msg_2"]
        );
        let new: Vec<Delivery> = (10..14).map(|n| delivery(n, Status::Pending)).collect();
        assert_eq!(
            ids(book.over_bound(&new, bound)),
            ["msg_1", "msg_3", "msg_2", "msg_0"],
            "a pending one goes only when nothing else is left"
        );
        // The bytes of the bodies bound it too.
        let bytes = Bound {
            deliveries: 100,
            body_bytes: 450,
        };
        assert_eq!(
            ids(book.over_bound(&new, bytes)),
            ["msg_1", "msg_3", "msg_2", "msg_0", "msg_4"]
        );
        for victim in ids(book.over_bound(&new[..1], bytes)) {
            book.apply(Line::Dropped { id: victim });
        }
        book.apply(Line::Queued(new[0].clone()));
        assert!(book.body_bytes() <= 450, "{}", book.body_bytes());
        assert_eq!(book.len(), 4);
    }

    #[test]
    fn changes_apply_by_id_and_due_deliveries_come_oldest_first() {
        let mut book = Book::default();
        for n in 0..3 {
            book.apply(Line::Queued(delivery(n, Status::Pending)));
        }
        let now = Utc::now();
        book.apply(Line::Changed(Change {
            id: "msg_1".to_owned(),
            state: State {
                status: Status::Pending,
                attempts: 1,
                last_attempt_at: Some(now),
                next_attempt_at: Some(now + chrono::Duration::seconds(30)),
                last_error: Some("503".to_owned()),
            },
        }));
        book.apply(Line::Changed(Change {
            id: "msg_gone".to_owned(),
            state: State::new_at(now),
        }));
        let busy = HashSet::from(["msg_0".to_owned()]);
        let due: Vec<String> = book
            .due(now + chrono::Duration::seconds(1), &busy, 10)
            .into_iter()
            .map(|d| d.id)
            .collect();
        assert_eq!(due, ["msg_2"]);
        assert_eq!(book.get("msg_1").unwrap().state.attempts, 1);
        assert_eq!(
            book.newest_first(None, 2)
                .into_iter()
                .map(|d| d.id)
                .collect::<Vec<_>>(),
            ["msg_2", "msg_1"]
        );
        // After a restart, msg_1's try comes now rather than in 30 s.
        let changed = book.due_by(now);
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(book.get("msg_1").unwrap().state.next_attempt_at, Some(now));
    }
}

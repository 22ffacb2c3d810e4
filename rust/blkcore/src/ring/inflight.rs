// SPDX-License-Identifier: GPL-2.0

//! [`InFlight`]: ids of requests in flight and the validation of each
//! response against them.

use super::*;

impl<const N: usize> InFlight<N> {
    /// A table handing out ids `0..size`; `size` is clamped to `N`.
    pub fn new(size: u32) -> Self {
        let size = size.min(u32::try_from(N).unwrap_or(u32::MAX));
        let mut slots = [Slot::Free { next: NO_SLOT }; N];
        let mut i = 0u32;
        for s in slots.iter_mut() {
            let next = if i.saturating_add(1) < size {
                i + 1
            } else {
                NO_SLOT
            };
            *s = Slot::Free { next };
            i = i.saturating_add(1);
        }
        Self {
            slots,
            size,
            free_head: if size > 0 { 0 } else { NO_SLOT },
            waiting: 0,
            held: 0,
        }
    }

    /// Ids held (see [`InFlight::hold`]).
    pub fn held(&self) -> u32 {
        self.held
    }

    /// Ids in flight.
    pub fn waiting(&self) -> u32 {
        self.waiting
    }

    /// Ids the table can hand out at once.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Whether an id is free ([`InFlight::alloc`] would succeed).
    pub fn has_free(&self) -> bool {
        self.free_head != NO_SLOT
    }

    /// Takes a free id for a request of operation `op` (the real operation,
    /// `indirect_op` for indirect ones). `None` if all ids are in flight.
    pub fn alloc(&mut self, op: u8, indirect: bool) -> Option<u32> {
        let id = self.free_head;
        let slot = self.slots.get_mut(id as usize)?;
        let Slot::Free { next } = *slot else {
            return None;
        };
        *slot = Slot::Waiting { op, indirect };
        self.free_head = next;
        self.waiting = self.waiting.saturating_add(1);
        Some(id)
    }

    /// Whether `id` is in flight.
    pub fn is_waiting(&self, id: u32) -> bool {
        id < self.size && matches!(self.slots.get(id as usize), Some(Slot::Waiting { .. }))
    }

    fn release(&mut self, id: u32) {
        if let Some(slot) = self.slots.get_mut(id as usize) {
            *slot = Slot::Free {
                next: self.free_head,
            };
            self.free_head = id;
            self.waiting = self.waiting.saturating_sub(1);
        }
    }

    /// Returns an id that was allocated but never sent.
    pub fn cancel(&mut self, id: u32) -> bool {
        if self.is_waiting(id) {
            self.release(id);
            true
        } else {
            false
        }
    }

    /// Takes `id` out of use without freeing it: its request was answered
    /// (or failed) while the backend still maps one of its pages, so the
    /// id must not name another request until [`InFlight::unhold`]. A
    /// response for a held id is [`ResponseError::NotInFlight`]. Works on
    /// an id in flight or free (one just completed); `false` if `id` is
    /// out of range or held already.
    pub fn hold(&mut self, id: u32) -> bool {
        if id >= self.size {
            return false;
        }
        match self.slots.get(id as usize) {
            Some(Slot::Waiting { .. }) => {
                self.waiting = self.waiting.saturating_sub(1);
            }
            Some(Slot::Free { next }) => {
                let next = *next;
                if !self.unlink_free(id, next) {
                    return false;
                }
            }
            _ => return false,
        }
        if let Some(slot) = self.slots.get_mut(id as usize) {
            *slot = Slot::Held;
        }
        self.held = self.held.saturating_add(1);
        true
    }

    /// Frees a held id (the backend let go of the request's pages).
    pub fn unhold(&mut self, id: u32) -> bool {
        let Some(slot) = self.slots.get_mut(id as usize) else {
            return false;
        };
        if *slot != Slot::Held {
            return false;
        }
        *slot = Slot::Free {
            next: self.free_head,
        };
        self.free_head = id;
        self.held = self.held.saturating_sub(1);
        true
    }

    /// Removes free `id` (whose successor is `next`) from the free list:
    /// O(1) for the head, which is where a just-completed id is; a walk of
    /// at most `size` ids otherwise.
    fn unlink_free(&mut self, id: u32, next: u32) -> bool {
        if self.free_head == id {
            self.free_head = next;
            return true;
        }
        let mut i = self.free_head;
        for _ in 0..self.size {
            let Some(Slot::Free { next: n }) = self.slots.get_mut(i as usize) else {
                return false;
            };
            if *n == id {
                *n = next;
                return true;
            }
            i = *n;
        }
        false
    }

    /// Validates a response against the requests in flight (id in range,
    /// in flight, same operation) and frees its id. Nothing changes on
    /// error.
    pub fn complete(&mut self, rsp: &BlkifResponse) -> Result<Completion, ResponseError> {
        let id = u32::try_from(rsp.id)
            .ok()
            .filter(|&id| id < self.size)
            .ok_or(ResponseError::BadId(rsp.id))?;
        let Some(&Slot::Waiting { op, indirect }) = self.slots.get(id as usize) else {
            return Err(ResponseError::NotInFlight(id));
        };
        if rsp.operation != op {
            return Err(ResponseError::WrongOperation {
                id,
                expected: op,
                got: rsp.operation,
            });
        }
        self.release(id);
        Ok(Completion {
            id,
            operation: op,
            indirect,
            status: RspStatus::from_wire(rsp.status),
        })
    }
}

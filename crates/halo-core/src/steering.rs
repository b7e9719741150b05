//! Steering: user messages queued from another task while a run is in flight.
//!
//! A [`SteeringHandle`] (from [`HaloAgent::steering`](crate::HaloAgent::steering)) is cheap to
//! clone and `Send`; [`SteeringHandle::send`] queues a message, and the run takes every
//! queued message into its state and injects them at its next step boundary — before the next model call, never between a
//! tool call and its result — as a user message marked injected
//! ([`MessageLog::is_injected`](crate::MessageLog::is_injected)), with an
//! [`AgentEvent::Injected`](crate::AgentEvent::Injected). Messages queued while no run is in
//! flight enter at the next run's first model call.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Queues user messages into an agent's runs. See the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct SteeringHandle {
    queue: Arc<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    messages: Mutex<Vec<String>>,
    /// Whether `messages` may hold something: the run looks at the queue several times a
    /// step, and takes the lock only when it does.
    queued: AtomicBool,
}

impl SteeringHandle {
    /// Queues `text` for the next step boundary.
    pub fn send(&self, text: impl Into<String>) {
        let mut messages = self.lock();
        messages.push(text.into());
        self.queue.queued.store(true, Ordering::Release);
    }

    /// How many messages wait.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// Takes every queued message, oldest first.
    pub(crate) fn drain(&self) -> Vec<String> {
        if !self.queue.queued.load(Ordering::Acquire) {
            return Vec::new();
        }
        let mut messages = self.lock();
        self.queue.queued.store(false, Ordering::Release);
        std::mem::take(&mut *messages)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.queue
            .messages
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }
}

//! [`Clock`]: where the run engine's times come from. The engine holds no clock itself, so
//! its state serializes and tests can pin time.

/// Where the run engine's times come from: milliseconds since the Unix epoch. The engine
/// holds no clock itself, so its state serializes and tests can pin time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

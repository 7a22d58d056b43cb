//! Runtime settings of the job platform (the `[queue]` section itself is
//! `domain::config::QueueConfig`, read with the rest of the configuration).

use std::time::Duration;

/// Per-stage settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageSettings {
    /// Jobs of this stage run at once in one process.
    pub concurrency: usize,
    /// Attempts in all, the first included; after the last failed one the job is dead.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles with each failed attempt (with jitter).
    pub backoff_base: Duration,
    /// Upper bound of the retry delay.
    pub backoff_max: Duration,
}

impl Default for StageSettings {
    fn default() -> Self {
        StageSettings {
            concurrency: 4,
            max_attempts: 10,
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(15 * 60),
        }
    }
}

impl StageSettings {
    /// The delay before the retry that follows failed attempt `attempt` (1-based): half of
    /// `min(backoff_base * 2^(attempt-1), backoff_max)`, plus a random part up to the other half.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(32);
        let full = self.backoff_base.saturating_mul(1u32 << exp.min(31)).min(self.backoff_max);
        let half = full / 2;
        half + half.mul_f64(rand::random::<f64>())
    }
}

/// Settings shared by every stage of a [`Runtime`](super::Runtime).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeSettings {
    /// How often an idle worker looks for due jobs (apalis otherwise waits for its heartbeat).
    pub poll_interval: Duration,
    /// Worker heartbeat; jobs held by a worker silent for three heartbeats go back to the queue.
    pub heartbeat_interval: Duration,
    /// After a shutdown request, how long in-flight jobs may take before they are abandoned
    /// (they run again elsewhere once the heartbeat lapses).
    pub shutdown_timeout: Duration,
    /// How often completed jobs are purged and queue depth gauges refreshed.
    pub janitor_interval: Duration,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        RuntimeSettings {
            poll_interval: Duration::from_millis(150),
            heartbeat_interval: Duration::from_secs(10),
            shutdown_timeout: Duration::from_secs(30),
            janitor_interval: Duration::from_secs(60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_bounds() {
        let s = StageSettings {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_millis(1000),
            ..Default::default()
        };
        for _ in 0..50 {
            let first = s.backoff(1);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100), "{first:?}");
            let third = s.backoff(3);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400), "{third:?}");
            let late = s.backoff(40);
            assert!(late >= Duration::from_millis(500) && late <= Duration::from_millis(1000), "{late:?}");
        }
    }
}

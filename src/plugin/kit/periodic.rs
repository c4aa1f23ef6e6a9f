//! Background work plugins run on a timer: [`reload_every`], the loop that checks a plugin's
//! files for changes (`hosts`, `file`) off the runtime's worker threads, and ends with the
//! plugin.

/// Runs `check` on `what` every `every` (the first after one period), off the runtime's worker
/// threads (it reads files), until `what` is dropped: the reload tasks of `hosts` and `file`.
/// `name` is the plugin's, for the log.
pub async fn reload_every<T: Send + Sync + 'static>(
    weak: std::sync::Weak<T>,
    every: std::time::Duration,
    name: &'static str,
    check: fn(&T),
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(inner) = weak.upgrade() else {
            break;
        };
        if tokio::task::spawn_blocking(move || check(&inner)).await.is_err() {
            tracing::warn!("{name}: the reload check panicked");
        }
    }
    tracing::debug!("{name}: reload task stopped");
}

//! The two locking helpers every thread of the core shares: a poison-tolerant lock, and the one
//! condvar wait with a deadline that every timed wait (flush, group transfer, HA events) uses.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// Locks `m`, taking the data even if a thread panicked while holding it: every guarded state
/// in the core stays consistent between statements, and a panic must not wedge the broker.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits on `cv` until `done(state)` holds or `deadline` passes, whichever comes first (`None`:
/// no deadline). Returns the guard and whether `done` held. Spurious wake-ups just re-check.
pub(crate) fn wait_until<'a, T>(
    cv: &Condvar,
    mut guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
    mut done: impl FnMut(&mut T) -> bool,
) -> (MutexGuard<'a, T>, bool) {
    loop {
        if done(&mut guard) {
            return (guard, true);
        }
        guard = match deadline {
            None => cv.wait(guard).unwrap_or_else(|p| p.into_inner()),
            Some(deadline) => {
                let now = Instant::now();
                if now >= deadline {
                    return (guard, false);
                }
                cv.wait_timeout(guard, deadline - now)
                    .unwrap_or_else(|p| p.into_inner())
                    .0
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn returns_when_the_condition_holds_or_the_deadline_passes() {
        let state = Arc::new((Mutex::new(0u32), Condvar::new()));
        let s2 = state.clone();
        let setter = std::thread::spawn(move || {
            *lock(&s2.0) = 3;
            s2.1.notify_all();
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        let (g, ok) = wait_until(&state.1, lock(&state.0), Some(deadline), |v| *v == 3);
        assert!(ok && *g == 3);
        drop(g);
        setter.join().unwrap();
        let (_guard, ok) = wait_until(&state.1, lock(&state.0), Some(Instant::now()), |v| *v == 4);
        assert!(!ok, "a passed deadline returns false at once");
    }
}

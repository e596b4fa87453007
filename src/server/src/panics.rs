//! Containing panics: a panic while a statement runs (planning, executing, streaming its rows)
//! becomes an `XX000` error for that statement, the session carries on, and the panic is logged
//! exactly once, with its location and the statement's text. Rust's default panic hook would
//! print a second, statement-less report; the hook installed here stays quiet for panics inside
//! a [`guard`]ed section (it records their location for the log line instead) and defers to the
//! previous hook everywhere else.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

use eddy_common::EddyError;
use futures::{Stream, StreamExt};

thread_local! {
    /// Set while this thread polls a guarded statement.
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Where the last guarded panic on this thread happened.
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs the panic hook (once per process; later calls do nothing).
pub fn install_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if GUARDED.with(Cell::get) {
                let mut at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
                // With RUST_BACKTRACE set (as for any Rust program), where it came from too.
                let trace = std::backtrace::Backtrace::capture();
                if trace.status() == std::backtrace::BacktraceStatus::Captured {
                    at.push_str(&format!("\n{trace}"));
                }
                LOCATION.with(|l| *l.borrow_mut() = Some(at));
            } else {
                previous(info);
            }
        }));
    });
}

/// Runs `f` as part of a guarded statement: a panic is returned, not printed.
pub fn run<T>(f: impl FnOnce() -> T) -> Result<T, Box<dyn Any + Send>> {
    let was = GUARDED.with(|g| g.replace(true));
    let out = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(was));
    out
}

/// The error for a caught panic, logged once with `what` (the statement's text).
pub fn report(payload: Box<dyn Any + Send>, what: &str) -> EddyError {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    let at = LOCATION.with(|l| l.borrow_mut().take()).unwrap_or_default();
    let shown: String = what.chars().take(2000).collect();
    tracing::error!("statement panicked at {at}: {msg}; statement: {shown}");
    EddyError::internal(format!("statement panicked: {msg}"))
}

/// A future whose every poll is [`run`] guarded; a panic ends it with `Err(payload)`.
pub struct Guard<F> {
    inner: Pin<Box<F>>,
}

/// Guards `fut` (see [`Guard`]).
pub fn guard<F: Future>(fut: F) -> Guard<F> {
    Guard { inner: Box::pin(fut) }
}

impl<F: Future> Future for Guard<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.inner.as_mut();
        match run(|| inner.poll(cx)) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(p) => Poll::Ready(Err(p)),
        }
    }
}

/// A stream whose every poll is [`run`] guarded; a panic is its last item, as `Err(payload)`.
pub struct GuardStream<S> {
    inner: S,
    done: bool,
}

/// Guards `stream` (see [`GuardStream`]).
pub fn guard_stream<S: Stream + Unpin>(stream: S) -> GuardStream<S> {
    GuardStream { inner: stream, done: false }
}

impl<S: Stream + Unpin> Stream for GuardStream<S> {
    type Item = Result<S::Item, Box<dyn Any + Send>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let inner = &mut self.inner;
        match run(|| inner.poll_next_unpin(cx)) {
            Ok(Poll::Ready(item)) => Poll::Ready(item.map(Ok)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(p) => {
                self.done = true;
                Poll::Ready(Some(Err(p)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guarded_panic_is_returned_with_its_location() {
        install_hook();
        let p = run(|| -> u8 { panic!("boom") }).expect_err("panics");
        let e = report(p, "SELECT boom()");
        assert_eq!(e.sqlstate, "XX000");
        assert!(e.message.contains("boom"), "{}", e.message);
        assert_eq!(run(|| 7).ok(), Some(7));
    }

    #[tokio::test]
    async fn a_guarded_future_that_panics_resolves_to_the_panic() {
        install_hook();
        let r = guard(async {
            if r#true() {
                panic!("later")
            }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(guard(async { 3 }).await.ok(), Some(3));
    }

    fn r#true() -> bool {
        std::hint::black_box(true)
    }
}

//! The thread that owns one SQLite connection: it runs the jobs sent over its queue one
//! after the other, and busy-waits between short calls so that back-to-back calls pass
//! between running threads (see the parent module's notes).

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::error::{Error, Result};

/// How long a worker that finished a short call busy-waits on its queue before it
/// sleeps, at least: after a longer one it waits as long as that call took, up to
/// `MAX_WORKER_SPIN`.
const WORKER_SPIN: Duration = Duration::from_micros(30);
/// The longest busy-wait for the next job (after a short call that took that long or
/// longer).
const MAX_WORKER_SPIN: Duration = Duration::from_micros(250);
/// How long a point read or a single write busy-waits for its answer before it yields
/// to the executor: on a warm connection a point read answers within about 10 µs and a
/// single write within about 30 µs.
pub(super) const ANSWER_SPIN: Duration = Duration::from_micros(60);
/// Waits that sleep at once after a busy-wait that ran out.
const SPIN_BACKOFF: u32 = 64;
/// The name of every worker thread.
const WORKER_THREAD: &str = "tablekit-sqlite";

/// A job for a worker: runs on its connection, answers through a channel it owns.
struct Job {
    run: Box<dyn FnOnce(&mut Connection) + Send>,
    /// Whether the caller busy-waits for the answer (a point read, a single write): only
    /// then does the worker busy-wait for the next job afterwards.
    caller_spins: bool,
}

/// One SQLite connection on its own thread, running the jobs sent over `jobs` in order.
/// Dropping the last sender ends the thread once the queued jobs ran.
pub(super) struct Worker {
    jobs: mpsc::Sender<Job>,
    /// Callers' answer waits left to skip since one ran out.
    answer_backoff: AtomicU32,
}

impl Worker {
    /// Starts a worker whose thread opens its connection with `open`, and waits until
    /// the connection is open.
    pub(super) async fn start<O>(open: O) -> Result<Worker>
    where
        O: FnOnce() -> Result<Connection> + Send + 'static,
    {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (opened, on_open) = oneshot::channel();
        std::thread::Builder::new()
            .name(WORKER_THREAD.to_owned())
            .spawn(move || match open() {
                Ok(conn) => {
                    let _ = opened.send(Ok(()));
                    serve(conn, &queue);
                }
                Err(e) => {
                    let _ = opened.send(Err(e));
                }
            })
            .map_err(|e| Error::Backend {
                message: format!("cannot start a SQLite connection thread: {e}"),
            })?;
        on_open.await.map_err(|_| job_lost())??;
        Ok(Worker {
            jobs,
            answer_backoff: AtomicU32::new(0),
        })
    }

    /// Runs `f` on this worker's connection. With `answer_spin` non-zero, the caller
    /// first watches for the answer that long (bounded) before it yields.
    pub(super) async fn call<R, F>(&self, answer_spin: Duration, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<R> + Send + 'static,
    {
        let (answer, mut on_answer) = oneshot::channel();
        let job = Job {
            run: Box::new(move |conn| {
                if !answer.is_closed() {
                    let _ = answer.send(f(conn));
                }
            }),
            caller_spins: !answer_spin.is_zero(),
        };
        self.jobs.send(job).map_err(|_| closed())?;
        if answer_spin.is_zero() {
            return on_answer.await.map_err(|_| job_lost())?;
        }
        let sent = Instant::now();
        if !backing_off(&self.answer_backoff) {
            let mut polls: u32 = 0;
            loop {
                match on_answer.try_recv() {
                    Ok(result) => return result,
                    Err(oneshot::error::TryRecvError::Closed) => return Err(job_lost()),
                    // The clock is read every 16th poll: reading it costs more than a poll.
                    Err(oneshot::error::TryRecvError::Empty)
                        if !polls.is_multiple_of(16) || sent.elapsed() < answer_spin =>
                    {
                        polls = polls.wrapping_add(1);
                        std::hint::spin_loop();
                    }
                    Err(oneshot::error::TryRecvError::Empty) => {
                        self.answer_backoff.store(SPIN_BACKOFF, Ordering::Relaxed);
                        break;
                    }
                }
            }
        }
        let result = on_answer.await.map_err(|_| job_lost())?;
        if sent.elapsed() < answer_spin {
            // A busy-wait would have caught this answer: turn busy-waits back on.
            self.answer_backoff.store(0, Ordering::Relaxed);
        }
        result
    }
}

/// A worker's loop: runs each job, then makes sure no transaction stays open. A job's
/// panic stops at this loop; its answer sender is dropped on the way out, which its
/// caller receives as an error.
///
/// Only a call whose caller busy-waits for its answer is followed by a busy-wait for the
/// next job. The caller of a longer call (a batch, a query) sleeps until its answer
/// comes, and waking it may put it on this worker's core when the other cores are busy:
/// a busy-wait there would keep it from running until the busy-wait ran out, so every
/// such call would pay a whole busy-wait (up to `MAX_WORKER_SPIN`) on top of the wake-up
/// it was meant to save.
fn serve(mut conn: Connection, queue: &mpsc::Receiver<Job>) {
    let mut waits = Waits::default();
    while let Some(job) = next_job(queue, &mut waits) {
        let started = Instant::now();
        let _ = panic::catch_unwind(AssertUnwindSafe(|| (job.run)(&mut conn)));
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        waits.spin = if job.caller_spins {
            started.elapsed().clamp(WORKER_SPIN, MAX_WORKER_SPIN)
        } else {
            Duration::ZERO
        };
    }
}

/// A worker's record of its recent waits for jobs.
struct Waits {
    /// How long the next busy-wait lasts: the last job's time, within
    /// `WORKER_SPIN..=MAX_WORKER_SPIN`, or zero (no busy-wait) after a call whose caller
    /// does not busy-wait.
    spin: Duration,
    /// Waits left that sleep at once.
    skip: u32,
    /// Busy-waits in a row that ran out (capped).
    misses: u32,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            spin: WORKER_SPIN,
            skip: 0,
            misses: 0,
        }
    }
}

/// The next job, busy-waiting on the queue for `waits.spin` before sleeping on it;
/// `None` once every sender is gone. A zero `waits.spin` sleeps at once and leaves the
/// record of earlier busy-waits as it is.
///
/// A busy-wait that ran out makes the next waits sleep at once, twice as many after
/// each miss in a row (up to `SPIN_BACKOFF`): a caller that went idle, or a machine
/// with more runnable threads than cores, stops the spinning. A job that reaches a
/// sleeping worker within `waits.spin` shows that a busy-wait would have caught it,
/// and turns busy-waits back on at once.
fn next_job(queue: &mpsc::Receiver<Job>, waits: &mut Waits) -> Option<Job> {
    if waits.spin.is_zero() {
        return queue.recv().ok();
    }
    if waits.skip > 0 {
        waits.skip -= 1;
    } else {
        let started = Instant::now();
        let mut polls: u32 = 0;
        loop {
            match queue.try_recv() {
                Ok(job) => {
                    waits.misses = 0;
                    return Some(job);
                }
                Err(mpsc::TryRecvError::Disconnected) => return None,
                // The clock is read every 16th poll: reading it costs more than a poll.
                Err(mpsc::TryRecvError::Empty)
                    if !polls.is_multiple_of(16) || started.elapsed() < waits.spin =>
                {
                    polls = polls.wrapping_add(1);
                    std::hint::spin_loop();
                }
                Err(mpsc::TryRecvError::Empty) => {
                    waits.misses = (waits.misses + 1).min(SPIN_BACKOFF.trailing_zeros());
                    waits.skip = 1 << waits.misses;
                    break;
                }
            }
        }
    }
    let asleep = Instant::now();
    let job = queue.recv().ok();
    if asleep.elapsed() < waits.spin {
        waits.skip = 0;
        waits.misses = 0;
    }
    job
}

/// Whether a wait should sleep at once because a recent busy-wait ran out; counts the
/// skipped wait.
fn backing_off(backoff: &AtomicU32) -> bool {
    backoff
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
}

pub(super) fn closed() -> Error {
    Error::Backend {
        message: "the SQLite store is closed".to_owned(),
    }
}

/// The answer of a job never came: it panicked (or its thread ended).
pub(super) fn job_lost() -> Error {
    Error::Backend {
        message: "a SQLite call panicked".to_owned(),
    }
}

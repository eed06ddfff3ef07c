//! The seeded scheduler: every task of the simulated world is a future polled by this
//! executor, one at a time, the next one drawn by the seed from those ready. It runs as
//! one task of a current-thread Tokio runtime whose clock is paused, so timers (the
//! product's backoffs and leases, the simulation's latencies and clock jumps) are Tokio's
//! own and time moves only when every task waits: runs take no wall time to sleep, and
//! the same seed gives the same interleaving.
//!
//! Written here rather than taken from `turmoil` or `madsim`: turmoil simulates networks
//! between hosts, and tablekit's system under test has no sockets in the simulation (the
//! store, queue and blobs are in-memory doubles); madsim needs the whole build compiled
//! with `--cfg madsim` and its own Tokio. A scheduler of 150 lines over Tokio's paused
//! clock runs the product's code unchanged.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tablekit_core::fault::Crash;
use tablekit_core::random;

type Body = Pin<Box<dyn Future<Output = ()>>>;

/// Makes a process's body anew after a crash.
pub type Factory = Rc<dyn Fn(u32) -> (Body, Option<Crash>)>;

struct Task {
    name: String,
    body: Option<Body>,
    crash: Option<Crash>,
    restart: Option<Factory>,
    /// Restarts so far.
    lives: u32,
}

struct Ready {
    set: Mutex<BTreeSet<usize>>,
    outer: Mutex<Option<Waker>>,
}

struct TaskWaker {
    id: usize,
    ready: Arc<Ready>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.ready
            .set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.id);
        if let Some(outer) = self
            .ready
            .outer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
        {
            outer.wake_by_ref();
        }
    }
}

/// Adds tasks to the running executor.
#[derive(Clone, Default)]
pub struct Spawner {
    new: Rc<RefCell<Vec<Task>>>,
}

impl Spawner {
    /// A task that runs once.
    pub fn spawn(&self, name: impl Into<String>, body: impl Future<Output = ()> + 'static) {
        self.new.borrow_mut().push(Task {
            name: name.into(),
            body: Some(Box::pin(body)),
            crash: None,
            restart: None,
            lives: 0,
        });
    }

    /// A process: `factory(life)` makes its body and its crash flag; when a store call
    /// crashes it, its body is dropped (its memory is gone) and a new one starts.
    pub fn spawn_process(&self, name: impl Into<String>, factory: Factory) {
        let (body, crash) = factory(0);
        self.new.borrow_mut().push(Task {
            name: name.into(),
            body: Some(body),
            crash,
            restart: Some(factory),
            lives: 0,
        });
    }
}

/// What happened while the executor ran, for the trace.
pub trait Observer {
    /// After `task` was polled once.
    fn polled(&self, task: &str);
    /// `task` crashed and restarts.
    fn crashed(&self, task: &str);
}

/// Runs `main` and every task spawned until `main` completes; the others are dropped
/// then.
pub async fn run(
    spawner: Spawner,
    main: impl Future<Output = ()> + 'static,
    observer: &dyn Observer,
) {
    let ready = Arc::new(Ready {
        set: Mutex::default(),
        outer: Mutex::default(),
    });
    let mut tasks: Vec<Task> = vec![Task {
        name: "main".into(),
        body: Some(Box::pin(main)),
        crash: None,
        restart: None,
        lives: 0,
    }];
    let mut wakers: Vec<Waker> = Vec::new();
    ready
        .set
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(0);
    std::future::poll_fn(move |cx| {
        *ready.outer.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
        loop {
            for task in spawner.new.borrow_mut().drain(..) {
                ready
                    .set
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(tasks.len());
                tasks.push(task);
            }
            while wakers.len() < tasks.len() {
                wakers.push(Waker::from(Arc::new(TaskWaker {
                    id: wakers.len(),
                    ready: ready.clone(),
                })));
            }
            let id = {
                let mut set = ready.set.lock().unwrap_or_else(|e| e.into_inner());
                if set.is_empty() {
                    return Poll::Pending;
                }
                let at = (random::u64() % set.len() as u64) as usize;
                let Some(&id) = set.iter().nth(at) else {
                    return Poll::Pending;
                };
                set.remove(&id);
                id
            };
            let task = &mut tasks[id];
            let Some(body) = task.body.as_mut() else {
                continue;
            };
            let mut context = Context::from_waker(&wakers[id]);
            let done = body.as_mut().poll(&mut context).is_ready();
            observer.polled(&task.name);
            if done {
                task.body = None;
                if id == 0 {
                    return Poll::Ready(());
                }
            } else if task.crash.as_ref().is_some_and(Crash::crashed) {
                restart(task, id, &ready, observer);
            }
            // A process also dies at a call of a task it left running (a writer's
            // remover): its own body may wait for that task and never be polled again.
            for (id, task) in tasks.iter_mut().enumerate() {
                if task.body.is_some() && task.crash.as_ref().is_some_and(Crash::crashed) {
                    restart(task, id, &ready, observer);
                }
            }
        }
    })
    .await;
}

/// Drops a crashed task's body and starts its next life (if it restarts).
fn restart(task: &mut Task, id: usize, ready: &Ready, observer: &dyn Observer) {
    observer.crashed(&task.name);
    task.body = None;
    if let Some(factory) = &task.restart {
        task.lives += 1;
        let (body, crash) = factory(task.lives);
        task.body = Some(body);
        task.crash = crash;
        ready
            .set
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id);
    }
}

//! The clock of `decider loadtest`'s open-loop schedule: hands the request loop each
//! request's scheduled send time and target once that time has come.
//!
//! The time from a request's scheduled send time to its send is the generator's own delay,
//! and it is measured as the target's latency. So the thread that sends should be the thread
//! the kernel wakes at that time:
//! - On Linux a timerfd, armed for the next send time, is watched by the runtime's own event
//!   loop: one thread wake-up per request.
//! - Elsewhere (or where a timerfd cannot be made) a timer thread sleeps to each send time
//!   and hands it to the runtime over a channel: two wake-ups per request, the runtime
//!   thread's queued behind the timer thread's, so requests start later.
//!
//! tokio's own timer is not used: its wheel has 1 ms granularity, which would bunch requests
//! at high rates and add up to 1 ms to every latency measured from the schedule.

use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Which clock to use (`Auto`: the timerfd where there is one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// The timerfd on Linux, else the timer thread.
    Auto,
    /// A timer thread and a channel.
    Thread,
    /// A timerfd in the runtime's event loop (Linux).
    Timerfd,
}

/// The open-loop schedule: `total` requests, one every `interval` from `start`, to `targets`
/// targets in turn. Round `c` (requests `c·k .. c·k + k`) starts with target `c mod k`, so
/// every target gets the same number of requests and none is always first.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    /// The first request's send time.
    pub start: Instant,
    /// Time between consecutive sends (to any target).
    pub interval: Duration,
    /// Number of targets, at least 1.
    pub targets: usize,
    /// Number of requests, all targets together.
    pub total: u64,
}

impl Schedule {
    /// Request `i`'s send time and target.
    pub fn at(&self, i: u64) -> (Instant, usize) {
        let k = self.targets.max(1) as u64;
        let round = i / k;
        (
            self.start + self.interval.mul_f64(i as f64),
            ((i + round) % k) as usize,
        )
    }
}

/// Yields the schedule's `(send time, target)` pairs in order, each once its time has come
/// (at once when it is already past).
pub enum Ticker {
    /// A timerfd in the runtime's event loop.
    #[cfg(target_os = "linux")]
    Timerfd(fd::Timer),
    /// A timer thread and a channel.
    Thread {
        /// The pairs, sent by the timer thread when due.
        rx: mpsc::UnboundedReceiver<(Instant, usize)>,
        /// The timer thread (ends after the last pair, or once `rx` is dropped).
        thread: Option<std::thread::JoinHandle<()>>,
    },
}

impl Clock {
    /// The clock `Ticker::start` will use for this choice here: `Timerfd` where one can be
    /// made, else `Thread`.
    pub fn resolve(self) -> Clock {
        #[cfg(target_os = "linux")]
        if self != Clock::Thread && fd::available() {
            return Clock::Timerfd;
        }
        Clock::Thread
    }
}

impl Ticker {
    /// Starts the clock for `schedule`. Must be called within a tokio runtime with I/O
    /// enabled. `Clock::Timerfd` where there is none falls back to the timer thread.
    pub fn start(schedule: Schedule, clock: Clock) -> Ticker {
        #[cfg(target_os = "linux")]
        if clock != Clock::Thread {
            if let Ok(t) = fd::Timer::new(schedule) {
                return Ticker::Timerfd(t);
            }
        }
        let _ = clock;
        let (tx, rx) = mpsc::unbounded_channel();
        let thread = std::thread::spawn(move || {
            for i in 0..schedule.total {
                let (at, target) = schedule.at(i);
                let now = Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                if tx.send((at, target)).is_err() {
                    break;
                }
            }
        });
        Ticker::Thread {
            rx,
            thread: Some(thread),
        }
    }

    /// Which clock this is.
    #[cfg(test)]
    pub fn clock(&self) -> Clock {
        match self {
            #[cfg(target_os = "linux")]
            Ticker::Timerfd(_) => Clock::Timerfd,
            Ticker::Thread { .. } => Clock::Thread,
        }
    }

    /// The next request's send time and target, once that time has come; `None` after the
    /// last. Cooperates with the runtime's budget, so a loop that is behind the schedule
    /// still lets the requests it started make progress.
    pub async fn next(&mut self) -> Option<(Instant, usize)> {
        match self {
            #[cfg(target_os = "linux")]
            Ticker::Timerfd(t) => t.next().await,
            Ticker::Thread { rx, thread } => {
                let next = rx.recv().await;
                if next.is_none() {
                    if let Some(h) = thread.take() {
                        let _ = h.join();
                    }
                }
                next
            }
        }
    }
}

#[cfg(target_os = "linux")]
mod fd {
    use super::Schedule;
    use rustix::time::{
        timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags,
        TimerfdTimerFlags, Timespec,
    };
    use std::io;
    use std::os::fd::OwnedFd;
    use std::time::{Duration, Instant};
    use tokio::io::unix::AsyncFd;

    /// Whether a timerfd can be made here (a sandbox can refuse it).
    pub fn available() -> bool {
        make().is_ok()
    }

    fn make() -> io::Result<OwnedFd> {
        Ok(timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?)
    }

    /// A one-shot monotonic timerfd, re-armed for each send time.
    pub struct Timer {
        fd: AsyncFd<OwnedFd>,
        schedule: Schedule,
        next: u64,
    }

    impl Timer {
        pub fn new(schedule: Schedule) -> io::Result<Timer> {
            let fd = make()?;
            // SAFETY: `fd` is an open timerfd that this `AsyncFd` owns from here on; nothing
            // else closes or replaces it (tokio's I/O-safety requirement for `register`).
            let fd = unsafe { AsyncFd::register(fd)? };
            Ok(Timer {
                fd,
                schedule,
                next: 0,
            })
        }

        pub async fn next(&mut self) -> Option<(Instant, usize)> {
            if self.next >= self.schedule.total {
                return None;
            }
            let (at, target) = self.schedule.at(self.next);
            self.next += 1;
            let now = Instant::now();
            if at > now {
                if let Err(_e) = self.sleep(at - now).await {
                    // A timerfd that fails after it was made: keep the schedule
                    // with tokio's coarser timer rather than abort the run.
                    tokio::time::sleep_until(at.into()).await;
                }
            } else {
                tokio::task::consume_budget().await;
            }
            Some((at, target))
        }

        /// Arms the timer `d` from now and waits for it to expire.
        async fn sleep(&self, d: Duration) -> io::Result<()> {
            let zero = Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // At least 1 ns: an all-zero value would disarm the timer instead.
            let value = Timespec {
                tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(d.subsec_nanos()).max(1),
            };
            timerfd_settime(
                self.fd.get_ref(),
                TimerfdTimerFlags::empty(),
                &Itimerspec {
                    it_interval: zero,
                    it_value: value,
                },
            )?;
            loop {
                let mut ready = self.fd.readable().await?;
                let mut expirations = [0u8; 8];
                // A read before expiry is WouldBlock: `try_io` then clears the stale
                // readiness and the loop waits again.
                match ready.try_io(|fd| {
                    rustix::io::read(fd.get_ref(), &mut expirations).map_err(io::Error::from)
                }) {
                    Ok(Ok(_)) => return Ok(()),
                    Ok(Err(e)) => return Err(e),
                    Err(_would_block) => continue,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_rotates_which_target_goes_first() {
        let s = Schedule {
            start: Instant::now(),
            interval: Duration::from_millis(1),
            targets: 2,
            total: 6,
        };
        let order: Vec<usize> = (0..6).map(|i| s.at(i).1).collect();
        assert_eq!(order, [0, 1, 1, 0, 0, 1]);
        assert_eq!(s.at(4).0 - s.at(0).0, Duration::from_millis(4));
    }

    /// Each clock yields every pair of the schedule in order, none before its time, and
    /// (on an idle machine) close to it.
    async fn ticks(clock: Clock) -> (Clock, Vec<Duration>) {
        let schedule = Schedule {
            start: Instant::now() + Duration::from_millis(5),
            interval: Duration::from_micros(1500),
            targets: 3,
            total: 60,
        };
        let mut t = Ticker::start(schedule, clock);
        let mut lags = Vec::new();
        let mut i = 0;
        while let Some((at, target)) = t.next().await {
            let now = Instant::now();
            assert_eq!((at, target), schedule.at(i));
            assert!(now >= at, "pair {i} came {:?} early", at - now);
            lags.push(now - at);
            i += 1;
        }
        assert_eq!(i, 60);
        (t.clock(), lags)
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn both_clocks_yield_the_schedule_on_time() {
        let (clock, lags) = run(ticks(Clock::Thread));
        assert_eq!(clock, Clock::Thread);
        assert!(lags.iter().max().expect("lags") < &Duration::from_millis(250));
        let (clock, lags) = run(ticks(Clock::Auto));
        assert_eq!(clock, Clock::Auto.resolve());
        if cfg!(target_os = "linux") {
            assert_eq!(clock, Clock::Timerfd);
        }
        assert!(lags.iter().max().expect("lags") < &Duration::from_millis(250));
    }

    #[test]
    fn a_clock_behind_its_schedule_yields_the_late_pairs_at_once() {
        run(async {
            let schedule = Schedule {
                start: Instant::now() - Duration::from_secs(1),
                interval: Duration::from_micros(10),
                targets: 1,
                total: 1000,
            };
            for clock in [Clock::Thread, Clock::Timerfd] {
                let began = Instant::now();
                let mut t = Ticker::start(schedule, clock);
                let ran = std::rc::Rc::new(std::cell::Cell::new(0u32));
                let local = tokio::task::LocalSet::new();
                let mut n = 0;
                let mut ran_before_the_end = 0;
                local
                    .run_until(async {
                        while t.next().await.is_some() {
                            n += 1;
                            let counter = ran.clone();
                            tokio::task::spawn_local(async move { counter.set(counter.get() + 1) });
                            ran_before_the_end = ran.get();
                        }
                    })
                    .await;
                assert_eq!(n, 1000);
                assert!(began.elapsed() < Duration::from_millis(500), "{clock:?}");
                // The loop gave way to the tasks it started while it caught up.
                assert!(
                    ran_before_the_end > 0,
                    "{clock:?}: no task ran before the end"
                );
            }
        });
    }
}

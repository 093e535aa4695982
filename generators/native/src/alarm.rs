//! A deadline for a mio poll, to the microsecond.
//!
//! `epoll_wait` takes its timeout in whole milliseconds and mio rounds a shorter
//! one up, so a loop that sleeps in `poll(timeout)` wakes 0-1 ms after each
//! timer's due time (plus the kernel's timer slack): a 0.2 ms think time from a
//! trace became 1-2 ms (issue 19: example.pcap's requests on a persistent
//! connection follow the previous response by a median 0.2 ms at the monitor).
//! An [`Alarm`] is a `CLOCK_MONOTONIC` timerfd registered in the poll: armed at
//! the loop's next due time (absolute, so no drift), it makes the poll return
//! then, whatever the poll's own (coarse) timeout. Re-arming is a syscall only
//! when the due time changes.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};

/// The poll token both loops register their alarm under (connections' and
/// listeners' tokens are small indices, never this).
pub const ALARM: Token = Token(usize::MAX);

pub struct Alarm {
    fd: OwnedFd,
    armed: u64,
}

impl Alarm {
    /// A timerfd registered in `registry` under `token` (readable when it fires).
    pub fn new(registry: &Registry, token: Token) -> Result<Alarm, String> {
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(format!(
                "timerfd_create: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: a new descriptor this value owns from here on
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        registry
            .register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)
            .map_err(|e| format!("timerfd register: {e}"))?;
        Ok(Alarm { fd, armed: 0 })
    }

    /// Fire at `at_ns` (absolute `CLOCK_MONOTONIC` ns, as `util::mono_ns`); a time
    /// already past fires at once.
    pub fn set(&mut self, at_ns: u64) {
        if at_ns == self.armed {
            return;
        }
        self.armed = at_ns;
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (at_ns % 1_000_000_000).max(1) as libc::c_long,
            },
        };
        unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            );
        }
    }

    /// After the alarm's token came out of the poll: consume the expiry, so the next
    /// `set` arms it again even for the same time.
    pub fn fired(&mut self) {
        let mut buf = [0u8; 8];
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        self.armed = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::mono_ns;
    use mio::{Events, Poll};

    /// Lateness (ns) of `n` deadlines `gap_ns` apart, waited for as the loops do: the
    /// alarm armed at the due time, the poll's own timeout `coarse`.
    fn lateness(alarm: bool, n: usize, gap_ns: u64) -> Vec<u64> {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(8);
        let mut a = Alarm::new(poll.registry(), Token(7)).unwrap();
        let mut late = Vec::new();
        for _ in 0..n {
            let due = mono_ns() + gap_ns;
            loop {
                let now = mono_ns();
                if now >= due {
                    late.push(now - due);
                    break;
                }
                if alarm {
                    a.set(due);
                    poll.poll(&mut events, Some(std::time::Duration::from_millis(100)))
                        .unwrap();
                } else {
                    let wait = std::time::Duration::from_nanos(due - now);
                    poll.poll(&mut events, Some(wait)).unwrap();
                }
                if events.iter().any(|e| e.token() == Token(7)) {
                    a.fired();
                }
            }
        }
        late.sort_unstable();
        late
    }

    #[test]
    fn a_sub_millisecond_deadline_is_met_to_the_microsecond() {
        // 200 us deadlines: the poll's timeout alone wakes a whole millisecond late
        // (mio rounds it up); the alarm wakes within tens of microseconds (the median
        // here, on a busy 2-core CI host, is well under 0.3 ms)
        let plain = lateness(false, 40, 200_000);
        let with = lateness(true, 40, 200_000);
        eprintln!(
            "lateness of 200 us deadlines, median / max ns: poll alone {} / {}, \
                   alarm {} / {}",
            plain[20], plain[39], with[20], with[39]
        );
        assert!(
            plain[plain.len() / 2] >= 500_000,
            "poll alone: median {} ns",
            plain[20]
        );
        assert!(
            with[with.len() / 2] < 300_000,
            "alarm: median {} ns",
            with[20]
        );
    }

    #[test]
    fn rearming_for_the_same_time_after_it_fired_fires_again() {
        let mut poll = Poll::new().unwrap();
        let mut events = Events::with_capacity(8);
        let mut a = Alarm::new(poll.registry(), Token(1)).unwrap();
        for _ in 0..2 {
            let due = mono_ns() + 1_000_000;
            a.set(due);
            let t0 = mono_ns();
            poll.poll(&mut events, Some(std::time::Duration::from_secs(2)))
                .unwrap();
            assert!(events.iter().any(|e| e.token() == Token(1)));
            assert!(mono_ns() - t0 < 1_000_000_000);
            a.fired();
            a.set(due); // already past: fires at once
            poll.poll(&mut events, Some(std::time::Duration::from_secs(2)))
                .unwrap();
            assert!(events.iter().any(|e| e.token() == Token(1)));
            a.fired();
        }
    }
}

//! The direct path's socket (fast.rs): read and written on the calling
//! thread, which waits for a fast API's answer in the kernel itself.
//!
//! A tokio `TcpStream` learns of readiness only through its runtime's I/O
//! driver: the answer wakes the plugin's worker (parked in `epoll_wait`),
//! which wakes the host's thread that polls the call. Two thread wake-ups a
//! call, each a scheduling delay on a busy machine (docs/benchmarks.md,
//! "OpenAPI source"). This socket is a plain non-blocking one instead:
//! while an answer is awaited, a read that finds nothing waits in `ppoll`
//! for at most the exchange's inline budget, so the kernel wakes the
//! calling thread itself, as it does a direct HTTP client. Only an answer
//! slower than that registers the socket with the plugin's reactor
//! (tokio's `AsyncFd`) and parks the call as any future does; the
//! registration is dropped again when the exchange is over, so an idle
//! connection (and a fast exchange) never wakes the plugin's worker.
//!
//! The budget is the caller's (fast.rs keeps it short, and zero for an API
//! that answers slowly): the calling thread is the host's, blocked for that
//! long at most.

use std::io::{self, Write as _};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// No exchange is under way.
const IDLE: u32 = u32::MAX;

/// The raw descriptor the reactor watches; the socket owns it.
struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// What the connection's owner (fast.rs) and its socket tell each other.
/// Used by the one task that drives the connection.
pub struct Mode {
    fd: RawFd,
    /// How long the exchange may wait inline (µs), or [`IDLE`].
    budget: AtomicU32,
    /// The request was (at least partly) written.
    wrote: AtomicBool,
    /// The exchange's one inline wait is spent.
    spent: AtomicBool,
    /// A read found nothing and arranged no wake-up.
    starved: AtomicBool,
    /// The registration with the plugin's reactor, while there is one, and
    /// what it is for. Dropped by the socket before its descriptor closes.
    reactor: Mutex<Option<(AsyncFd<Fd>, Interest)>>,
}

impl Mode {
    /// Between exchanges: no inline wait, and no registration (an idle
    /// connection then never wakes the plugin's worker).
    pub fn idle(&self) {
        self.budget.store(IDLE, Relaxed);
        self.unregister();
    }

    /// An exchange starts: once the request is written, the answer may be
    /// waited for inline up to `budget`, once.
    pub fn exchange(&self, budget: Duration) {
        let us = u32::try_from(budget.as_micros()).unwrap_or(IDLE - 1);
        self.budget.store(us.min(IDLE - 1), Relaxed);
        self.wrote.store(false, Relaxed);
        self.spent.store(false, Relaxed);
        self.starved.store(false, Relaxed);
    }

    /// Called when the connection's driver and the exchange both wait.
    /// `Ready`: poll the driver again (the answer is there, or readiness
    /// may be); `Pending`: a wake-up is arranged.
    pub fn poll_starved(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.starved.swap(false, Relaxed) {
            // The driver waits for something else (room to write, hyper's
            // own channels), which wakes the task itself.
            return Poll::Pending;
        }
        let budget = self.budget.load(Relaxed);
        if budget != IDLE
            && budget > 0
            && self.wrote.load(Relaxed)
            && !self.spent.swap(true, Relaxed)
            && wait_readable(self.fd, budget)
        {
            return Poll::Ready(Ok(()));
        }
        self.poll_ready(cx, Interest::READABLE)
    }

    /// Waits (registered with the plugin's reactor) for `interest`.
    fn poll_ready(&self, cx: &mut Context<'_>, interest: Interest) -> Poll<io::Result<()>> {
        let mut reactor = self.reactor.lock().unwrap_or_else(PoisonError::into_inner);
        let have = reactor.as_ref().map(|(_, i)| *i);
        if have.is_none_or(|i| (i | interest) != i) {
            let wanted = have.map_or(interest, |i| i | interest);
            // Deregistered before registering again.
            *reactor = None;
            // SAFETY: the descriptor is the socket's, which drops this
            // registration before it closes the descriptor (`Socket`'s Drop).
            let registered = unsafe { AsyncFd::register_with_interest(Fd(self.fd), wanted) }
                .map_err(|e| io::Error::other(e.to_string()))?;
            *reactor = Some((registered, wanted));
        }
        let Some((registered, _)) = reactor.as_ref() else {
            return Poll::Ready(Err(io::Error::other("no registration")));
        };
        let ready = if interest.is_writable() {
            registered.poll_write_ready(cx)
        } else {
            registered.poll_read_ready(cx)
        };
        match ready {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(mut seen)) => {
                seen.clear_ready();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        }
    }

    fn unregister(&self) {
        let old = self
            .reactor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(old);
    }
}

/// Waits up to `us` µs for `fd` to be readable; true when it is (or has an
/// error or a hang-up to report, which the next read returns).
fn wait_readable(fd: RawFd, us: u32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    #[cfg(target_os = "linux")]
    let n = {
        let timeout = libc::timespec {
            tv_sec: libc::time_t::from(us / 1_000_000),
            tv_nsec: libc::c_long::from((us % 1_000_000) * 1_000),
        };
        // SAFETY: one valid pollfd and a valid timespec for the call's
        // duration; no signal mask.
        unsafe { libc::ppoll(&mut poll, 1, &timeout, std::ptr::null()) }
    };
    // Elsewhere `poll`, whose timeout is in whole milliseconds.
    #[cfg(not(target_os = "linux"))]
    let n = {
        let ms = libc::c_int::try_from(us.div_ceil(1_000)).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the call's duration.
        unsafe { libc::poll(&mut poll, 1, ms) }
    };
    n > 0
}

/// One `recv` into `buf`'s unfilled part, left uninitialised: hyper's read
/// buffer is kilobytes, and zeroing it before every read (std's `Read`
/// wants initialised memory) cost more than the rest of the exchange.
fn recv(stream: &std::net::TcpStream, buf: &mut ReadBuf<'_>) -> io::Result<()> {
    // SAFETY: `recv` only writes the bytes it reports, which are then
    // marked initialised and filled; nothing uninitialised is read.
    unsafe {
        let dst = buf.unfilled_mut();
        let n = libc::recv(stream.as_raw_fd(), dst.as_mut_ptr().cast(), dst.len(), 0);
        let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
        buf.assume_init(n);
        buf.advance(n);
    }
    Ok(())
}

pub struct Socket {
    stream: std::net::TcpStream,
    mode: Arc<Mode>,
}

impl Socket {
    /// `stream` must be non-blocking.
    pub fn new(stream: std::net::TcpStream) -> io::Result<(Self, Arc<Mode>)> {
        let mode = Arc::new(Mode {
            fd: stream.as_raw_fd(),
            budget: AtomicU32::new(IDLE),
            wrote: AtomicBool::new(false),
            spent: AtomicBool::new(false),
            starved: AtomicBool::new(false),
            reactor: Mutex::new(None),
        });
        let socket = Socket {
            stream,
            mode: mode.clone(),
        };
        Ok((socket, mode))
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // Before `stream` closes the descriptor.
        self.mode.unregister();
    }
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match recv(&this.stream, buf) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // The exchange arranges the wake-up, if it waits at all
                    // (`Mode::poll_starved`).
                    this.mode.starved.store(true, Relaxed);
                    return Poll::Pending;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match (&this.stream).write(buf) {
                Ok(n) => {
                    this.mode.wrote.store(true, Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // A full send buffer: rare for a request.
                    ready!(this.mode.poll_ready(cx, Interest::WRITABLE))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.stream.shutdown(std::net::Shutdown::Write))
    }
}

//! The baselines themselves, plain Rust: what the hardware does without rocketha's logic in
//! the way.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use memmap2::MmapOptions;

/// A new (or emptied) file of `total` bytes, for a baseline to map.
fn sized_file(path: &Path, total: usize) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)?;
    file.set_len(total as u64)?;
    Ok(file)
}

/// Copies `data` over and over into a preallocated, prefaulted mmap of `total` bytes: the
/// ceiling of an append path.
pub(crate) fn mmap_memcpy(dir: &Path, data: &[u8], total: usize) -> std::io::Result<Duration> {
    let path = dir.join("baseline.mmap");
    let file = sized_file(&path, total)?;
    // SAFETY: the file is ours alone and outlives the map.
    let mut map = unsafe { MmapOptions::new().len(total).populate().map_mut(&file)? };
    let started = Instant::now();
    let mut at = 0;
    while at + data.len() <= total {
        map[at..at + data.len()].copy_from_slice(data);
        at += data.len();
    }
    let took = started.elapsed();
    drop(map);
    let _ = std::fs::remove_file(&path);
    Ok(took)
}

fn pair() -> std::io::Result<(TcpStream, TcpStream)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let client = TcpStream::connect(listener.local_addr()?)?;
    let (server, _) = listener.accept()?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    Ok((client, server))
}

/// Sends `total` bytes in `chunk`-sized writes over loopback TCP to a reader thread that
/// drops them: the ceiling of replication throughput.
pub(crate) fn tcp_copy(total: usize, chunk: usize) -> std::io::Result<Duration> {
    tcp_copy_with(total, chunk, |mut rx| {
        let mut buf = vec![0u8; 4 * 1024 * 1024];
        let mut got = 0;
        loop {
            match rx.read(&mut buf)? {
                0 => return Ok(got),
                n => got += n,
            }
        }
    })
}

/// As [`tcp_copy`], but the reader keeps the bytes the way a replica must at the least: read
/// straight into the mapping of a new file in `dir`, with no copy of its own and no flush,
/// the page cache filling each new page on first touch as for any new file.
pub(crate) fn tcp_copy_to_file(
    dir: &Path,
    total: usize,
    chunk: usize,
) -> std::io::Result<Duration> {
    let path = dir.join("baseline.received");
    let file = sized_file(&path, total)?;
    let took = tcp_copy_with(total, chunk, move |mut rx| {
        // SAFETY: the file is ours alone and outlives the map.
        let mut map = unsafe { MmapOptions::new().len(total).map_mut(&file)? };
        let mut got = 0;
        while got < total {
            match rx.read(&mut map[got..])? {
                0 => break,
                n => got += n,
            }
        }
        Ok(got)
    });
    let _ = std::fs::remove_file(&path);
    took
}

fn tcp_copy_with(
    total: usize,
    chunk: usize,
    receive: impl FnOnce(TcpStream) -> std::io::Result<usize> + Send + 'static,
) -> std::io::Result<Duration> {
    let (mut tx, rx) = pair()?;
    let reader = std::thread::spawn(move || receive(rx));
    let data = vec![7u8; chunk];
    let started = Instant::now();
    let mut sent = 0;
    while sent < total {
        let n = chunk.min(total - sent);
        tx.write_all(&data[..n])?;
        sent += n;
    }
    drop(tx);
    let got = reader
        .join()
        .map_err(|_| std::io::Error::other("reader panicked"))??;
    if got != total {
        return Err(std::io::Error::other("short copy"));
    }
    Ok(started.elapsed())
}

/// A loopback TCP connection to an echo thread: one 8-byte round trip per call. A blocking
/// call that another thread completes, and nothing else: what every acked put costs its
/// producer at least.
pub(crate) struct PingPong {
    stream: TcpStream,
    echo: Option<std::thread::JoinHandle<()>>,
}

impl PingPong {
    pub(crate) fn new() -> std::io::Result<Self> {
        let (stream, mut b) = pair()?;
        let echo = std::thread::spawn(move || {
            let mut buf = [0u8; 8];
            while b.read_exact(&mut buf).is_ok() && b.write_all(&buf).is_ok() {}
        });
        Ok(Self {
            stream,
            echo: Some(echo),
        })
    }

    pub(crate) fn round_trip(&mut self) -> std::io::Result<Duration> {
        let t = Instant::now();
        let mut buf = [7u8; 8];
        self.stream.write_all(&buf)?;
        self.stream.read_exact(&mut buf)?;
        Ok(t.elapsed())
    }
}

impl Drop for PingPong {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(echo) = self.echo.take() {
            let _ = echo.join();
        }
    }
}

/// Round trips of an 8-byte message over loopback TCP between two threads.
pub(crate) fn tcp_ping_pong(rounds: usize) -> std::io::Result<Vec<Duration>> {
    let mut p = PingPong::new()?;
    (0..rounds).map(|_| p.round_trip()).collect()
}

/// How late a thread waking at a deadline gets up: `rounds` waits of `interval` on a condition
/// variable nobody signals (as a broker's service thread sleeps until its next due time), each
/// wake-up's lateness past its deadline.
pub(crate) fn timer_wakeups(rounds: usize, interval: Duration) -> Vec<Duration> {
    let lock = std::sync::Mutex::new(());
    let cv = std::sync::Condvar::new();
    let mut late = Vec::with_capacity(rounds);
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..rounds {
        let deadline = Instant::now() + interval;
        loop {
            let now = Instant::now();
            if now >= deadline {
                late.push(now - deadline);
                break;
            }
            guard = cv
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
    late
}

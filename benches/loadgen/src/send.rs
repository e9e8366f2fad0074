//! The generator: `connections` connections, each keeping `depth` SEND_MESSAGE_V2 requests in
//! flight, spread over `threads` mio loops.
//!
//! Every request a connection sends is encoded once, before the run: slot `i` of a connection
//! always carries opaque `base + i` and is sent again as soon as its response came back, so
//! the opaques in flight stay distinct and the loop spends nothing on encoding. All requests
//! answered within one read go out again with one write.
//!
//! With a `rate` the load is open-loop instead: every slot sends once per interval (slots
//! phased evenly over it), and a send's latency counts from when it was due, not from when it
//! went out. A slow answer delays the slot's next send but not its clock, so latency at a
//! given load is not understated by the senders waiting (no coordinated omission).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mio::{Events, Interest, Poll, Token};
use rocketha_core::remoting::frame::{decode_frame, Decoded};
use rocketha_core::remoting::header::{
    CreateTopicRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
};
use rocketha_core::remoting::{request_code, response_code, RemotingCommand};
use serde_json::json;

use crate::link::{Link, MAX_FRAME_SIZE};

pub(crate) struct Options {
    pub(crate) broker: SocketAddr,
    pub(crate) connections: usize,
    pub(crate) depth: usize,
    pub(crate) threads: usize,
    pub(crate) warmup: Duration,
    pub(crate) seconds: Duration,
    pub(crate) size: usize,
    pub(crate) topic: String,
    pub(crate) queues: i32,
    pub(crate) create_topic: bool,
    /// Requests per second over every connection, paced; `None`: each slot sends again as
    /// soon as it is answered.
    pub(crate) rate: Option<f64>,
    /// Processes whose CPU time over the counted window is reported, by name.
    pub(crate) watch: Vec<(String, u32)>,
}

/// `PermName.PERM_READ | PERM_WRITE`.
const PERM_READ_WRITE: i32 = 6;
/// How long a connection's first send may keep failing (a SYNC_MASTER whose slave is still
/// catching up) before the run gives up.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn send_request(o: &Options, queue_id: i32, opaque: i32) -> io::Result<Vec<u8>> {
    let mut request = RemotingCommand::request(request_code::SEND_MESSAGE_V2, opaque);
    request.write_custom_header(&SendMessageRequestHeaderV2(SendMessageRequestHeader {
        producer_group: "rocketha-loadgen".into(),
        topic: o.topic.clone(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: o.queues,
        queue_id,
        sys_flag: 0,
        born_timestamp: now_millis(),
        flag: 0,
        // A Java producer's sync send: wait for the store's verdict (flush and slaves).
        properties: Some("WAIT\u{1}true\u{2}".into()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: None,
    }));
    request.body = vec![b'x'; o.size];
    request.encode(MAX_FRAME_SIZE).map_err(invalid)
}

/// One request and its response over a blocking connection (set-up only).
fn call(stream: &mut TcpStream, frame: &[u8]) -> io::Result<RemotingCommand> {
    stream.write_all(frame)?;
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    loop {
        if let Decoded::Frame { frame, .. } = decode_frame(&buf, MAX_FRAME_SIZE).map_err(invalid)? {
            return RemotingCommand::decode(&frame).map_err(invalid);
        }
        match stream.read(&mut chunk)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// UPDATE_AND_CREATE_TOPIC on the broker itself, as `mqadmin updateTopic -b` does: no send
/// depends on auto-creation, on rocketha and RocketMQ alike.
fn create_topic(o: &Options) -> io::Result<()> {
    let mut request = RemotingCommand::request(request_code::UPDATE_AND_CREATE_TOPIC, 0);
    request.write_custom_header(&CreateTopicRequestHeader {
        topic: o.topic.clone(),
        default_topic: "TBW102".into(),
        read_queue_nums: o.queues,
        write_queue_nums: o.queues,
        perm: PERM_READ_WRITE,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
        attributes: None,
    });
    let mut stream = TcpStream::connect(o.broker)?;
    let response = call(
        &mut stream,
        &request.encode(MAX_FRAME_SIZE).map_err(invalid)?,
    )?;
    if response.code != response_code::SUCCESS {
        return Err(invalid(format!(
            "UPDATE_AND_CREATE_TOPIC {} answered code {}: {}",
            o.topic,
            response.code,
            response.remark.unwrap_or_default()
        )));
    }
    Ok(())
}

/// A connection whose first send was answered SUCCESS: the broker takes sends on it.
fn connect_ready(o: &Options, frame: &[u8]) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect(o.broker)?;
    stream.set_nodelay(true)?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let response = call(&mut stream, frame)?;
        if response.code == response_code::SUCCESS {
            return Ok(stream);
        }
        if Instant::now() > deadline {
            return Err(invalid(format!(
                "{}: sends still answered code {} after {READY_TIMEOUT:?}: {}",
                o.broker,
                response.code,
                response.remark.unwrap_or_default()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A connection of a loop: its link and its requests, slot `i` carrying opaque `base + i`;
/// `sent_at[i]` is when slot `i`'s request went out, or was due when paced.
struct Connection {
    link: Link,
    base: i32,
    frames: Vec<Vec<u8>>,
    sent_at: Vec<Instant>,
}

/// The schedule of a paced load: each slot sends once per `interval`; slot `base + i` of
/// `slots` first at `(base + i) / slots` of an interval after the start.
#[derive(Clone, Copy)]
struct Pacing {
    interval: Duration,
    slots: usize,
}

/// Slots due later, soonest first: (when, connection in the loop, slot).
type Timers = BinaryHeap<Reverse<(Instant, usize, usize)>>;

impl Connection {
    /// Queues slot `slot`'s request to go out, counting its latency from `due`.
    fn send(&mut self, slot: usize, due: Instant) {
        self.link.out.extend_from_slice(&self.frames[slot]);
        self.sent_at[slot] = due;
    }
}

/// The paced load's clock: a `timerfd`, because epoll's own timeout counts whole milliseconds
/// (mio rounds it up), which sent every paced request up to 1 ms late and counted that as
/// latency (a p50 of 600 us at 10% load, against 160 us at 25%).
struct Clock(std::os::fd::OwnedFd);

/// The clock's token, beside the connections' (their index in the loop).
const CLOCK: Token = Token(usize::MAX);

impl Clock {
    fn new(poll: &Poll) -> io::Result<Self> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: timerfd_create takes no pointers; a non-negative result is a new fd we own.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is open and owned by nothing else.
        let clock = Clock(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) });
        let raw = clock.0.as_raw_fd();
        poll.registry()
            .register(&mut mio::unix::SourceFd(&raw), CLOCK, Interest::READABLE)?;
        Ok(clock)
    }

    /// Fires once, `after` from now (at least 1 ns: a zero time disarms a timerfd).
    fn arm(&self, after: Duration) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let after = after.max(Duration::from_nanos(1));
        // SAFETY: itimerspec is plain data.
        let mut spec: libc::itimerspec = unsafe { std::mem::zeroed() };
        spec.it_value.tv_sec = after.as_secs() as libc::time_t;
        spec.it_value.tv_nsec = libc::c_long::from(after.subsec_nanos() as i32);
        // SAFETY: the fd is ours and spec outlives the call; the old value is not asked for.
        let done =
            unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if done < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads the expiry count, so the next one is a new edge.
    fn reset(&self) {
        use std::os::fd::AsRawFd;
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `count`; EAGAIN (not fired) is fine.
        unsafe { libc::read(self.0.as_raw_fd(), count.as_mut_ptr().cast(), count.len()) };
    }
}

/// Sends every timer that is due by `now`; when the next one is due.
fn send_due(
    conns: &mut [Connection],
    timers: &mut Timers,
    now: Instant,
) -> io::Result<Option<Instant>> {
    while let Some(&Reverse((due, i, slot))) = timers.peek() {
        if due > now {
            return Ok(Some(due));
        }
        timers.pop();
        conns[i].send(slot, due);
        conns[i].link.flush()?;
    }
    Ok(None)
}

/// What one loop saw within the counted window.
#[derive(Default)]
struct Tally {
    latencies_ns: Vec<u64>,
    codes: BTreeMap<i32, u64>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_ns.extend(other.latencies_ns);
        for (code, n) in other.codes {
            *self.codes.entry(code).or_default() += n;
        }
    }
}

/// Runs one loop's connections until `end`, counting what is answered from `begin` on.
fn run_loop(
    conns: &mut [Connection],
    begin: Instant,
    end: Instant,
    pacing: Option<Pacing>,
) -> io::Result<Tally> {
    let mut poll = Poll::new()?;
    let clock = pacing.map(|_| Clock::new(&poll)).transpose()?;
    let mut timers = Timers::new();
    let start = Instant::now();
    for (i, c) in conns.iter_mut().enumerate() {
        poll.registry().register(
            &mut c.link.stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        for slot in 0..c.frames.len() {
            match pacing {
                None => c.send(slot, Instant::now()),
                Some(p) => {
                    let k = c.base as usize + slot;
                    let due = start + p.interval.mul_f64(k as f64 / p.slots as f64);
                    timers.push(Reverse((due, i, slot)));
                }
            }
        }
        c.link.flush()?;
    }
    let mut tally = Tally::default();
    let mut events = Events::with_capacity(1024);
    let mut scratch = vec![0; 64 << 10];
    loop {
        let now = Instant::now();
        if now >= end {
            return Ok(tally);
        }
        if let (Some(clock), Some(due)) = (&clock, send_due(conns, &mut timers, now)?) {
            clock.arm(due.saturating_duration_since(Instant::now()))?;
        }
        match poll.poll(&mut events, Some(end - now)) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            done => done?,
        }
        for event in &events {
            if event.token() == CLOCK {
                clock.as_ref().map(Clock::reset);
                continue;
            }
            let i = event.token().0;
            let c = &mut conns[i];
            if event.is_writable() {
                c.link.flush()?;
            }
            if !(event.is_readable() || event.is_read_closed() || event.is_error()) {
                continue;
            }
            // One clock reading for every response of this read: they arrived together.
            let now = Instant::now();
            let counted = now >= begin && now < end;
            let (base, frames, sent_at, timers) = (c.base, &c.frames, &mut c.sent_at, &mut timers);
            c.link
                .on_readable(&mut scratch, event.is_read_closed(), |frame, out| {
                    let response =
                        RemotingCommand::decode_header(frame.header, frame.serialize_type)
                            .map_err(invalid)?;
                    let slot = usize::try_from(response.opaque.wrapping_sub(base))
                        .ok()
                        .filter(|s| *s < frames.len())
                        .ok_or_else(|| {
                            invalid(format!("a response with opaque {}", response.opaque))
                        })?;
                    if counted {
                        let ns = now.saturating_duration_since(sent_at[slot]).as_nanos();
                        tally.latencies_ns.push(ns as u64);
                        *tally.codes.entry(response.code).or_default() += 1;
                    }
                    // Paced, the slot's next send is due an interval after its last was due:
                    // now if it is already late, else on a timer.
                    let due = pacing.map_or(now, |p| sent_at[slot] + p.interval);
                    if due <= now {
                        out.extend_from_slice(&frames[slot]);
                        sent_at[slot] = due;
                    } else {
                        timers.push(Reverse((due, i, slot)));
                    }
                    Ok(())
                })
                .map_err(|e| io::Error::new(e.kind(), format!("connection {base}: {e}")))?;
        }
    }
}

/// User plus system CPU seconds of this process.
fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, which is plain data.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// User plus system CPU seconds of process `pid` (all its threads), from `/proc/PID/stat`.
fn process_cpu_seconds(pid: u32) -> io::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name may hold spaces and parentheses: fields are counted after its last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> io::Result<f64> {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .ok_or_else(|| invalid(format!("/proc/{pid}/stat has no field {}", i + 3)))
    };
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // utime and stime are the 14th and 15th fields, the 12th and 13th after the name.
    Ok((ticks(11)? + ticks(12)?) / hz)
}

/// CPU seconds of this process and of every watched one, now.
fn cpu_now(o: &Options) -> io::Result<Vec<f64>> {
    let mut all = vec![own_cpu_seconds()];
    for (_, pid) in &o.watch {
        all.push(process_cpu_seconds(*pid)?);
    }
    Ok(all)
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i] as f64 / 1e3
}

pub(crate) fn run(o: &Options) -> io::Result<serde_json::Value> {
    if o.create_topic {
        create_topic(o)?;
    }
    let depth = i32::try_from(o.depth).map_err(invalid)?;
    let mut loops: Vec<Vec<Connection>> = (0..o.threads.min(o.connections))
        .map(|_| Vec::new())
        .collect();
    for i in 0..o.connections {
        let base = i32::try_from(i).map_err(invalid)? * depth;
        let queue_id = i as i32 % o.queues;
        let frames = (0..depth)
            .map(|slot| send_request(o, queue_id, base + slot))
            .collect::<io::Result<Vec<_>>>()?;
        let stream = connect_ready(o, &frames[0])?;
        stream.set_nonblocking(true)?;
        let n = loops.len();
        loops[i % n].push(Connection {
            link: Link::new(mio::net::TcpStream::from_std(stream)),
            base,
            sent_at: vec![Instant::now(); frames.len()],
            frames,
        });
    }
    let slots = o.connections * o.depth;
    let pacing = match o.rate {
        None => None,
        Some(rate) if rate > 0.0 && rate.is_finite() => Some(Pacing {
            interval: Duration::from_secs_f64(slots as f64 / rate),
            slots,
        }),
        Some(rate) => return Err(invalid(format!("--rate {rate}: not a positive rate"))),
    };
    let start = Instant::now();
    let (begin, end) = (start + o.warmup, start + o.warmup + o.seconds);
    // The main thread samples the CPU clocks at the window's edges while the loops run.
    let barrier = Barrier::new(loops.len() + 1);
    let (tallies, cpu) = std::thread::scope(|s| {
        let handles: Vec<_> = loops
            .iter_mut()
            .map(|conns| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    run_loop(conns, begin, end, pacing)
                })
            })
            .collect();
        barrier.wait();
        let cpu = (|| {
            std::thread::sleep(begin.saturating_duration_since(Instant::now()));
            let before = cpu_now(o)?;
            std::thread::sleep(end.saturating_duration_since(Instant::now()));
            let after = cpu_now(o)?;
            Ok::<_, io::Error>(after.iter().zip(before).map(|(a, b)| a - b).collect())
        })();
        let tallies: Vec<io::Result<Tally>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(invalid("a loop panicked"))))
            .collect();
        (tallies, cpu)
    });
    let mut tally = Tally::default();
    for t in tallies {
        tally.merge(t?);
    }
    let cpu: Vec<f64> = cpu?;
    tally.latencies_ns.sort_unstable();
    let seconds = o.seconds.as_secs_f64();
    let responses = tally.latencies_ns.len() as u64;
    let ok = tally
        .codes
        .get(&response_code::SUCCESS)
        .copied()
        .unwrap_or(0);
    let watched: serde_json::Map<String, serde_json::Value> = o
        .watch
        .iter()
        .zip(&cpu[1..])
        .map(|((name, _), s)| (name.clone(), json!(s)))
        .collect();
    // Quantiles for a latency CDF, like the harness's `cdf_points`.
    let cdf: Vec<f64> = (0..=100)
        .map(|p| quantile(&tally.latencies_ns, p as f64 / 100.0))
        .collect();
    Ok(json!({
        "connections": o.connections,
        "depth": o.depth,
        "rate": o.rate,
        "threads": loops.len(),
        "seconds": seconds,
        "responses": responses,
        "ok": ok,
        "responses_per_s": responses as f64 / seconds,
        "ok_per_s": ok as f64 / seconds,
        "codes": tally.codes.iter().map(|(c, n)| (c.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "p50_us": quantile(&tally.latencies_ns, 0.5),
        "p99_us": quantile(&tally.latencies_ns, 0.99),
        "p999_us": quantile(&tally.latencies_ns, 0.999),
        "latency_us_percentiles": cdf,
        "cpu_s": cpu[0],
        "watched_cpu_s": watched,
    }))
}

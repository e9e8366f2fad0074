//! `rocketha-loadgen`: the load generator of `rocketha bench remoting`, and the echo server that
//! gives that benchmark its same-run ceiling. Not part of rocketha: the wheel ships none of this.
//!
//! ```text
//! rocketha-loadgen send --broker HOST:PORT [--connections 1] [--depth 1] [--threads 1]
//!     [--seconds 10] [--warmup 1] [--size 1024] [--topic BenchRemoting] [--queues 4]
//!     [--create-topic] [--rate PER_SECOND] [--watch NAME=PID]...
//! rocketha-loadgen echo [--listen 127.0.0.1:0]
//! ```
//!
//! `send` keeps `depth` SEND_MESSAGE_V2 requests in flight on each of `connections`
//! connections (depth 1 is a synchronous producer) and prints one JSON object: responses and
//! SUCCESS answers per second over the counted `seconds`, the response codes, latency
//! quantiles, its own CPU seconds and those of every `--watch`ed process over the same window.
//! With `--rate` the requests are paced, that many a second over all connections, and each
//! latency counts from when its request was due (`send.rs`).
//! `echo` answers every request with an empty SUCCESS and prints `{"listen": ADDR}` first.
//!
//! Both speak RocketMQ's remoting protocol through rocketha-core's codec, so the generator
//! drives rocketha and Apache RocketMQ alike.

mod echo;
mod link;
mod send;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

/// `--key value` options and `--flag`s, each key at most once unless it repeats on purpose.
struct Args(BTreeMap<String, Vec<String>>);

impl Args {
    fn parse(args: impl Iterator<Item = String>, flags: &[&str]) -> Result<Self, String> {
        let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let key = arg
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument {arg:?}"))?
                .to_owned();
            let value = if flags.contains(&key.as_str()) {
                String::new()
            } else {
                args.next()
                    .ok_or_else(|| format!("--{key} needs a value"))?
            };
            map.entry(key).or_default().push(value);
        }
        Ok(Self(map))
    }

    fn flag(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    fn all(&self, key: &str) -> &[String] {
        self.0.get(key).map_or(&[], Vec::as_slice)
    }

    fn get<T: std::str::FromStr>(&self, key: &str, default: Option<T>) -> Result<T, String> {
        match self.all(key) {
            [] => default.ok_or_else(|| format!("--{key} is required")),
            [one] => one
                .parse()
                .map_err(|_| format!("--{key} {one:?} is not a valid value")),
            _ => Err(format!("--{key} given more than once")),
        }
    }

    fn seconds(&self, key: &str, default: f64) -> Result<Duration, String> {
        Duration::try_from_secs_f64(self.get(key, Some(default))?)
            .map_err(|e| format!("--{key}: {e}"))
    }
}

fn send(args: &Args) -> Result<serde_json::Value, String> {
    let watch = args
        .all("watch")
        .iter()
        .map(|w| {
            let (name, pid) = w
                .split_once('=')
                .ok_or_else(|| format!("--watch {w:?} is not NAME=PID"))?;
            let pid = pid
                .parse()
                .map_err(|_| format!("--watch {w:?}: {pid:?} is not a pid"))?;
            Ok((name.to_owned(), pid))
        })
        .collect::<Result<Vec<(String, u32)>, String>>()?;
    let options = send::Options {
        broker: args.get::<SocketAddr>("broker", None)?,
        connections: args.get("connections", Some(1))?.max(1),
        depth: args.get("depth", Some(1))?.max(1),
        threads: args.get("threads", Some(1))?.max(1),
        warmup: args.seconds("warmup", 1.0)?,
        seconds: args.seconds("seconds", 10.0)?,
        size: args.get("size", Some(1024))?,
        topic: args.get("topic", Some("BenchRemoting".to_owned()))?,
        queues: args.get("queues", Some(4))?.max(1),
        create_topic: args.flag("create-topic"),
        rate: match args.all("rate") {
            [] => None,
            _ => Some(args.get("rate", None)?),
        },
        watch,
    };
    send::run(&options).map_err(|e| e.to_string())
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_default();
    let result = match command.as_str() {
        "send" => Args::parse(argv, &["create-topic"]).and_then(|a| send(&a)),
        "echo" => Args::parse(argv, &[])
            .and_then(|a| a.get("listen", Some(SocketAddr::from(([127, 0, 0, 1], 0)))))
            .and_then(|listen| match echo::serve(listen) {
                Ok(never) => match never {},
                Err(e) => Err(e.to_string()),
            }),
        _ => Err("usage: rocketha-loadgen send --broker HOST:PORT [options] | echo".into()),
    };
    match result {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rocketha-loadgen {command}: {e}");
            ExitCode::FAILURE
        }
    }
}

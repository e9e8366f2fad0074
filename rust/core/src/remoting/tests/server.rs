//! The remoting server and client over real loopback sockets: round trips in both serialize
//! types, deferred responses, and peers that misbehave costing only their own connection.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use crate::remoting::codes::{response_code, SerializeType};
use crate::remoting::frame::{decode_frame, Decoded};
use crate::remoting::{
    ClientError, RemotingClient, RemotingCommand, RemotingServer, Responder, ServerConfig,
    ServerEventKind,
};

use super::fixture::*;

#[test]
fn echo_round_trip_in_both_serialize_types() {
    let f = start(ServerConfig::default());
    let mut c = client(&f.server);
    for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
        for body in [&b""[..], b"hello", &[7u8; 300_000][..]] {
            let response = c.invoke(echo(body, serialize_type), TIMEOUT).unwrap();
            assert!(response.is_response());
            assert_eq!(response.code, response_code::SUCCESS);
            assert_eq!(response.serialize_type, serialize_type);
            assert_eq!(response.body, body);
            assert_eq!(response.ext_fields["k"], "v");
        }
    }
}

#[test]
fn golden_json_response_bytes() {
    let f = start(ServerConfig::default());
    let mut raw = TcpStream::connect(f.server.local_addr()).unwrap();
    let header = br#"{"code":1000,"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":401}"#;
    let mut frame = Vec::new();
    frame.extend_from_slice(&((4 + header.len() + 2) as i32).to_be_bytes());
    frame.extend_from_slice(&(header.len() as i32).to_be_bytes());
    frame.extend_from_slice(header);
    frame.extend_from_slice(b"hi");
    raw.write_all(&frame).unwrap();
    let expected_header = br#"{"code":0,"flag":1,"language":"RUST","opaque":42,"serializeTypeCurrentRPC":"JSON","version":401}"#;
    let mut expected = Vec::new();
    expected.extend_from_slice(&((4 + expected_header.len() + 2) as i32).to_be_bytes());
    expected.extend_from_slice(&(expected_header.len() as i32).to_be_bytes());
    expected.extend_from_slice(expected_header);
    expected.extend_from_slice(b"hi");
    let mut got = vec![0u8; expected.len()];
    raw.set_read_timeout(Some(TIMEOUT)).unwrap();
    raw.read_exact(&mut got).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn unknown_code_is_not_supported_with_a_remark() {
    let f = start(ServerConfig::default());
    let mut c = client(&f.server);
    let response = c
        .invoke(RemotingCommand::request(9999, 0), TIMEOUT)
        .unwrap();
    assert_eq!(response.code, response_code::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        response.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
}

#[test]
fn a_panicking_processor_answers_system_error_and_the_server_goes_on() {
    let f = start(ServerConfig::default());
    let mut c = client(&f.server);
    let response = c
        .invoke(RemotingCommand::request(PANIC, 0), TIMEOUT)
        .unwrap();
    assert_eq!(response.code, response_code::SYSTEM_ERROR);
    assert!(response.remark.unwrap().contains("panicked"));
    assert_eq!(
        c.invoke(echo(b"x", SerializeType::Json), TIMEOUT)
            .unwrap()
            .body,
        b"x"
    );
}

#[test]
fn garbage_closes_only_its_own_connection() {
    let f = start(ServerConfig::default());
    let mut good = client(&f.server);
    good.invoke(echo(b"before", SerializeType::Json), TIMEOUT)
        .unwrap();
    // A well-formed frame whose JSON header is not JSON.
    let mut bad = TcpStream::connect(f.server.local_addr()).unwrap();
    bad.write_all(&[0, 0, 0, 8, 0, 0, 0, 4, b'n', b'o', b'p', b'e'])
        .unwrap();
    assert!(read_until_closed(&mut bad).is_empty());
    let event = closed_with(&f.server, "malformed command");
    assert!(event.problem, "{event:?}");
    // An unknown serialize type.
    let mut bad = TcpStream::connect(f.server.local_addr()).unwrap();
    bad.write_all(&[0, 0, 0, 4, 9, 0, 0, 0]).unwrap();
    assert!(read_until_closed(&mut bad).is_empty());
    closed_with(&f.server, "unknown remoting serialize type 9");
    assert_eq!(
        good.invoke(echo(b"after", SerializeType::RocketMq), TIMEOUT)
            .unwrap()
            .body,
        b"after"
    );
}

#[test]
fn a_2_gib_length_prefix_is_refused_from_its_first_four_bytes() {
    let f = start(ServerConfig::default());
    let mut bad = TcpStream::connect(f.server.local_addr()).unwrap();
    bad.write_all(&i32::MAX.to_be_bytes()).unwrap();
    assert!(read_until_closed(&mut bad).is_empty());
    let event = closed_with(&f.server, "exceeds the limit of 16777216 bytes");
    assert!(event.problem);
    // A smaller configured limit is honoured too.
    let small = start(ServerConfig {
        max_frame_size: 1024,
        ..ServerConfig::default()
    });
    let mut c = client(&small.server);
    assert!(c
        .invoke(echo(&[0; 100], SerializeType::Json), TIMEOUT)
        .is_ok());
    let err = c
        .invoke(echo(&[0; 2000], SerializeType::Json), TIMEOUT)
        .unwrap_err();
    // The client's own limit is 16 MiB, so the frame goes out and the server closes it.
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
    closed_with(&small.server, "exceeds the limit of 1024 bytes");
    // The next call reconnects.
    assert!(c
        .invoke(echo(b"again", SerializeType::Json), TIMEOUT)
        .is_ok());
}

#[test]
fn a_deferred_response_is_sent_from_another_thread() {
    let f = start(ServerConfig::default());
    let addr = f.server.local_addr();
    let waiter = std::thread::spawn(move || {
        let mut c = RemotingClient::connect(addr, TIMEOUT).unwrap();
        let mut request = RemotingCommand::request(DEFER, 0);
        request.serialize_type = SerializeType::RocketMq;
        c.invoke(request, TIMEOUT).unwrap()
    });
    let (_, responder) = f.deferred.recv_timeout(TIMEOUT).unwrap();
    // The loop is free meanwhile: another client is served.
    let mut other = client(&f.server);
    assert!(other
        .invoke(echo(b"x", SerializeType::Json), TIMEOUT)
        .is_ok());
    std::thread::spawn(move || {
        // Whatever opaque and type the processor puts, the request's go out.
        let mut response = RemotingCommand::request(response_code::SUCCESS, 12345);
        response.body = b"later".to_vec();
        responder.send(response);
    })
    .join()
    .unwrap();
    let response = waiter.join().unwrap();
    assert!(response.is_response());
    assert_eq!(response.body, b"later");
    assert_eq!(response.serialize_type, SerializeType::RocketMq);
}

#[test]
fn responses_for_a_closed_connection_are_dropped() {
    let f = start(ServerConfig::default());
    let mut gone = TcpStream::connect(f.server.local_addr()).unwrap();
    let request = RemotingCommand::request(DEFER, 7).encode(1 << 20).unwrap();
    gone.write_all(&request).unwrap();
    let (id, responder) = f.deferred.recv_timeout(TIMEOUT).unwrap();
    drop(gone);
    closed_with(&f.server, "closed by the peer");
    assert_eq!(*f.processor.closed.lock().unwrap(), vec![id]);
    // A new connection never receives the old one's response: ids are not reused.
    let mut fresh = TcpStream::connect(f.server.local_addr()).unwrap();
    wait_event(&f.server, "the fresh connection", |e| {
        e.kind == ServerEventKind::Connected
    });
    responder.send(RemotingCommand::request(response_code::SUCCESS, 0));
    fresh
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    let read = fresh.read(&mut byte);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "{read:?}"
    );
    let mut c = client(&f.server);
    assert!(c.invoke(echo(b"ok", SerializeType::Json), TIMEOUT).is_ok());
}

#[test]
fn a_client_that_never_reads_is_closed_at_the_output_cap() {
    let f = start(ServerConfig {
        max_output_per_connection: 256 * 1024,
        ..ServerConfig::default()
    });
    let mut hog = TcpStream::connect(f.server.local_addr()).unwrap();
    hog.set_write_timeout(Some(TIMEOUT)).unwrap();
    send_without_reading(&mut hog);
    let event = closed_with(&f.server, "max_output_per_connection");
    assert!(event.problem);
    let mut c = client(&f.server);
    assert!(c
        .invoke(echo(b"fine", SerializeType::Json), TIMEOUT)
        .is_ok());
}

#[test]
fn idle_connections_are_closed() {
    let f = start(ServerConfig {
        idle_timeout: Some(Duration::from_millis(200)),
        ..ServerConfig::default()
    });
    let mut idle = TcpStream::connect(f.server.local_addr()).unwrap();
    let mut busy = client(&f.server);
    let late = std::thread::spawn({
        let addr = f.server.local_addr();
        move || {
            // Accepted after the first scan found the earliest deadline: it has its own.
            std::thread::sleep(Duration::from_millis(100));
            let mut late = TcpStream::connect(addr).unwrap();
            read_until_closed(&mut late)
        }
    });
    // A connection that keeps talking outlives the scans that close the others.
    for _ in 0..10 {
        assert!(busy
            .invoke(echo(b"on", SerializeType::Json), TIMEOUT)
            .is_ok());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(read_until_closed(&mut idle).is_empty());
    assert!(late.join().unwrap().is_empty());
    closed_with(&f.server, "idle for 200 ms");
}

#[test]
fn oneway_requests_get_no_response() {
    let f = start(ServerConfig::default());
    let mut raw = TcpStream::connect(f.server.local_addr()).unwrap();
    let mut oneway = echo(b"x", SerializeType::Json);
    oneway.mark_oneway();
    oneway.opaque = 1;
    raw.write_all(&oneway.encode(1 << 20).unwrap()).unwrap();
    let mut normal = echo(b"y", SerializeType::Json);
    normal.opaque = 2;
    raw.write_all(&normal.encode(1 << 20).unwrap()).unwrap();
    let response = read_one(&mut raw);
    assert_eq!((response.opaque, response.body.as_slice()), (2, &b"y"[..]));
    let mut c = client(&f.server);
    c.invoke_oneway(echo(b"z", SerializeType::Json), TIMEOUT)
        .unwrap();
    assert!(c.invoke(echo(b"w", SerializeType::Json), TIMEOUT).is_ok());
}

fn read_one(stream: &mut TcpStream) -> RemotingCommand {
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = Vec::new();
    loop {
        if let Decoded::Frame { frame, .. } = decode_frame(&buf, 1 << 24).unwrap() {
            return RemotingCommand::decode(&frame).unwrap();
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before a whole frame");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A fake server that answers each request with a request of its own first, then a response
/// to another opaque, then the response: the client must take only the last.
#[test]
fn the_client_skips_server_requests_and_other_opaques() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let request = read_one(&mut s);
        let mut out = Vec::new();
        // CHECK_TRANSACTION_STATE-like: a request with the same opaque, flag 0.
        let mut push = RemotingCommand::request(39, request.opaque);
        push.body = b"not for you".to_vec();
        out.extend(push.encode(1 << 20).unwrap());
        let mut stale = RemotingCommand::response_to(&request, 1, None);
        stale.opaque = request.opaque.wrapping_add(100);
        out.extend(stale.encode(1 << 20).unwrap());
        let mut answer = RemotingCommand::response_to(&request, 0, None);
        answer.body = b"yours".to_vec();
        out.extend(answer.encode(1 << 20).unwrap());
        s.write_all(&out).unwrap();
        // Then stay silent until the client hangs up.
        wait_for_eof(&mut s);
    });
    let mut c = RemotingClient::connect(addr, TIMEOUT).unwrap();
    let response = c.invoke(echo(b"", SerializeType::Json), TIMEOUT).unwrap();
    assert_eq!(response.body, b"yours");
    // Nothing answers the next one: a timeout naming the address and the wait.
    let err = c
        .invoke(echo(b"", SerializeType::Json), Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&addr.to_string()) && text.contains("200 ms"),
        "{text}"
    );
    drop(c);
    server.join().unwrap();
}

fn wait_for_eof(stream: &mut TcpStream) {
    let mut rest = Vec::new();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let _ = stream.read_to_end(&mut rest);
}

#[test]
fn client_errors_name_the_address() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let err = RemotingClient::connect(port, TIMEOUT).err().unwrap();
    assert!(matches!(err, ClientError::Connect { .. }), "{err}");
    assert!(err.to_string().contains(&port.to_string()), "{err}");
    // Closed by the peer before answering.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let closer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _ = read_one(&mut s);
    });
    let mut c = RemotingClient::connect(addr, TIMEOUT).unwrap();
    let err = c
        .invoke(echo(b"", SerializeType::Json), TIMEOUT)
        .unwrap_err();
    closer.join().unwrap();
    assert!(matches!(err, ClientError::Closed { .. }), "{err}");
    assert_eq!(err.to_string(), format!("{addr} closed the connection"));
}

#[test]
fn a_connection_closed_mid_request_costs_nothing() {
    let f = start(ServerConfig::default());
    let frame = echo(&[5u8; 10_000], SerializeType::Json)
        .encode(1 << 20)
        .unwrap();
    let mut half = TcpStream::connect(f.server.local_addr()).unwrap();
    half.write_all(&frame[..frame.len() / 2]).unwrap();
    drop(half);
    let event = closed_with(&f.server, "closed by the peer");
    assert!(!event.problem, "{event:?}");
    let mut c = client(&f.server);
    assert!(c.invoke(echo(b"ok", SerializeType::Json), TIMEOUT).is_ok());
}

#[test]
fn the_client_reports_a_bad_frame_and_reconnects_on_the_next_call() {
    fn assert_send<T: Send>() {}
    fn assert_send_sync<T: Send + Sync>() {}
    // A client is shared behind a Mutex; a responder and the server go to other threads.
    assert_send::<RemotingClient>();
    assert_send_sync::<Responder>();
    assert_send_sync::<RemotingServer>();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let _ = read_one(&mut s);
        s.write_all(&(-5i32).to_be_bytes()).unwrap();
        // The client drops that connection and comes back on a new one.
        let (mut s, _) = listener.accept().unwrap();
        let request = read_one(&mut s);
        let answer = RemotingCommand::response_to(&request, 0, None);
        s.write_all(&answer.encode(1 << 20).unwrap()).unwrap();
        wait_for_eof(&mut s);
    });
    let mut c = RemotingClient::connect(addr, TIMEOUT).unwrap();
    let err = c
        .invoke(echo(b"", SerializeType::Json), TIMEOUT)
        .unwrap_err();
    assert!(matches!(err, ClientError::BadFrame { .. }), "{err}");
    assert_eq!(
        err.to_string(),
        format!("{addr} sent a bad frame: remoting frame length -5 is negative")
    );
    assert!(c.invoke(echo(b"", SerializeType::Json), TIMEOUT).is_ok());
    drop(c);
    server.join().unwrap();
}

/// Requests pipelined in one write are all answered (the server answers a whole read with one
/// write), and a client that half-closes after its last request still gets every response
/// before the server closes the connection.
#[test]
fn pipelined_requests_are_all_answered_even_after_a_half_close() {
    let f = start(ServerConfig::default());
    let mut raw = TcpStream::connect(f.server.local_addr()).unwrap();
    let mut burst = Vec::new();
    for opaque in 0..100 {
        let mut request = echo(format!("m{opaque}").as_bytes(), SerializeType::Json);
        request.opaque = opaque;
        burst.extend(request.encode(1 << 20).unwrap());
    }
    raw.write_all(&burst).unwrap();
    raw.shutdown(std::net::Shutdown::Write).unwrap();
    let mut got = read_until_closed(&mut raw);
    let mut opaques = Vec::new();
    while let Decoded::Frame { frame, consumed } = decode_frame(&got, 1 << 24).unwrap() {
        let response = RemotingCommand::decode(&frame).unwrap();
        assert_eq!(response.body, format!("m{}", response.opaque).as_bytes());
        opaques.push(response.opaque);
        got.drain(..consumed);
    }
    assert_eq!(opaques, (0..100).collect::<Vec<_>>());
    assert!(got.is_empty(), "{} stray bytes", got.len());
    closed_with(&f.server, "closed by the peer");
}

/// A deferred response for a connection whose socket is full (the client reads nothing for a
/// while) waits behind the responses queued before it and goes out whole once the client
/// reads, the echoes in their order.
#[test]
fn a_deferred_response_queues_behind_a_full_socket() {
    const ECHOES: i32 = 30;
    let f = start(ServerConfig::default());
    let mut raw = TcpStream::connect(f.server.local_addr()).unwrap();
    let mut deferred = RemotingCommand::request(DEFER, 0);
    deferred.serialize_type = SerializeType::RocketMq;
    raw.write_all(&deferred.encode(1 << 20).unwrap()).unwrap();
    let (_, responder) = f.deferred.recv_timeout(TIMEOUT).unwrap();
    // 30 MiB of echoes: far more than the socket buffers hold, so most wait in the server's
    // queue. The server reads them all while the client reads nothing.
    let mut writer = raw.try_clone().unwrap();
    std::thread::spawn(move || {
        for opaque in 1..=ECHOES {
            let mut request = echo(&vec![9u8; 1 << 20], SerializeType::Json);
            request.opaque = opaque;
            writer.write_all(&request.encode(1 << 24).unwrap()).unwrap();
        }
    })
    .join()
    .unwrap();
    let mut later = RemotingCommand::request(response_code::SUCCESS, 0);
    later.body = b"later".to_vec();
    responder.send(later);
    raw.set_read_timeout(Some(TIMEOUT)).unwrap();
    let (mut buf, mut chunk) = (Vec::new(), vec![0u8; 1 << 16]);
    let mut opaques = Vec::new();
    while opaques.len() < ECHOES as usize + 1 {
        match decode_frame(&buf, 1 << 24).unwrap() {
            Decoded::Frame { frame, consumed } => {
                let response = RemotingCommand::decode(&frame).unwrap();
                let expected = if response.opaque == 0 { 5 } else { 1 << 20 };
                assert_eq!(response.body.len(), expected, "opaque {}", response.opaque);
                opaques.push(response.opaque);
                buf.drain(..consumed);
            }
            Decoded::NeedMore { .. } => {
                let n = raw.read(&mut chunk).unwrap();
                assert!(n > 0, "closed after {opaques:?}");
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
    // Behind the echoes queued before it (how many the server had read by then varies), and
    // never cut into one of them: every frame above decoded whole.
    let at = opaques.iter().position(|o| *o == 0).unwrap();
    assert!(
        at > 0
            && opaques
                .iter()
                .filter(|o| **o != 0)
                .eq(&(1..=ECHOES).collect::<Vec<_>>()),
        "{opaques:?}"
    );
}

#[test]
fn a_request_of_the_servers_own_gets_its_answer_a_timeout_or_the_close() {
    let f = start(ServerConfig::default());
    let mut raw = TcpStream::connect(f.server.local_addr()).unwrap();
    raw.write_all(&RemotingCommand::request(DEFER, 5).encode(1 << 24).unwrap())
        .unwrap();
    let (_, responder) = f.deferred.recv_timeout(TIMEOUT).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let ask = |code: i32, timeout: Duration| {
        let tx = tx.clone();
        responder.invoke(
            RemotingCommand::request(code, 0),
            timeout,
            Box::new(move |r| tx.send(r).unwrap()),
        );
    };
    // Answered: the client's response, matched by the server's own opaque.
    ask(2000, TIMEOUT);
    let asked = read_one(&mut raw);
    assert_eq!(asked.code, 2000);
    assert!(!asked.is_response() && !asked.is_oneway());
    let mut answer = RemotingCommand::response_to(&asked, response_code::SUCCESS, None);
    answer.body = b"running info".to_vec();
    raw.write_all(&answer.encode(1 << 24).unwrap()).unwrap();
    let got = rx.recv_timeout(TIMEOUT).unwrap().unwrap();
    assert_eq!(got.body, b"running info");
    // Never answered: a timeout, though the loop had nothing else to wake it.
    ask(2001, Duration::from_millis(200));
    assert_eq!(read_one(&mut raw).code, 2001);
    let err = rx.recv_timeout(TIMEOUT).unwrap().unwrap_err();
    assert_eq!(err, crate::remoting::InvokeError::Timeout(200));
    // The connection closes first.
    ask(2002, TIMEOUT);
    assert_eq!(read_one(&mut raw).code, 2002);
    drop(raw);
    let err = rx.recv_timeout(TIMEOUT).unwrap().unwrap_err();
    assert_eq!(err, crate::remoting::InvokeError::Closed);
}

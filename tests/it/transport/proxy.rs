//! A fault-injecting HTTP/1.1 proxy on 127.0.0.1 in front of s3s-fs.
//!
//! Each client connection carries one request: the proxy reads it (head and
//! `Content-Length` body), records `METHOD path?query`, and either applies the first
//! matching fault rule (a 500, a 404, a delay, or closing the connection) or forwards the
//! request unchanged (except `Connection: close`) and copies the answer back, adding
//! `Connection: close` so the client never reuses the connection. [`Fault::LoseAnswer`]
//! forwards the request and then closes the client's connection without the answer: the
//! store did the work, the client never hears of it (a lost response). [`Fault::Truncate`]
//! and [`Fault::FlipByte`] forward the request and damage the answer's body (cut short, or
//! one byte flipped); rules match ranged GETs by their range (` range=bytes=a-b`, see
//! [`Rule`]) and requests by some headers (` if-none-match=*`, ` content-sha256=<value>`).
//! [`Fault::IgnoreRange`] drops the request's `Range` header (the store answers `200` with
//! the whole object, as servers that ignore `Range` do); [`Fault::StallBody`] sends the
//! answer's head and then nothing (a body that never arrives). Bodies are the raw bytes
//! after the answer's head (s3s-fs sends
//! `Content-Length` bodies, not chunked ones). The `Host` header is
//! forwarded as the client sent it, so SigV4 signatures still verify.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a matching rule does.
#[derive(Debug, Clone, Copy)]
pub enum Fault {
    /// Answer 500 InternalError.
    ServerError,
    /// Answer 404 with no body (what a HEAD of a missing object gets).
    NotFound,
    /// Wait this long, then close the connection without answering.
    Stall(Duration),
    /// Wait this long, then forward the request as usual (a slow link).
    Delay(Duration),
    /// Forward the request, wait for the store's whole answer, then close the connection
    /// without sending it (the request took effect; its answer was lost).
    LoseAnswer,
    /// Answer with this status line (e.g. `301 Moved Permanently`), extra header lines
    /// (each ending in `\r\n`) and body.
    Answer(&'static str, &'static str, &'static str),
    /// Forward the request, then send the store's status line and headers unchanged
    /// (`Content-Length` still announces the whole body) but only the first this many body
    /// bytes, and close the connection (an answer cut off in transit).
    Truncate(usize),
    /// Forward the request, then send the store's answer with the body byte at this offset
    /// inverted (XOR 0xff), same length (a corrupted answer that transport cannot notice).
    /// An offset past the body's end changes nothing.
    FlipByte(usize),
    /// Forward the request (its `Range` header is signed, so it stays); replace a `206`
    /// answer by `200 OK` with the whole object, read from the store's data directory
    /// ([`FaultProxy::whole_objects_from`]): what a server that ignores `Range` sends.
    IgnoreRange,
    /// Forward the request, send the store's status line and headers, then wait this long
    /// and close the connection without a byte of the body.
    StallBody(Duration),
}

/// Applies `fault` to requests whose method is `method` and whose path+query (followed by
/// ` range=bytes=a-b` when the request has a `Range` header, ` if-none-match=<value>` when
/// it has an `If-None-Match` header, and ` content-sha256=<value>` for its
/// `x-amz-content-sha256`) contains `contains`, for the first `times` such requests
/// (`None`: always).
#[derive(Debug, Clone)]
pub struct Rule {
    pub method: &'static str,
    pub contains: &'static str,
    pub fault: Fault,
    pub times: Option<u32>,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    seen: Vec<String>,
    matched: Vec<String>,
    injected: u32,
    /// The store's data directory, for [`Fault::IgnoreRange`].
    data_dir: Option<std::path::PathBuf>,
}

pub struct FaultProxy {
    pub endpoint: String,
    state: Arc<Mutex<State>>,
}

impl FaultProxy {
    /// Starts a proxy forwarding to `upstream` (`http://127.0.0.1:port`).
    pub fn start(upstream: &str, rules: Vec<Rule>) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("proxy addr"));
        let state = Arc::new(Mutex::new(State { rules, ..State::default() }));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let state = Arc::clone(&shared);
                let upstream = upstream.clone();
                std::thread::spawn(move || {
                    let _ = handle(client, &upstream, &state);
                });
            }
        });
        Self { endpoint, state }
    }

    /// Every request seen, as `METHOD path?query`, in arrival order.
    pub fn seen(&self) -> Vec<String> {
        self.state.lock().unwrap().seen.clone()
    }

    /// Every request seen, as `METHOD path?query` followed by ` range=bytes=a-b` when it
    /// has a `Range` header (the text rules match), in arrival order.
    pub fn seen_with_ranges(&self) -> Vec<String> {
        self.state.lock().unwrap().matched.clone()
    }

    /// Serves the whole objects of [`Fault::IgnoreRange`] from `dir` (s3s-fs keeps an object
    /// `/<bucket>/<key>` as the file `<dir>/<bucket>/<key>`).
    pub fn whole_objects_from(&self, dir: &std::path::Path) {
        self.state.lock().unwrap().data_dir = Some(dir.to_path_buf());
    }

    /// How many faults were injected.
    pub fn injected(&self) -> u32 {
        self.state.lock().unwrap().injected
    }
}

fn handle(client: TcpStream, upstream: &str, state: &Mutex<State>) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut head = request_line.clone();
    let mut content_length = 0usize;
    let mut range = String::new();
    let mut tokens = String::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if let Some(value) = lower.strip_prefix("content-length:") {
            content_length = value.trim().parse().unwrap_or(0);
        }
        if let Some(value) = lower.strip_prefix("range:") {
            range = format!(" range={}", value.trim());
        }
        if let Some(value) = lower.strip_prefix("if-none-match:") {
            tokens.push_str(&format!(" if-none-match={}", value.trim()));
        }
        if let Some(value) = line.get("x-amz-content-sha256:".len()..)
            && lower.starts_with("x-amz-content-sha256:")
        {
            tokens.push_str(&format!(" content-sha256={}", value.trim()));
        }
        if lower.starts_with("connection:") {
            continue;
        }
        head.push_str(&line);
    }
    head.push_str("connection: close\r\n\r\n");
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body)?;

    let (fault, data_dir) = {
        let mut state = state.lock().unwrap();
        state.seen.push(format!("{method} {target}"));
        state.matched.push(format!("{method} {target}{range}"));
        let matched = format!("{target}{range}{tokens}");
        let mut chosen = None;
        for rule in state.rules.iter_mut() {
            if rule.method == method && matched.contains(rule.contains) && rule.times != Some(0) {
                if let Some(times) = rule.times.as_mut() {
                    *times -= 1;
                }
                chosen = Some(rule.fault);
                break;
            }
        }
        if chosen.is_some() {
            state.injected += 1;
        }
        (chosen, state.data_dir.clone())
    };
    let mut client = client;
    match fault {
        Some(Fault::ServerError) => {
            let body = "<?xml version=\"1.0\"?><Error><Code>InternalError</Code><Message>injected by the test proxy</Message></Error>";
            let answer = format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            client.write_all(answer.as_bytes())?;
        }
        Some(Fault::NotFound) => {
            client.write_all(
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            )?;
        }
        Some(Fault::Stall(duration)) => std::thread::sleep(duration),
        Some(Fault::Answer(status, headers, body)) => {
            let answer = format!(
                "HTTP/1.1 {status}\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{}",
                body.len(),
                if method == "HEAD" { "" } else { body }
            );
            client.write_all(answer.as_bytes())?;
        }
        Some(Fault::LoseAnswer) => {
            let mut server = TcpStream::connect(upstream)?;
            server.write_all(head.as_bytes())?;
            server.write_all(&body)?;
            // The upstream closes after its answer (connection: close): read it all, drop it.
            std::io::copy(&mut server, &mut std::io::sink())?;
        }
        Some(Fault::Delay(_))
        | Some(Fault::Truncate(_))
        | Some(Fault::FlipByte(_))
        | Some(Fault::IgnoreRange)
        | Some(Fault::StallBody(_))
        | None => {
            if let Some(Fault::Delay(duration)) = fault {
                std::thread::sleep(duration);
            }
            let mut server = TcpStream::connect(upstream)?;
            server.write_all(head.as_bytes())?;
            server.write_all(&body)?;
            let mut answer = BufReader::new(server);
            // Copy the status line and headers, dropping any Connection header.
            let mut out = Vec::new();
            let mut lines = Vec::new();
            loop {
                let mut line = String::new();
                answer.read_line(&mut line)?;
                if line == "\r\n" || line.is_empty() {
                    break;
                }
                lines.push(line);
            }
            let partial = lines.first().is_some_and(|l| l.contains(" 206 "));
            if let (Some(Fault::IgnoreRange), true, Some(dir)) = (fault, partial, &data_dir) {
                let path = target.split('?').next().unwrap_or_default().trim_start_matches('/');
                let decoded = percent_encoding::percent_decode_str(path).decode_utf8_lossy();
                let whole = std::fs::read(dir.join(decoded.as_ref()))?;
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    whole.len()
                );
                client.write_all(head.as_bytes())?;
                client.write_all(&whole)?;
                client.flush()?;
                return client.shutdown(std::net::Shutdown::Both);
            }
            for line in lines {
                if !line.to_ascii_lowercase().starts_with("connection:") {
                    out.extend_from_slice(line.as_bytes());
                }
            }
            out.extend_from_slice(b"connection: close\r\n\r\n");
            client.write_all(&out)?;
            // The body is everything after the head: the store closes after its answer.
            match fault {
                Some(Fault::Truncate(n)) => {
                    std::io::copy(&mut answer.take(n as u64), &mut client)?;
                }
                Some(Fault::StallBody(duration)) => {
                    client.flush()?;
                    std::thread::sleep(duration);
                }
                Some(Fault::FlipByte(offset)) => {
                    let mut rest = Vec::new();
                    answer.read_to_end(&mut rest)?;
                    if let Some(byte) = rest.get_mut(offset) {
                        *byte ^= 0xff;
                    }
                    client.write_all(&rest)?;
                }
                _ => {
                    std::io::copy(&mut answer, &mut client)?;
                }
            }
        }
    }
    client.flush()?;
    client.shutdown(std::net::Shutdown::Both)
}

//! Small HTTP/1.1 servers on 127.0.0.1 for what s3s-fs does not do:
//! * [`ListStub`] answers ListObjectsV2 the way broken stores do (a truncated page without
//!   a continuation token, the same page forever);
//! * [`RewriteProxy`] forwards every request to a real server (s3s-fs) and lets the test
//!   rewrite the answer's body (strip `NextContinuationToken`, flip a byte in transit).
//!
//! Both read one request per connection and answer with `Connection: close`. Requests are
//! SigV4-signed by the client; the stub does not verify signatures, the proxy forwards them
//! unchanged (the `Host` header too), so s3s-fs verifies them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One request as read off the wire.
struct Request {
    method: String,
    target: String,
    /// The request line and headers, `Connection` removed, ending before the blank line.
    head: String,
    body: Vec<u8>,
}

fn read_request(client: &TcpStream) -> std::io::Result<Request> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default().to_owned();
    let mut head = request_line.clone();
    let mut content_length = 0usize;
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
        if !lower.starts_with("connection:") {
            head.push_str(&line);
        }
    }
    let mut body = vec![0u8; content_length];
    reader.read_exact(&mut body)?;
    Ok(Request { method, target, head, body })
}

/// The value of query parameter `name` in `target` (percent-decoded).
pub fn query_value(target: &str, name: &str) -> Option<String> {
    let query = target.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (n, v) = pair.split_once('=').unwrap_or((pair, ""));
        (n == name)
            .then(|| percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned())
    })
}

fn escape_xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// How [`ListStub`] paginates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paging {
    /// Pages of `page_size` keys after `start-after`; every page but the last says
    /// `IsTruncated=true` without a `NextContinuationToken` (Huawei OBS).
    StartAfterOnly,
    /// The first page, truncated, with the same `NextContinuationToken` every time, whatever
    /// the request asks for.
    SameTokenForever,
    /// The first page, truncated, without a token, whatever the request asks for.
    NoTokenForever,
    /// The first page, truncated, with a new token every time.
    FreshTokenForever,
}

/// A ListObjectsV2-only server over a fixed, sorted set of full object names.
pub struct ListStub {
    pub endpoint: String,
    requests: Arc<Mutex<Vec<String>>>,
}

impl ListStub {
    /// Serves `keys` (full names in the bucket; sorted here) in pages of `page_size`.
    pub fn start(mut keys: Vec<String>, page_size: usize, paging: Paging) -> Self {
        keys.sort();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind list stub");
        let endpoint = format!("http://{}", listener.local_addr().expect("stub addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&requests);
        let keys = Arc::new(keys);
        std::thread::spawn(move || {
            for (n, client) in listener.incoming().enumerate() {
                let Ok(client) = client else { continue };
                let (seen, keys) = (Arc::clone(&seen), Arc::clone(&keys));
                std::thread::spawn(move || {
                    let _ = serve_list(client, &keys, page_size, paging, n, &seen);
                });
            }
        });
        Self { endpoint, requests }
    }

    /// Every request seen, as `METHOD path?query`, in arrival order.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve_list(
    mut client: TcpStream,
    keys: &[String],
    page_size: usize,
    paging: Paging,
    n: usize,
    seen: &Mutex<Vec<String>>,
) -> std::io::Result<()> {
    let request = read_request(&client)?;
    seen.lock().unwrap().push(format!("{} {}", request.method, request.target));
    let prefix = query_value(&request.target, "prefix").unwrap_or_default();
    let matching: Vec<&String> = keys.iter().filter(|k| k.starts_with(&prefix)).collect();
    let start = match (paging, query_value(&request.target, "start-after")) {
        (Paging::StartAfterOnly, Some(after)) => {
            matching.iter().position(|k| k.as_str() > after.as_str()).unwrap_or(matching.len())
        }
        _ => 0,
    };
    let page: Vec<&String> = matching.iter().skip(start).take(page_size).copied().collect();
    let truncated = match paging {
        Paging::StartAfterOnly => start + page.len() < matching.len(),
        _ => true,
    };
    let token = match paging {
        Paging::SameTokenForever => "<NextContinuationToken>same</NextContinuationToken>".into(),
        Paging::FreshTokenForever => {
            format!("<NextContinuationToken>fresh-{n}</NextContinuationToken>")
        }
        _ => String::new(),
    };
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult \
         xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>stub</Name><Prefix>{}</Prefix>\
         <KeyCount>{}</KeyCount><MaxKeys>{page_size}</MaxKeys><IsTruncated>{truncated}</IsTruncated>{token}",
        escape_xml(&prefix),
        page.len()
    );
    for key in page {
        xml.push_str(&format!(
            "<Contents><Key>{}</Key><LastModified>2025-01-02T03:04:05.000Z</LastModified>\
             <ETag>\"0\"</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass></Contents>",
            escape_xml(key)
        ));
    }
    xml.push_str("</ListBucketResult>");
    let answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{xml}",
        xml.len()
    );
    client.write_all(answer.as_bytes())?;
    client.flush()?;
    client.shutdown(std::net::Shutdown::Both)
}

/// Rewrites the body of one answer: gets the request's method and target (`path?query`)
/// and the body; returns true if it changed the body.
pub type Rewrite = dyn Fn(&str, &str, &mut Vec<u8>) -> bool + Send + Sync;

/// A forwarding proxy whose answers' bodies pass through a [`Rewrite`].
pub struct RewriteProxy {
    pub endpoint: String,
    state: Arc<Mutex<(Vec<String>, u32)>>,
}

impl RewriteProxy {
    /// Starts a proxy forwarding to `upstream` (`http://127.0.0.1:port`).
    pub fn start(upstream: &str, rewrite: Box<Rewrite>) -> Self {
        let upstream = upstream.trim_start_matches("http://").to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind rewrite proxy");
        let endpoint = format!("http://{}", listener.local_addr().expect("proxy addr"));
        let state = Arc::new(Mutex::new((Vec::new(), 0)));
        let shared = Arc::clone(&state);
        let rewrite: Arc<Rewrite> = Arc::from(rewrite);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let (state, upstream, rewrite) =
                    (Arc::clone(&shared), upstream.clone(), Arc::clone(&rewrite));
                std::thread::spawn(move || {
                    let _ = forward(client, &upstream, rewrite.as_ref(), &state);
                });
            }
        });
        Self { endpoint, state }
    }

    /// Every request seen, as `METHOD path?query`, in arrival order.
    pub fn seen(&self) -> Vec<String> {
        self.state.lock().unwrap().0.clone()
    }

    /// How many answers the rewrite changed.
    pub fn rewritten(&self) -> u32 {
        self.state.lock().unwrap().1
    }
}

/// Decodes a `Transfer-Encoding: chunked` body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else { return out };
        let size_text = String::from_utf8_lossy(&raw[..end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("0").trim(), 16)
            .unwrap_or(0);
        if size == 0 || raw.len() < end + 2 + size {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[(end + 4 + size).min(raw.len())..];
    }
}

fn forward(
    mut client: TcpStream,
    upstream: &str,
    rewrite: &Rewrite,
    state: &Mutex<(Vec<String>, u32)>,
) -> std::io::Result<()> {
    let request = read_request(&client)?;
    state.lock().unwrap().0.push(format!("{} {}", request.method, request.target));
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(request.head.as_bytes())?;
    server.write_all(b"connection: close\r\n\r\n")?;
    server.write_all(&request.body)?;
    let mut answer = Vec::new();
    server.read_to_end(&mut answer)?;
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").map_or(answer.len(), |p| p + 4);
    let (head, raw_body) = answer.split_at(split);
    let head = String::from_utf8_lossy(head).into_owned();
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    let mut body = if chunked { dechunk(raw_body) } else { raw_body.to_vec() };
    if request.method != "HEAD" && rewrite(&request.method, &request.target, &mut body) {
        state.lock().unwrap().1 += 1;
    }
    let mut out = String::new();
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        let lower = line.to_ascii_lowercase();
        let drop = lower.starts_with("connection:")
            || lower.starts_with("transfer-encoding:")
            || (request.method != "HEAD" && lower.starts_with("content-length:"));
        if !drop {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    if request.method != "HEAD" {
        out.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    out.push_str("connection: close\r\n\r\n");
    client.write_all(out.as_bytes())?;
    if request.method != "HEAD" {
        client.write_all(&body)?;
    }
    client.flush()?;
    client.shutdown(std::net::Shutdown::Both)
}

//! A fault-injecting HTTP/1.1 proxy: one thread per connection, one request per
//! connection (it asks S3 to close), so every request can be judged on its own.
//!
//! Shared by the test files that inject faults.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What to do to a matching request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer with this status and an S3 error body; S3 never sees the request.
    Status(u16),
    /// Close the connection without forwarding or answering.
    DropBeforeForward,
    /// Forward it (S3 applies it), then close without answering.
    DropAfterForward,
    /// Forward it (the service applies it), then answer with this status and an
    /// error body instead of the service's answer.
    ForwardThenStatus(u16),
    /// Wait, then forward normally.
    Delay(Duration),
    /// Wait, then close without forwarding or answering: a request still in flight
    /// when its client dies (a Lambda invocation killed at its timeout).
    Hang(Duration),
}

struct Rule {
    method: String,
    contains: String,
    /// A substring of the request head (case-insensitive) or body, if any.
    request_contains: Option<String>,
    fault: Fault,
    remaining: usize,
    /// Applies to every `every`th matching request only (1: each), the others pass.
    every: usize,
    seen: usize,
}

/// One request as the proxy saw it.
#[derive(Clone, Debug)]
pub struct Logged {
    pub method: String,
    /// The request target without the query.
    pub path: String,
    pub fault: Option<Fault>,
    /// The status the client got: S3's (or the service's) when its answer was
    /// passed on, the injected one otherwise.
    pub status: Option<u16>,
    /// The service's own status for a request forwarded despite a fault.
    pub upstream_status: Option<u16>,
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    log: Vec<Logged>,
    matched: usize,
}

pub struct Proxy {
    url: String,
    state: Arc<Mutex<State>>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to `upstream` (http://host:port).
    pub fn start(upstream: &str) -> Proxy {
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let upstream = upstream.clone();
                let state = shared.clone();
                std::thread::spawn(move || {
                    let _ = handle(client, &upstream, &state);
                });
            }
        });
        Proxy { url, state }
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    /// Applies `fault` to the next `times` requests with this method whose target
    /// (path and query) contains `contains`. Rules are tried in the order added.
    pub fn inject(&self, method: &str, contains: &str, fault: Fault, times: usize) {
        self.add_rule(method, contains, None, fault, times, 1);
    }

    /// Applies `fault` to the next `times` requests with this method whose head
    /// (request line and headers, case-insensitively) or body contains `needle`,
    /// e.g. `X-Amz-Target: AWSGlue.UpdateTable`.
    pub fn inject_request(&self, method: &str, needle: &str, fault: Fault, times: usize) {
        self.add_rule(method, "", Some(needle), fault, times, 1);
    }

    /// Applies `fault` to every `every`th request with this method whose head or body
    /// contains `needle` (a share of the calls, for as long as the proxy runs).
    pub fn inject_every(&self, method: &str, needle: &str, fault: Fault, every: usize) {
        self.add_rule(method, "", Some(needle), fault, usize::MAX, every.max(1));
    }

    fn add_rule(
        &self,
        method: &str,
        contains: &str,
        request_contains: Option<&str>,
        fault: Fault,
        remaining: usize,
        every: usize,
    ) {
        self.state.lock().unwrap().rules.push(Rule {
            method: method.to_string(),
            contains: contains.to_string(),
            request_contains: request_contains.map(str::to_string),
            fault,
            remaining,
            every,
            seen: 0,
        });
    }

    /// How many requests matched a rule so far (logged or not yet answered).
    pub fn matched(&self) -> usize {
        self.state.lock().unwrap().matched
    }

    pub fn clear(&self) {
        self.state.lock().unwrap().rules.clear();
    }

    pub fn log(&self) -> Vec<Logged> {
        self.state.lock().unwrap().log.clone()
    }

    pub fn injected(&self) -> Vec<Logged> {
        self.log()
            .into_iter()
            .filter(|l| l.fault.is_some())
            .collect()
    }
}

fn take_fault(
    state: &Mutex<State>,
    method: &str,
    target: &str,
    head: &str,
    body: &[u8],
) -> Option<Fault> {
    let mut s = state.lock().unwrap();
    let head = head.to_ascii_lowercase();
    let body = String::from_utf8_lossy(body);
    let rule = s.rules.iter_mut().find(|r| {
        r.remaining > 0
            && r.method == method
            && target.contains(&r.contains)
            && r.request_contains.as_ref().is_none_or(|needle| {
                head.contains(&needle.to_ascii_lowercase()) || body.contains(needle.as_str())
            })
    })?;
    rule.seen += 1;
    if rule.seen % rule.every != 0 {
        return None;
    }
    rule.remaining -= 1;
    let fault = rule.fault;
    s.matched += 1;
    Some(fault)
}

/// An error answer: AWS JSON for a JSON-protocol request (Glue's `X-Amz-Target`),
/// S3's XML otherwise.
fn error_response(code: u16, json: bool) -> String {
    let reason = match code {
        503 => "Service Unavailable",
        500 => "Internal Server Error",
        403 => "Forbidden",
        _ => "Error",
    };
    let (content_type, body) = if json {
        let kind = match code {
            // What Glue answers a caller over its request rate.
            400 => "ThrottlingException",
            403 => "AccessDeniedException",
            _ => "InternalServiceException",
        };
        (
            "application/x-amz-json-1.1",
            format!(r#"{{"__type":"{kind}","message":"injected by the eqdv test proxy"}}"#),
        )
    } else {
        let s3_code = match code {
            503 => "SlowDown",
            403 => "AccessDenied",
            _ => "InternalError",
        };
        (
            "application/xml",
            format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{s3_code}</Code>\
                 <Message>injected by the eqdv test proxy</Message></Error>"
            ),
        )
    };
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn log(state: &Mutex<State>, entry: Logged) {
    state.lock().unwrap().log.push(entry);
}

fn handle(client: TcpStream, upstream: &str, state: &Mutex<State>) -> std::io::Result<()> {
    client.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    // The request head.
    let mut head: Vec<String> = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            break;
        }
        head.push(line);
    }
    let Some(request_line) = head.first().cloned() else {
        return Ok(());
    };
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let header = |name: &str| {
        head[1..].iter().find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    if header("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        client.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    // The request body, raw.
    let mut body = Vec::new();
    if header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        read_chunked(&mut reader, &mut body)?;
    } else if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        body.resize(n, 0);
        reader.read_exact(&mut body)?;
    }

    let path = target.split('?').next().unwrap_or_default().to_string();
    let json = header("x-amz-target").is_some();
    let fault = take_fault(state, &method, &target, &head.join("\r\n"), &body);
    let mut entry = Logged {
        method: method.clone(),
        path,
        fault,
        status: None,
        upstream_status: None,
    };
    match fault {
        Some(Fault::Status(code)) => {
            let response = error_response(code, json);
            entry.status = Some(code);
            log(state, entry);
            client.write_all(response.as_bytes())?;
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        Some(Fault::DropBeforeForward) => {
            log(state, entry);
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        Some(Fault::Hang(d)) => {
            // Logged now: the test asks while the request still hangs.
            log(state, entry);
            std::thread::sleep(d);
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        Some(Fault::Delay(d)) => std::thread::sleep(d),
        Some(Fault::DropAfterForward | Fault::ForwardThenStatus(_)) | None => {}
    }

    // Forward with `Connection: close`, read S3's whole answer.
    let mut up = TcpStream::connect(upstream)?;
    up.set_read_timeout(Some(Duration::from_secs(120)))?;
    let mut out = Vec::with_capacity(body.len() + 1024);
    out.extend_from_slice(request_line.as_bytes());
    out.extend_from_slice(b"\r\n");
    for h in &head[1..] {
        let name = h.split(':').next().unwrap_or_default().trim();
        if ["connection", "keep-alive", "proxy-connection", "expect"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n))
        {
            continue;
        }
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out.extend_from_slice(&body);
    up.write_all(&out)?;
    let mut response = Vec::new();
    up.read_to_end(&mut response)?;
    let status = std::str::from_utf8(&response[..response.len().min(32)])
        .ok()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse::<u16>().ok());
    if fault == Some(Fault::DropAfterForward) {
        entry.upstream_status = status;
        log(state, entry);
        let _ = client.shutdown(Shutdown::Both);
        return Ok(());
    }
    if let Some(Fault::ForwardThenStatus(code)) = fault {
        entry.upstream_status = status;
        entry.status = Some(code);
        log(state, entry);
        client.write_all(error_response(code, json).as_bytes())?;
        let _ = client.shutdown(Shutdown::Both);
        return Ok(());
    }
    entry.status = status;
    log(state, entry);
    client.write_all(&response)?;
    let _ = client.shutdown(Shutdown::Write);
    Ok(())
}

/// Copies a chunked body (chunks, last chunk, trailers) as is.
fn read_chunked(reader: &mut impl BufRead, body: &mut Vec<u8>) -> std::io::Result<()> {
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line)?;
        body.extend_from_slice(size_line.as_bytes());
        let size =
            usize::from_str_radix(size_line.trim().split(';').next().unwrap_or("0").trim(), 16)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            // Trailers up to the empty line.
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line)? == 0 {
                    return Ok(());
                }
                body.extend_from_slice(line.as_bytes());
                if line == "\r\n" || line == "\n" {
                    return Ok(());
                }
            }
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        body.extend_from_slice(&chunk);
    }
}

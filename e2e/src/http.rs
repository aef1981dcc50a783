//! A deliberately tiny HTTP/1.1 client and static file server for tests that must not depend
//! on the code under test (the product's own clients are tested through these, not with them).

use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::PathBuf,
    time::Duration,
};

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one GET with `Connection: close` and reads the whole response.
pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> std::io::Result<Response> {
    request(addr, "GET", path, headers, None)
}

/// Sends one POST with a JSON body.
pub fn post_json(addr: SocketAddr, path: &str, body: &str) -> std::io::Result<Response> {
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        Some(body),
    )
}

pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<Response> {
    parse(&exchange(addr, method, path, headers, body)?)
}

/// Sends one request and reads the raw response.
fn exchange(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> std::io::Result<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(body) = body {
        req.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    req.push_str("\r\n");
    req.push_str(body.unwrap_or(""));
    stream.write_all(req.as_bytes())?;
    read_response(&mut stream)
}

/// One GET whose body is binary: the response (its `body` lossy text) and the body's bytes
/// (up to Content-Length; no chunked bodies).
pub fn get_bytes(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<(Response, Vec<u8>)> {
    let raw = exchange(addr, "GET", path, headers, None)?;
    let body = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|end| raw[end + 4..].to_vec())
        .unwrap_or_default();
    let response = parse(&raw)?;
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk_bytes(&body)? } else { body };
    Ok((response, body))
}

/// The body of a `Transfer-Encoding: chunked` answer (a streamed download).
fn dechunk_bytes(mut raw: &[u8]) -> std::io::Result<Vec<u8>> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    let mut out = Vec::new();
    loop {
        let line_end = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| bad("a chunk size line without CRLF"))?;
        let size_text = String::from_utf8_lossy(&raw[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| bad(&format!("`{size_text}` is not a chunk size")))?;
        raw = &raw[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if raw.len() < size + 2 {
            return Err(bad("the answer ended inside a chunk"));
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

/// Reads one response: up to Content-Length when the server gives one (so a latency
/// measurement does not include the connection close), else to the end of the stream.
fn read_response(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            return Ok(raw);
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            if let Some(length) = length {
                let want = end + 4 + length;
                while raw.len() < want {
                    let n = stream.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    raw.extend_from_slice(&buf[..n]);
                }
                return Ok(raw);
            }
            stream.read_to_end(&mut raw)?;
            return Ok(raw);
        }
    }
}

fn parse(raw: &[u8]) -> std::io::Result<Response> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| bad("no header end"))?;
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// A chunked text body; a malformed one reads as empty.
fn dechunk(body: &str) -> String {
    String::from_utf8_lossy(&dechunk_bytes(body.as_bytes()).unwrap_or_default()).into_owned()
}

/// Serves files from `root` on a loopback port, one thread, until the process ends.
pub fn serve_dir(root: PathBuf) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind static server");
    let addr = listener.local_addr().expect("static server address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = serve_one(&root, stream);
        }
    });
    addr
}

fn serve_one(root: &std::path::Path, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = [0u8; 8192];
    let n = stream.read(&mut buf)?;
    let req = String::from_utf8_lossy(&buf[..n]);
    let path = req.split_whitespace().nth(1).unwrap_or("/");
    let path = path.split('?').next().unwrap_or("/");
    let rel = if path == "/" {
        "index.html"
    } else {
        path.trim_start_matches('/')
    };
    let file = (!rel.contains("..")).then(|| root.join(rel));
    let (status, body) = match file.map(std::fs::read) {
        Some(Ok(b)) => ("200 OK", b),
        _ => ("404 Not Found", b"not found".to_vec()),
    };
    let ctype = match rel.rsplit('.').next() {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("wasm") => "application/wasm",
        _ => "application/octet-stream",
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(&body)
}

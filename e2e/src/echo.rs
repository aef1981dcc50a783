//! An upstream for gateway tests that answers every request with the headers the gateway
//! forwarded that a test names, as `<label>=<values>` lines (several values of one header
//! joined by `|`, `none` where absent): [`auth_headers_echo`] shows the identity and the
//! cookie. Plain HTTP/1.1 on loopback, a thread per connection.

use std::{
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpListener, TcpStream},
};

/// The identity header the auth filter sets.
const IDENTITY: &str = "x-nsight-auth-identity";

/// `identity=<x-nsight-auth-identity>` and `cookie=<cookie>`, one per line.
pub fn auth_headers_echo() -> SocketAddr {
    headers_echo(&[("identity", IDENTITY), ("cookie", "cookie")])
}

/// `identity=<x-nsight-auth-identity>` only (every value, joined by `|`).
pub fn identity_echo() -> SocketAddr {
    headers_echo(&[("identity", IDENTITY)])
}

/// Starts an echo of `shown` (`(label, header name)`) on a free loopback port; it serves until
/// the test process ends.
pub fn headers_echo(shown: &'static [(&'static str, &'static str)]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the echo upstream");
    let addr = listener.local_addr().expect("the echo's address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = serve(stream, shown);
            });
        }
    });
    addr
}

fn serve(stream: TcpStream, shown: &[(&str, &str)]) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut values: Vec<Vec<String>> = vec![Vec::new(); shown.len()];
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 {
                return Ok(());
            }
            let header = header.trim();
            if header.is_empty() {
                break;
            }
            if let Some((k, v)) = header.split_once(':') {
                if let Some(i) = shown.iter().position(|(_, h)| k.eq_ignore_ascii_case(h)) {
                    values[i].push(v.trim().to_owned());
                }
            }
        }
        let body = shown
            .iter()
            .zip(&values)
            .map(|((label, _), v)| {
                let v = if v.is_empty() {
                    "none".to_owned()
                } else {
                    v.join("|")
                };
                format!("{label}={v}")
            })
            .collect::<Vec<_>>()
            .join("\n");
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )?;
    }
}

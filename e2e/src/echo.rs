//! An upstream for gateway tests that answers every request with the headers the gateway
//! forwarded that matter to auth: `identity=<x-nsight-auth-identity>` and `cookie=<cookie>`
//! (`none` where absent), one per line. Plain HTTP/1.1 on loopback, a thread per connection.

use std::{
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpListener, TcpStream},
};

/// Starts the echo on a free loopback port; it serves until the test process ends.
pub fn auth_headers_echo() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the echo upstream");
    let addr = listener.local_addr().expect("the echo's address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = serve(stream);
            });
        }
    });
    addr
}

fn serve(stream: TcpStream) -> std::io::Result<()> {
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let (mut identity, mut cookie) = ("none".to_owned(), "none".to_owned());
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
                if k.eq_ignore_ascii_case("x-nsight-auth-identity") {
                    identity = v.trim().to_owned();
                } else if k.eq_ignore_ascii_case("cookie") {
                    cookie = v.trim().to_owned();
                }
            }
        }
        let body = format!("identity={identity}\ncookie={cookie}");
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )?;
    }
}

//! Runs the built `nsight-cloud` binary against a one-shot HTTP server started by each test on
//! 127.0.0.1 (a stand-in for the gateway that records one request and answers with a canned
//! contract response), and checks what the CLI sent, printed and exited with.
#![allow(
    clippy::unwrap_used,
    clippy::panic,
    reason = "tests fail loudly on unexpected errors"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const SID: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
const KEY: &str = "s3cret-Key.123";

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nsight-cli-it-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn config(&self) -> PathBuf {
        self.0.join("nsight-cloud.conf")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What the fake gateway received.
#[derive(Debug)]
struct Recorded {
    request_line: String,
    authorization: Option<String>,
    body: String,
}

/// Serves exactly one request on 127.0.0.1 and answers `status` with `body`.
fn one_shot_server(
    status: &'static str,
    content_type: &'static str,
    body: String,
) -> (u16, JoinHandle<Recorded>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let handle = thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let stream = loop {
            match listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    assert!(Instant::now() < deadline, "the CLI never connected");
                    thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("accept: {e}"),
            }
        };
        serve(stream, status, content_type, &body)
    });
    (port, handle)
}

fn serve(stream: TcpStream, status: &str, content_type: &str, body: &str) -> Recorded {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    let mut authorization = None;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        let value = value.trim().to_owned();
        match name.to_ascii_lowercase().as_str() {
            "authorization" => authorization = Some(value),
            "content-length" => length = value.parse().unwrap(),
            _ => {}
        }
    }
    let mut request_body = vec![0; length];
    reader.read_exact(&mut request_body).unwrap();
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    stream.flush().unwrap();
    Recorded {
        request_line: request_line.trim_end().to_owned(),
        authorization,
        body: String::from_utf8(request_body).unwrap(),
    }
}

/// Runs the CLI with `--config <config>` first, without proxies or a real home.
fn cli(dir: &TempDir, args: &[&str]) -> Output {
    let config = dir.config();
    let mut command = Command::new(env!("CARGO_BIN_EXE_nsight-cloud"));
    command
        .arg("--config")
        .arg(&config)
        .args(args)
        .env("HOME", &dir.0)
        .env_remove("NSIGHT_API_KEY")
        .env_remove("NSIGHT_CLOUD_CONFIG");
    for proxy in [
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
    ] {
        command.env_remove(proxy);
    }
    command.output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn configure(dir: &TempDir, port: u16) {
    let gw = format!("http://127.0.0.1:{port}");
    let o = cli(dir, &["configure", "--gw", &gw, "--apikey", KEY]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains(KEY) && !stderr(&o).contains(KEY));
    assert!(stdout(&o).contains("apikey: set"), "{}", stdout(&o));
    let mode = std::fs::metadata(dir.config())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn profiler_start_posts_tag_with_bearer_key_and_prints_the_collection() {
    let dir = TempDir::new();
    let answer =
        format!(r#"{{"session":"{SID}","collection":2,"sessionCreated":false,"agents":3}}"#);
    let (port, server) = one_shot_server("200 OK", "application/json", answer);
    configure(&dir, port);

    let o = cli(&dir, &["--tag", "mytag", "profiler-start"]);
    let seen = server.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(seen.request_line, "POST /coordinator/v1/start HTTP/1.1");
    assert_eq!(seen.authorization, Some(format!("Bearer {KEY}")));
    let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(body["tag"], "mytag");
    assert!(
        body.get("session").is_none_or(serde_json::Value::is_null),
        "{body}"
    );
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    assert_eq!(
        stdout(&o),
        format!("Started collection 2 in session {SID} (3 agents)\n")
    );
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
}

#[test]
fn profiler_start_with_session_and_no_agents_warns() {
    let dir = TempDir::new();
    let answer =
        format!(r#"{{"session":"{SID}","collection":1,"sessionCreated":false,"agents":0}}"#);
    let (port, server) = one_shot_server("200 OK", "application/json", answer);
    configure(&dir, port);

    let o = cli(&dir, &["profiler-start", "--session", SID]);
    let seen = server.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let body: serde_json::Value = serde_json::from_str(&seen.body).unwrap();
    assert_eq!(body, serde_json::json!({"tag": "default", "session": SID}));
    assert!(stdout(&o).contains("Started collection 1"));
    assert!(
        stderr(&o).contains("warning: no agents are connected"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn conflict_problem_exits_1_with_the_detail() {
    let dir = TempDir::new();
    let detail = "no collection is running in session 67e55044; start one with profiler-start";
    let problem =
        format!(r#"{{"type":"about:blank","title":"Conflict","status":409,"detail":"{detail}"}}"#);
    let (port, server) = one_shot_server("409 Conflict", "application/problem+json", problem);
    configure(&dir, port);

    let o = cli(&dir, &["profiler-stop"]);
    let seen = server.join().unwrap();
    assert_eq!(seen.request_line, "POST /coordinator/v1/stop HTTP/1.1");
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(err.contains(&format!("error: {detail}")), "{err}");
    assert!(err.contains("409"), "{err}");
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

/// A stand-in gateway that answers one request with `total` bytes of JSON-looking text, chunked
/// (no length given) or with a `Content-Length`; it stops when the client hangs up. Returns
/// the port and, when joined, how many bytes it managed to send.
fn flooding_server(total: u64, declare_length: bool) -> (u16, JoinHandle<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end().is_empty() {
                break;
            }
        }
        let mut stream = stream;
        let framing = if declare_length {
            format!("Content-Length: {total}")
        } else {
            "Transfer-Encoding: chunked".to_owned()
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\nConnection: close\r\n\r\n"
        );
        if stream.write_all(head.as_bytes()).is_err() {
            return 0;
        }
        let chunk = vec![b' '; 1 << 20];
        let mut sent = 0u64;
        while sent < total {
            let wrote = if declare_length {
                stream.write_all(&chunk)
            } else {
                write!(stream, "{:x}\r\n", chunk.len())
                    .and_then(|()| stream.write_all(&chunk))
                    .and_then(|()| stream.write_all(b"\r\n"))
            };
            if wrote.is_err() {
                break;
            }
            sent += chunk.len() as u64;
        }
        sent
    });
    (port, handle)
}

/// An answer larger than the CLI accepts is refused with the limit named, before it is held in
/// memory: the CLI stops reading after 64 MiB (issue 22, item 8: a 300 MiB status answer took
/// it to 632 MB RSS).
#[test]
fn an_oversized_answer_is_refused_without_reading_it_all() {
    for declare_length in [false, true] {
        let dir = TempDir::new();
        let (port, server) = flooding_server(300 << 20, declare_length);
        configure(&dir, port);
        let o = cli(&dir, &["status"]);
        let sent = server.join().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            stderr(&o).contains("larger than the 64 MiB this command accepts"),
            "{}",
            stderr(&o)
        );
        assert!(
            sent < 200 << 20,
            "the CLI read {} MiB of the 300 (declared length: {declare_length})",
            sent >> 20
        );
    }
}

#[test]
fn status_json_prints_the_server_body_unchanged() {
    let dir = TempDir::new();
    let answer = format!(
        r#"{{"tag":"default","agents":[],"activeSession":{{"id":"{SID}","tag":"default","title":null,"state":"open","createdAt":1714564800000,"endedAt":null,"collections":0}},"activeCollection":null}}"#
    );
    let (port, server) = one_shot_server("200 OK", "application/json", answer.clone());
    configure(&dir, port);

    let o = cli(&dir, &["--output", "json", "status"]);
    let seen = server.join().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        seen.request_line,
        "GET /coordinator/v1/status?tag=default HTTP/1.1"
    );
    let printed: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        printed,
        serde_json::from_str::<serde_json::Value>(&answer).unwrap()
    );
    // Key order is the server's, not alphabetical.
    let out = stdout(&o);
    assert!(out.find("\"tag\"").unwrap() < out.find("\"agents\"").unwrap());
    assert!(out.contains("\n  \"agents\": [],\n"), "{out}");
}

#[test]
fn unreachable_gateway_exits_3_and_names_the_url() {
    let dir = TempDir::new();
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    configure(&dir, port);

    let o = cli(&dir, &["status"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("http://127.0.0.1:{port}/coordinator/v1/status")),
        "{err}"
    );
    assert!(err.contains("nsight-cloud"), "{err}");
    assert!(err.contains("configure --gw"), "{err}");
}

#[test]
fn missing_config_exits_2_and_says_how_to_create_one() {
    let dir = TempDir::new();
    let o = cli(&dir, &["status"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("no configuration at"), "{err}");
    assert!(err.contains("configure --gw"), "{err}");
    assert!(err.contains(&dir.config().display().to_string()), "{err}");
}

#[test]
fn bad_session_id_exits_2_before_any_request() {
    let dir = TempDir::new();
    // No server and no configuration: the argument is refused first.
    let o = cli(&dir, &["session-end", "--session", "not-a-uuid"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a session ID"), "{}", stderr(&o));
}

#[test]
fn configure_refuses_apikey_with_issuer_and_keeps_no_file() {
    let dir = TempDir::new();
    let o = cli(
        &dir,
        &[
            "configure",
            "--gw",
            "https://gw.example.com",
            "--apikey",
            KEY,
            "--issuer",
            "https://idp.example.com",
            "--clientid",
            "c",
        ],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(!Path::new(&dir.config()).exists());
    let o = cli(&dir, &["configure", "--gw", "gw.example.com:8888"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--gw"), "{}", stderr(&o));
    assert!(!Path::new(&dir.config()).exists());
}

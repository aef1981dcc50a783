//! The browser login (OAuth2 authorization code with PKCE, RFC 8252 for native apps): a
//! loopback listener on `http://localhost:<port>/callback` (8400, or `$NSIGHT_OAUTH_REDIRECT_PORT`),
//! the authorization URL printed and opened in the browser (`$BROWSER`, else `xdg-open`),
//! the callback's `state` checked, the code exchanged with the PKCE verifier.
//!
//! ```text
//! bind localhost:port ─> authorize URL (PKCE S256, state) ─> print + open browser
//!      <─ GET /callback?code&state ── browser (after sign-in at the issuer)
//! state ok? ─> token endpoint (code + verifier) ─> StoredToken
//! ```

use std::{
    io::{BufRead, BufReader, Write},
    net::{TcpListener, TcpStream},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use oauth2::{
    basic::BasicClient, url::Url, AuthUrl, AuthorizationCode, ClientId, CsrfToken,
    PkceCodeChallenge, RedirectUrl, TokenUrl,
};

use crate::{
    config::{OAuth2, StoredToken},
    login::{refused, scopes, stored, LoginError},
};

/// The loopback port of the redirect URI unless `$NSIGHT_OAUTH_REDIRECT_PORT` says otherwise.
pub const DEFAULT_REDIRECT_PORT: u16 = 8400;
pub const REDIRECT_PORT_ENV: &str = "NSIGHT_OAUTH_REDIRECT_PORT";
/// How long the CLI waits for the browser to come back.
const WAIT_FOR_BROWSER: Duration = Duration::from_secs(300);

/// What the callback request carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Callback {
    Code {
        code: String,
        state: String,
    },
    Error {
        error: String,
        description: String,
    },
    /// Another path (e.g. `/favicon.ico`): answered 404, keep waiting.
    Other,
}

/// Parses the request line of a request to the loopback listener.
pub fn parse_callback(request_line: &str) -> Callback {
    let Some(target) = request_line.split_whitespace().nth(1) else {
        return Callback::Other;
    };
    let Ok(url) = Url::parse(&format!("http://localhost{target}")) else {
        return Callback::Other;
    };
    if url.path() != "/callback" {
        return Callback::Other;
    }
    let get = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    match (get("code"), get("error")) {
        (_, Some(error)) => Callback::Error {
            error,
            description: get("error_description").unwrap_or_default(),
        },
        (Some(code), None) => Callback::Code {
            code,
            state: get("state").unwrap_or_default(),
        },
        (None, None) => Callback::Error {
            error: "invalid_request".into(),
            description: "the callback carries no code".into(),
        },
    }
}

/// The port from `$NSIGHT_OAUTH_REDIRECT_PORT` (if set) or the default.
pub fn redirect_port(env: Option<String>) -> Result<u16, LoginError> {
    match env {
        None => Ok(DEFAULT_REDIRECT_PORT),
        Some(v) => v.trim().parse::<u16>().map_err(|_| LoginError::Callback {
            reason: format!("${REDIRECT_PORT_ENV} is {v:?}; it must be a port number"),
        }),
    }
}

fn answer(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!("<!doctype html><title>nsight-cloud</title><p>{text}</p>");
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Opens `url` with `$BROWSER` or `xdg-open`, without waiting; failure is not an error (the
/// URL is printed too).
fn open_browser(url: &str) {
    let program = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| "xdg-open".to_owned());
    let _ = Command::new(program)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
}

/// Waits for the browser's request to `/callback`, answering it (and any other request).
fn wait_for_callback(listener: &TcpListener) -> Result<(Callback, TcpStream), LoginError> {
    let deadline = Instant::now() + WAIT_FOR_BROWSER;
    listener
        .set_nonblocking(true)
        .map_err(|e| LoginError::Callback {
            reason: e.to_string(),
        })?;
    while Instant::now() < deadline {
        let mut stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            Err(e) => {
                return Err(LoginError::Callback {
                    reason: e.to_string(),
                })
            }
        };
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let mut line = String::new();
        let _ = BufReader::new(&stream).read_line(&mut line);
        match parse_callback(&line) {
            Callback::Other => answer(&mut stream, "404 Not Found", "Not the sign-in callback."),
            callback => return Ok((callback, stream)),
        }
    }
    Err(LoginError::Callback {
        reason: format!(
            "no sign-in came back within {} s; run `nsight-cloud login` again",
            WAIT_FOR_BROWSER.as_secs()
        ),
    })
}

/// Logs in with the authorization code flow at `authorization` / `token` endpoints.
pub fn login(
    o: &OAuth2,
    authorization: &str,
    token: &str,
    http: &reqwest::blocking::Client,
    now: u64,
    show: &mut dyn FnMut(&str),
) -> Result<StoredToken, LoginError> {
    let port = redirect_port(std::env::var(REDIRECT_PORT_ENV).ok())?;
    let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| LoginError::Callback {
        reason: format!(
            "cannot listen on localhost:{port} for the browser's callback ({e}); free the port \
             or set ${REDIRECT_PORT_ENV} to one registered with the issuer"
        ),
    })?;
    let bad = |what: &'static str, url: &str| LoginError::BadEndpoint {
        what,
        url: url.to_owned(),
    };
    let redirect = format!("http://localhost:{port}/callback");
    let client = BasicClient::new(ClientId::new(o.client_id.clone()))
        .set_auth_uri(
            AuthUrl::new(authorization.to_owned())
                .map_err(|_| bad("authorization endpoint", authorization))?,
        )
        .set_token_uri(TokenUrl::new(token.to_owned()).map_err(|_| bad("token endpoint", token))?)
        .set_redirect_uri(
            RedirectUrl::new(redirect.clone()).map_err(|_| bad("redirect URI", &redirect))?,
        );
    let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
    let (url, state) = client
        .authorize_url(CsrfToken::new_random)
        .add_scopes(scopes(o))
        .set_pkce_challenge(challenge)
        .url();
    show(&format!(
        "Opening the browser to sign in at {}.\nIf it does not open, visit:\n{url}\nWaiting for the sign-in to complete...",
        o.issuer
    ));
    open_browser(url.as_str());
    let (callback, mut stream) = wait_for_callback(&listener)?;
    let code = match callback {
        Callback::Code { code, state: got } if got == *state.secret() => code,
        Callback::Code { .. } => {
            answer(&mut stream, "400 Bad Request", "Sign-in refused: the state does not match this login. Run nsight-cloud login again.");
            return Err(LoginError::Callback {
                reason: "the callback's state does not match this login (another login, or a forged request); run `nsight-cloud login` again".into(),
            });
        }
        Callback::Error { error, description } => {
            answer(
                &mut stream,
                "400 Bad Request",
                "Sign-in failed; see the terminal.",
            );
            return Err(LoginError::Refused {
                grant: "authorization",
                reason: format!("{error}: {description}"),
            });
        }
        Callback::Other => {
            return Err(LoginError::Callback {
                reason: "unexpected callback".into(),
            })
        }
    };
    let answer_token = client
        .exchange_code(AuthorizationCode::new(code))
        .set_pkce_verifier(verifier)
        .request(http);
    match answer_token {
        Ok(t) => {
            answer(
                &mut stream,
                "200 OK",
                "Signed in to nsight-cloud. You can close this window.",
            );
            stored(&t, now, None)
        }
        Err(e) => {
            answer(
                &mut stream,
                "400 Bad Request",
                "Sign-in failed; see the terminal.",
            );
            Err(refused("authorization code")(e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_request_lines_are_parsed() {
        assert_eq!(
            parse_callback("GET /callback?code=abc&state=s%201&iss=x HTTP/1.1\r\n"),
            Callback::Code {
                code: "abc".into(),
                state: "s 1".into()
            }
        );
        assert_eq!(
            parse_callback("GET /callback?error=access_denied&error_description=no HTTP/1.1"),
            Callback::Error {
                error: "access_denied".into(),
                description: "no".into()
            }
        );
        assert_eq!(parse_callback("GET /favicon.ico HTTP/1.1"), Callback::Other);
        assert_eq!(parse_callback("garbage"), Callback::Other);
        assert!(matches!(
            parse_callback("GET /callback?state=x HTTP/1.1"),
            Callback::Error { .. }
        ));
    }

    #[test]
    fn redirect_port_defaults_to_8400_and_refuses_garbage() {
        assert_eq!(redirect_port(None).unwrap(), 8400);
        assert_eq!(redirect_port(Some("18400".into())).unwrap(), 18400);
        assert!(redirect_port(Some("http".into())).is_err());
    }
}

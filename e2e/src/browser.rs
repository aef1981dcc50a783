//! A browser for sign-in tests, driven by an HTTP client: redirects are followed by hand (so a
//! test sees each hop), cookies are kept per origin (`Set-Cookie` with `Max-Age=0` removes
//! one), and `sign_in_at_provider` plays the user on the npm oidc-provider's development
//! login pages (any login name, any password; consent is granted by the test provider).

use std::collections::BTreeMap;

/// One answer, not followed.
#[derive(Debug, Clone)]
pub struct Page {
    pub status: u16,
    /// The `Location` header, absolute.
    pub location: Option<String>,
    pub set_cookies: Vec<String>,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

/// Cookies and an HTTP client.
#[derive(Debug)]
pub struct Browser {
    http: reqwest::blocking::Client,
    /// origin (`scheme://authority`) -> name -> value.
    jar: BTreeMap<String, BTreeMap<String, String>>,
}

/// `scheme://authority` of a URL.
pub fn origin(url: &str) -> String {
    url.split('/').take(3).collect::<Vec<_>>().join("/")
}

impl Browser {
    /// A browser trusting the system roots plus `ca_pem` (the test listener's certificate).
    pub fn new(ca_pem: Option<&str>) -> Self {
        let mut builder = reqwest::blocking::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(15));
        if let Some(pem) = ca_pem {
            if let Ok(cert) = reqwest::Certificate::from_pem(pem.as_bytes()) {
                builder = builder.add_root_certificate(cert);
            }
        }
        Self {
            http: builder.build().unwrap_or_default(),
            jar: BTreeMap::new(),
        }
    }

    /// The cookie `name` held for `origin_url`'s origin.
    pub fn cookie(&self, origin_url: &str, name: &str) -> Option<String> {
        self.jar
            .get(&origin(origin_url))
            .and_then(|c| c.get(name))
            .cloned()
    }

    /// Sets (or, with `None`, removes) a cookie, as a tampering client would.
    pub fn set_cookie(&mut self, origin_url: &str, name: &str, value: Option<&str>) {
        let jar = self.jar.entry(origin(origin_url)).or_default();
        match value {
            Some(v) => jar.insert(name.to_owned(), v.to_owned()),
            None => jar.remove(name),
        };
    }

    fn send(&mut self, url: &str, req: reqwest::blocking::RequestBuilder) -> Result<Page, String> {
        let from = origin(url);
        let cookie = self
            .jar
            .get(&from)
            .map(|c| {
                c.iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            })
            .unwrap_or_default();
        let req = if cookie.is_empty() {
            req
        } else {
            req.header("cookie", cookie)
        };
        let r = req.send().map_err(|e| format!("{url}: {e}"))?;
        let status = r.status().as_u16();
        let headers: Vec<(String, String)> = r
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let set_cookies: Vec<String> = headers
            .iter()
            .filter(|(k, _)| k == "set-cookie")
            .map(|(_, v)| v.clone())
            .collect();
        let jar = self.jar.entry(from.clone()).or_default();
        for set in &set_cookies {
            let pair = set.split(';').next().unwrap_or("");
            let expired = set.to_ascii_lowercase().contains("max-age=0")
                || set
                    .to_ascii_lowercase()
                    .contains("expires=thu, 01 jan 1970");
            if let Some((k, v)) = pair.split_once('=') {
                if expired || v.is_empty() {
                    jar.remove(k.trim());
                } else {
                    jar.insert(k.trim().to_owned(), v.to_owned());
                }
            }
        }
        let location = headers.iter().find(|(k, _)| k == "location").map(|(_, l)| {
            if l.starts_with('/') {
                format!("{from}{l}")
            } else {
                l.clone()
            }
        });
        let body = r.text().unwrap_or_default();
        Ok(Page {
            status,
            location,
            set_cookies,
            headers,
            body,
        })
    }

    pub fn get(&mut self, url: &str) -> Result<Page, String> {
        let req = self.http.get(url);
        self.send(url, req)
    }

    pub fn get_with(&mut self, url: &str, headers: &[(&str, &str)]) -> Result<Page, String> {
        let mut req = self.http.get(url);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(url, req)
    }

    pub fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> Result<Page, String> {
        let req = self.http.post(url).form(form);
        self.send(url, req)
    }

    /// Starts at the provider's authorization URL and signs in as `login`, submitting the
    /// login (and, if asked, consent) forms; returns the redirect to the client
    /// (`redirect_uri?code=...&state=...`), not followed.
    pub fn sign_in_at_provider(
        &mut self,
        authorize_url: &str,
        login: &str,
    ) -> Result<String, String> {
        let provider = origin(authorize_url);
        let mut url = authorize_url.to_owned();
        for _ in 0..10 {
            let page = self.get(&url)?;
            let Some(next) = page.location.clone() else {
                // A form: the provider's login or consent page.
                let action = form_action(&page.body)?;
                let action = if action.starts_with('/') {
                    format!("{provider}{action}")
                } else {
                    action
                };
                let submitted = if page.body.contains("name=\"login\"") {
                    self.post_form(
                        &action,
                        &[("prompt", "login"), ("login", login), ("password", "any")],
                    )?
                } else if page.body.contains("value=\"consent\"") {
                    self.post_form(&action, &[("prompt", "consent")])?
                } else {
                    return Err(format!(
                        "unexpected page {} at {url}:\n{}",
                        page.status, page.body
                    ));
                };
                url = submitted.location.ok_or_else(|| {
                    format!(
                        "submitting {action} gave {} without a redirect:\n{}",
                        submitted.status, submitted.body
                    )
                })?;
                continue;
            };
            if origin(&next) != provider {
                return Ok(next);
            }
            url = next;
        }
        Err(format!(
            "no redirect back to the client after 10 hops (last {url})"
        ))
    }
}

/// The `action` of the first form of a page.
fn form_action(page: &str) -> Result<String, String> {
    page.split("action=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(|a| a.replace("&amp;", "&"))
        .ok_or_else(|| format!("no form in the page:\n{page}"))
}

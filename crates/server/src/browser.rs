//! What a web page may do with the server.
//!
//! Without a token (the default, on loopback) the server trusts whoever can
//! reach it, and any page the user visits can reach it too, from the user's
//! browser. As Jupyter server does:
//!
//! - **DNS rebinding**: a page of `attacker.example` whose name then
//!   resolves to 127.0.0.1 reads the server's answers as its own. Every
//!   request's `Host` must name the server: a loopback name (`localhost`,
//!   `127.0.0.1`, `[::1]`, any port), the address the connection arrived on
//!   (the bound address, or with `0.0.0.0`/`::` whichever local address the
//!   client used), or an `--allowed-host` entry. Else 403.
//! - **Cross-site requests** (CSRF): any page can send a POST anywhere. A
//!   request whose `Origin` is neither the server's own nor a
//!   `--cors-origin` entry is refused (403), `Origin: null` included, so no
//!   other page changes anything (nor, with `fetch`, takes a stream's
//!   subscriber slot). Without `Origin`, the browser's fetch metadata
//!   decides, as the resource isolation policy of web.dev's "Fetch
//!   Metadata" does: a request it marks `Sec-Fetch-Site: cross-site` (or
//!   `same-site`) is refused unless it is a top-level GET navigation (a
//!   link to the page). Clients that are not browsers send neither header.
//!   The body types an HTML form can send are refused by the routes (415,
//!   [`super::request::require_content_type`]).
//! - A request with more than one `Host` or `Origin`, or whose target
//!   names another authority (`GET http://evil.example/ HTTP/1.1`), is
//!   refused too.
//! - **CORS** only for `--cors-origin` entries: their preflights are
//!   answered, their responses carry `Access-Control-Allow-Origin`; nobody
//!   else's do.
//! - Every answer says `X-Content-Type-Options: nosniff`,
//!   `Referrer-Policy: no-referrer` and `Cross-Origin-Resource-Policy:
//!   same-origin`, and has a Content-Security-Policy (the page its own,
//!   [`super::page`]; everything else `default-src 'none'`).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use mfstream_model::origin::Origin;

use super::problem::Problem;
use super::{App, ServeError, ServeOptions};

/// The local address a connection arrived on, put on each of its requests
/// by the accept loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrived(pub(crate) SocketAddr);

/// The library's names of the two options, for messages to a program
/// that set them.
const ALLOWED_HOSTS: &str = "access.allowed_hosts";
const CORS_ORIGINS: &str = "access.cors_origins";

/// The policy for every answer but the page's, which sets its own.
const DEFAULT_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// What a preflight allows a `--cors-origin` page.
const CORS_METHODS: &str = "GET, POST, DELETE";
const CORS_HEADERS: &str = "Authorization, Content-Type, Last-Event-ID";
const CORS_EXPOSE: &str = "Location, Retry-After";
/// How long a browser may cache a preflight's answer, in seconds.
const CORS_MAX_AGE: &str = "600";

/// The names and origins a browser's requests may carry.
#[derive(Debug)]
pub(crate) struct Browsers {
    /// `--allowed-host '*'`: no `Host` check at all.
    any_host: bool,
    /// The `--allowed-host` entries, lowercase.
    hosts: Vec<String>,
    /// The address bound, unless it is `0.0.0.0` or `::`.
    bound: Option<IpAddr>,
    /// The `--cors-origin` entries, as a browser serialises an origin.
    origins: Vec<String>,
    /// Where the allowed hosts came from, for the hints of refusals.
    hosts_origin: Origin,
    /// Where the CORS origins came from, as `hosts_origin`.
    origins_origin: Origin,
}

impl Browsers {
    /// Checks the options' entries: each must be able to match something.
    pub(crate) fn new(options: &ServeOptions, bound: SocketAddr) -> Result<Browsers, ServeError> {
        let mut hosts = Vec::new();
        let mut any_host = false;
        let access = &options.access;
        for entry in access.allowed_hosts.iter() {
            if entry == "*" {
                any_host = true;
            } else {
                hosts.push(host_entry(entry, &access.allowed_hosts.origin)?);
            }
        }
        let origins = access
            .cors_origins
            .iter()
            .map(|entry| origin_entry(entry, &access.cors_origins.origin))
            .collect::<Result<_, _>>()?;
        Ok(Browsers {
            any_host,
            hosts,
            bound: Some(bound.ip().to_canonical()).filter(|ip| !ip.is_unspecified()),
            origins,
            hosts_origin: access.allowed_hosts.origin.clone(),
            origins_origin: access.cors_origins.origin.clone(),
        })
    }

    /// How a refusal names the allowed hosts: "an --allowed-host entry".
    fn host_entries(&self) -> String {
        match &self.hosts_origin {
            Origin::Flag(flag) => format!("an {flag} entry"),
            origin => format!("an entry of {}", origin.name(ALLOWED_HOSTS)),
        }
    }

    /// How a refusal says to allow `value`: "start the server with
    /// --allowed-host NAME" (or "--cors-origin ORIGIN"), or, for a program
    /// that embeds the server, which option to add it to.
    fn allow_hint(origin: &Origin, field: &str, value: &str) -> String {
        match origin {
            Origin::Flag(flag) => format!("start the server with {flag} {value}"),
            origin => format!("add {value} to {}", origin.name(field)),
        }
    }

    /// Whether `host` (a `Host` header) names this server, for a connection
    /// that arrived on `arrived`.
    fn host_allowed(&self, host: &str, arrived: Option<IpAddr>) -> bool {
        let Some((name, _port)) = split_authority(host) else {
            return false;
        };
        let name = name.to_ascii_lowercase();
        if name == "localhost" {
            return true;
        }
        let literal = name.strip_prefix('[').and_then(|n| n.strip_suffix(']'));
        if let Ok(ip) = literal.unwrap_or(&name).parse::<IpAddr>() {
            let ip = ip.to_canonical();
            if ip.is_loopback()
                || Some(ip) == self.bound
                || Some(ip) == arrived.map(|a| a.to_canonical())
            {
                return true;
            }
        }
        let host = host.to_ascii_lowercase();
        self.hosts.iter().any(|h| *h == name || *h == host)
    }

    /// Whether `origin` is a `--cors-origin` entry.
    fn cors_allowed(&self, origin: &str) -> bool {
        self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin))
    }
}

/// An `--allowed-host` entry: a host name or address, with or without a
/// port, lowercase (an IPv6 address bracketed, as `Host` carries it).
fn host_entry(entry: &str, origin: &Origin) -> Result<String, ServeError> {
    let bad = |why| ServeError::BadBrowserOption {
        option: origin.name(ALLOWED_HOSTS),
        value: entry.to_owned(),
        why,
    };
    if let Ok(std::net::IpAddr::V6(ip)) = entry.parse::<IpAddr>() {
        return Ok(format!("[{ip}]"));
    }
    if split_authority(entry).is_none() {
        return Err(bad(
            "expected a host name or address as a Host header carries it, such as \
             mfstream.example or 192.0.2.7:8080 (or * for any, which is unsafe)",
        ));
    }
    Ok(entry.to_ascii_lowercase())
}

/// A `--cors-origin` entry: `scheme://host[:port]`, lowercase, without the
/// scheme's default port (as a browser sends `Origin`).
fn origin_entry(entry: &str, origin: &Origin) -> Result<String, ServeError> {
    let bad = |why| ServeError::BadBrowserOption {
        option: origin.name(CORS_ORIGINS),
        value: entry.to_owned(),
        why,
    };
    if entry == "*" || entry == "null" {
        return Err(bad(
            "any page could then drive the server: name each origin, such as \
             https://app.example",
        ));
    }
    let lower = entry.trim_end_matches('/').to_ascii_lowercase();
    let (scheme, authority) = lower
        .split_once("://")
        .filter(|(scheme, _)| *scheme == "http" || *scheme == "https")
        .ok_or_else(|| {
            bad("expected an origin, scheme://host[:port], such as https://app.example")
        })?;
    let Some((name, port)) = split_authority(authority) else {
        return Err(bad(
            "expected an origin, scheme://host[:port], with no path, such as https://app.example",
        ));
    };
    let default_port = if scheme == "https" { "443" } else { "80" };
    Ok(match port {
        Some(port) if port == default_port => format!("{scheme}://{name}"),
        _ => lower,
    })
}

/// `host[:port]` split, the port all digits; `None` unless a plain
/// authority (a name or IPv4 address, or a bracketed IPv6 address).
pub(crate) fn split_authority(authority: &str) -> Option<(&str, Option<&str>)> {
    let (name, port) = if authority.starts_with('[') {
        let end = authority.find(']')?;
        let (name, rest) = authority.split_at(end + 1);
        match rest {
            "" => (name, None),
            rest => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (authority, None),
        }
    };
    let name_ok = !name.is_empty()
        && name.len() <= 255
        && if let Some(v6) = name.strip_prefix('[') {
            v6.strip_suffix(']')
                .is_some_and(|v6| v6.parse::<std::net::Ipv6Addr>().is_ok())
        } else {
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
        };
    // A TCP port: 1 to 65535, digits only (`u16`'s parse takes a `+`).
    let port_ok = port.is_none_or(|p| {
        p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|p| p > 0)
    });
    (name_ok && port_ok).then_some((name, port))
}

/// Whether `origin` is the server's own: `http` or `https` (a TLS proxy in
/// front) and the authority the request's `Host` names, a default port
/// given or not.
fn own_origin(host: &str, origin: &str) -> bool {
    let origin = origin.to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    [("http://", ":80"), ("https://", ":443")]
        .iter()
        .any(|(scheme, default_port)| {
            origin.strip_prefix(scheme).is_some_and(|authority| {
                authority == host || host.strip_suffix(default_port) == Some(authority)
            })
        })
}

/// Whether the browser's fetch metadata (`Sec-Fetch-*`, absent from
/// requests not made by a browser) lets a request without `Origin` through:
/// one from the server's own pages, one the user made (`none`: typed,
/// bookmarked), or a top-level GET navigation from another site (a link),
/// which cannot read or change anything.
fn fetch_metadata_allows(method: &Method, headers: &HeaderMap) -> bool {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    match get("sec-fetch-site") {
        None => true,
        Some(site)
            if site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none") =>
        {
            true
        }
        Some(_) => {
            *method == Method::GET
                && get("sec-fetch-mode").is_some_and(|m| m.eq_ignore_ascii_case("navigate"))
                && !get("sec-fetch-dest").is_some_and(|d| {
                    d.eq_ignore_ascii_case("object") || d.eq_ignore_ascii_case("embed")
                })
        }
    }
}

/// Refuses a request whose `Host` does not name the server, and one from
/// a page of another origin (by its `Origin`, else by its fetch metadata),
/// a preflight included; answers an allowed origin's preflight; and gives
/// an allowed origin's answers their CORS headers ([`security_headers`]
/// gives every answer the rest).
pub(crate) async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let browsers = &app.browsers;
    let headers = request.headers();
    // Two of either: which one counts would be the server's guess (a
    // browser sends one).
    for (header, name) in [(header::HOST, "Host"), (header::ORIGIN, "Origin")] {
        if headers.get_all(header).iter().nth(1).is_some() {
            let problem =
                Problem::invalid(name, format!("the request has more than one {name} header"));
            return problem.into_response();
        }
    }
    let host = headers.get(header::HOST).map(|v| v.to_str().ok());
    if !browsers.any_host {
        let arrived = request.extensions().get::<Arrived>().map(|a| a.0.ip());
        // An absolute target's authority is the one the request is for
        // (RFC 9112 3.2.2), whatever `Host` says: it is checked as well.
        let target = request.uri().authority().map(|a| a.as_str());
        let refused = match target {
            Some(target) if !browsers.host_allowed(target, arrived) => {
                Some(not_a_name(browsers, "the request's target names", target))
            }
            _ => match host {
                None => Some(format!(
                    "the request has no Host header: this server answers requests that name \
                     it (localhost, its address, or {})",
                    browsers.host_entries()
                )),
                Some(None) => Some(format!(
                    "the Host header is not text: name the server as localhost, its address, \
                     or {}",
                    browsers.host_entries()
                )),
                Some(Some(host)) if !browsers.host_allowed(host, arrived) => {
                    Some(not_a_name(browsers, "host", host))
                }
                Some(Some(_)) => None,
            },
        };
        if let Some(description) = refused {
            let problem = Problem::new(StatusCode::FORBIDDEN, "HostNotAllowed", description);
            return problem.into_response();
        }
    }
    let host = host.flatten();
    // An `Origin` that is not text is no origin this server allows.
    let origin = headers
        .get(header::ORIGIN)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    let cors = origin
        .filter(|o| browsers.cors_allowed(o))
        .and_then(|o| HeaderValue::from_str(o).ok());
    if request.method() == Method::OPTIONS
        && let Some(origin) = origin
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
    {
        if cors.is_none() {
            return refuse_origin(browsers, origin).into_response();
        }
        let mut response = StatusCode::NO_CONTENT.into_response();
        let h = response.headers_mut();
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(CORS_METHODS),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(CORS_HEADERS),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(CORS_MAX_AGE),
        );
        return with_cors(response, cors);
    }
    let refused = match origin {
        Some(origin) => (cors.is_none() && !host.is_some_and(|host| own_origin(host, origin)))
            .then(|| refuse_origin(browsers, origin)),
        None => (!fetch_metadata_allows(request.method(), headers)).then(|| {
            let entry = match &browsers.origins_origin {
                Origin::Flag(flag) => format!("a {flag} entry"),
                origin => format!("an entry of {}", origin.name(CORS_ORIGINS)),
            };
            Problem::new(
                StatusCode::FORBIDDEN,
                "OriginNotAllowed",
                format!(
                    "a request the browser marks as from another site (Sec-Fetch-Site), without \
                     an Origin, is taken only as a link to a page: a page of another origin \
                     needs {entry}"
                ),
            )
        }),
    };
    if let Some(problem) = refused {
        return problem.into_response();
    }
    with_cors(next.run(request).await, cors)
}

/// Why a `Host` (or a target's authority) is refused: it names another
/// server, or is not a name at all.
fn not_a_name(browsers: &Browsers, what: &str, host: &str) -> String {
    let quoted = cut(host);
    match split_authority(host) {
        Some((name, _)) => format!(
            "{what} {quoted}, which is not a name of this server: if it is one, {}",
            Browsers::allow_hint(&browsers.hosts_origin, ALLOWED_HOSTS, name)
        ),
        None => format!("{what} {quoted}, which is not a host name or address"),
    }
}

/// `text` quoted for an error message, cut to its first 256 bytes: a
/// header may be as long as the head (64 KiB).
fn cut(text: &str) -> String {
    const MAX: usize = 256;
    if text.len() <= MAX {
        return format!("{text:?}");
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}…", &text[..end])
}

fn refuse_origin(browsers: &Browsers, origin: &str) -> Problem {
    let description = if origin == "null" {
        "origin \"null\" (a sandboxed frame, a file or a redirect) is not taken here".to_owned()
    } else if origin.len() > 256 || origin.contains(char::is_whitespace) {
        format!("origin {} is not taken here", cut(origin))
    } else {
        let hint = match &browsers.origins_origin {
            Origin::Flag(flag) => format!("start it with {flag} {origin}"),
            _ => Browsers::allow_hint(&browsers.origins_origin, CORS_ORIGINS, origin),
        };
        format!("origin {origin:?} is not taken here: if its pages should call the server, {hint}")
    };
    Problem::new(StatusCode::FORBIDDEN, "OriginNotAllowed", description)
}

/// The CORS headers, when `cors` (the request's origin) is allowed.
fn with_cors(mut response: Response, cors: Option<HeaderValue>) -> Response {
    if let Some(origin) = cors {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(CORS_EXPOSE),
        );
    }
    response
}

/// Gives every answer of the router its security headers: the outermost
/// layer, so that the answers made before [`guard`] runs (an overlong URI's
/// 414, an oversize body's 413) have them too. With `--cors-origin`
/// entries, answers differ by origin: each says `Vary: Origin`, so no cache
/// serves one origin's answer to another.
pub(crate) async fn security_headers(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    if !app.browsers.origins.is_empty() {
        h.append(header::VARY, HeaderValue::from_static("Origin"));
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // No other site's page may embed an answer (an image, a script): for
    // browsers that send no fetch metadata. CORS reads are not affected.
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CONTENT_SECURITY_POLICY) {
        h.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(DEFAULT_CSP),
        );
    }
    response
}

#[cfg(test)]
mod tests;

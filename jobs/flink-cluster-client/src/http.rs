//! A minimal HTTP/1.1 client over `TcpStream`, enough for Flink's REST API:
//! one request per connection (`Connection: close`), bodies read to the end,
//! `Content-Length` or chunked.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Bodies are bounded: Flink's answers are small JSON documents.
const MAX_RESPONSE: u64 = 64 * 1024 * 1024;

/// An `http://host:port[/prefix]` base address.
#[derive(Debug, Clone)]
pub struct Base {
    /// `host:port`, for the connection and the `Host` header.
    authority: String,
    /// The path prefix, without a trailing slash ("" for none).
    prefix: String,
}

/// A response: status code and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Base {
    /// Parses `http://host:port[/prefix]`; the port defaults to 80.
    pub fn parse(url: &str) -> Result<Base, String> {
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!(
                "the REST address must start with http:// (https is not supported), got '{url}'"
            )
        })?;
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!("no host in the REST address '{url}'"));
        }
        let authority = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.contains(']'))
        {
            authority.to_owned()
        } else {
            format!("{authority}:80")
        };
        Ok(Base {
            authority,
            prefix: prefix.to_owned(),
        })
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Result<Response, String> {
        self.request("GET", path, None, &[])
    }

    /// A request with an optional body of the given content type.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> Result<Response, String> {
        let what = format!("{method} http://{}{}{path}", self.authority, self.prefix);
        self.exchange(method, path, content_type, body)
            .map_err(|e| format!("{what}: {e}"))
    }

    fn exchange(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> std::io::Result<Response> {
        let mut stream = TcpStream::connect(&self.authority)?;
        stream.set_read_timeout(Some(Duration::from_secs(60)))?;
        stream.set_write_timeout(Some(Duration::from_secs(60)))?;
        stream.set_nodelay(true)?;
        let mut head = format!(
            "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nAccept: application/json\r\nContent-Length: {}\r\n",
            self.prefix,
            self.authority,
            body.len()
        );
        if let Some(content_type) = content_type {
            head.push_str(&format!("Content-Type: {content_type}\r\n"));
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(body);
        stream.write_all(&request)?;
        let mut raw = Vec::new();
        stream.take(MAX_RESPONSE).read_to_end(&mut raw)?;
        parse_response(&raw)
    }
}

fn invalid(message: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, message.to_owned())
}

fn parse_response(raw: &[u8]) -> std::io::Result<Response> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no end of headers in the response"))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("no status line in the response"))?;
    let mut chunked = false;
    let mut length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
            chunked = true;
        } else if name.eq_ignore_ascii_case("content-length") {
            length = value.parse::<usize>().ok();
        }
    }
    let rest = &raw[end + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        match length {
            Some(n) if n <= rest.len() => rest[..n].to_vec(),
            Some(_) => return Err(invalid("the response ended before its Content-Length")),
            None => rest.to_vec(),
        }
    };
    Ok(Response { status, body })
}

fn dechunk(mut data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| invalid("a truncated chunk"))?;
        let size_text = String::from_utf8_lossy(&data[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("a bad chunk size"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        if data.len() < size + 2 {
            return Err(invalid("a truncated chunk"));
        }
        body.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// A `multipart/form-data` body holding one file field: the content type
/// (with its boundary) and the body.
pub fn multipart_file(field: &str, filename: &str, content: &[u8]) -> (String, Vec<u8>) {
    let boundary = format!("mfstream-{:016x}", fastrand_seed());
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"{field}\"; filename=\"{filename}\"\r\nContent-Type: application/x-java-archive\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// Enough randomness for a multipart boundary: the clock and the pid.
fn fastrand_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    nanos ^ (u64::from(std::process::id()) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_content_length_and_chunked_responses() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"{}"[..]));
        let r = parse_response(
            b"HTTP/1.1 202 Accepted\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (202, &b"abcde"[..]));
    }

    #[test]
    fn base_addresses_take_a_default_port_and_a_prefix() {
        let b = Base::parse("http://127.0.0.1:28081/").unwrap();
        assert_eq!(
            (b.authority.as_str(), b.prefix.as_str()),
            ("127.0.0.1:28081", "")
        );
        let b = Base::parse("http://flink/api").unwrap();
        assert_eq!(
            (b.authority.as_str(), b.prefix.as_str()),
            ("flink:80", "/api")
        );
        assert!(Base::parse("https://flink").is_err());
    }
}

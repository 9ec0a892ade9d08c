//! A small HTTP/1.1 client for the server tests and the load benchmark:
//! plain requests on a kept-alive connection, and Server-Sent Event streams.
//! Loopback only; just enough HTTP for mfstream's own responses
//! (content-length or chunked bodies).
//!
//! Test code: a failed request panics, naming what went wrong.

use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// A response, its body read whole.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One connection, kept alive across requests.
pub struct Client {
    addr: SocketAddr,
    token: Option<String>,
    conn: Option<BufReader<TcpStream>>,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        Client {
            addr,
            token: None,
            conn: None,
        }
    }

    /// Sends `Authorization: Bearer TOKEN` with every request.
    pub fn with_token(mut self, token: &str) -> Client {
        self.token = Some(token.to_owned());
        self
    }

    pub async fn get(&mut self, path: &str) -> Response {
        self.request("GET", path, &[], b"").await
    }

    pub async fn post(&mut self, path: &str, body: &str) -> Response {
        self.request("POST", path, &[], body.as_bytes()).await
    }

    pub async fn delete(&mut self, path: &str) -> Response {
        self.request("DELETE", path, &[], b"").await
    }

    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Response {
        let head = request_head(
            method,
            path,
            self.token.as_deref(),
            headers,
            body.len(),
            true,
        );
        let mut message = head.into_bytes();
        message.extend_from_slice(body);
        // A kept-alive connection the server has closed meanwhile (idle
        // past its header timeout) is replaced, and the request sent again.
        let reused = self.conn.is_some();
        let mut conn = match self.conn.take() {
            Some(conn) => conn,
            None => connect(self.addr).await,
        };
        let mut head = send(&mut conn, &message).await;
        if head.is_none() && reused {
            conn = connect(self.addr).await;
            head = send(&mut conn, &message).await;
        }
        let (status, headers) = head.expect("an answer to the request");
        let conn = self.conn.insert(conn);
        let body = read_body(conn, &headers).await;
        let close = header(&headers, "connection").is_some_and(|v| v == "close");
        if close {
            self.conn = None;
        }
        Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }
}

/// Sends `message` and reads the answer's head; `None` if the connection
/// was closed before an answer.
async fn send(
    conn: &mut BufReader<TcpStream>,
    message: &[u8],
) -> Option<(u16, Vec<(String, String)>)> {
    // A server may answer before it has read the whole body (a 413) and
    // close: its answer is still there to read.
    let sent = conn.get_mut().write_all(message).await;
    let mut line = String::new();
    match conn.read_line(&mut line).await {
        Ok(n) if n > 0 => Some(read_rest_of_head(conn, &line).await),
        _ => {
            if let Err(e) = sent {
                eprintln!("send: {e}");
            }
            None
        }
    }
}

/// Sends `request` as given (any bytes: a malformed head, a body shorter
/// than its Content-Length) on a new connection, and reads the answer.
pub async fn raw(addr: SocketAddr, request: &[u8]) -> Response {
    let mut conn = connect(addr).await;
    conn.get_mut().write_all(request).await.expect("send");
    let (status, headers) = read_head(&mut conn).await;
    let body = read_body(&mut conn, &headers).await;
    Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

async fn connect(addr: SocketAddr) -> BufReader<TcpStream> {
    let stream = TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    BufReader::with_capacity(64 * 1024, stream)
}

fn request_head(
    method: &str,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    len: usize,
    keep_alive: bool,
) -> String {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
    if let Some(token) = token {
        head.push_str(&format!("Authorization: Bearer {token}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    // The server takes JSON bodies only (415 otherwise): every body is
    // sent as JSON unless the caller says what it is.
    let typed = headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("content-type"));
    if (len > 0 || method == "POST") && !typed {
        head.push_str("Content-Type: application/json\r\n");
    }
    if len > 0 || method == "POST" {
        head.push_str(&format!("Content-Length: {len}\r\n"));
    }
    if !keep_alive {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    head
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

async fn read_head(conn: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    conn.read_line(&mut line).await.expect("status line");
    read_rest_of_head(conn, &line).await
}

/// The status of `status_line` and the headers that follow it.
async fn read_rest_of_head(
    conn: &mut BufReader<TcpStream>,
    status_line: &str,
) -> (u16, Vec<(String, String)>) {
    let mut line = status_line.to_owned();
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        conn.read_line(&mut line).await.expect("header line");
        let trimmed = line.trim_end();
        if trimmed.is_empty() {
            break;
        }
        if let Some((name, value)) = trimmed.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    (status, headers)
}

async fn read_body(conn: &mut BufReader<TcpStream>, headers: &[(String, String)]) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(len) = header(headers, "content-length") {
        let len: usize = len.parse().expect("content-length");
        body.resize(len, 0);
        conn.read_exact(&mut body).await.expect("body");
    } else if header(headers, "transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        while read_chunk(conn, &mut body).await {}
    }
    body
}

/// Appends one chunk of a chunked body to `out`; false at the last chunk.
async fn read_chunk(conn: &mut BufReader<TcpStream>, out: &mut Vec<u8>) -> bool {
    let mut line = String::new();
    if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
        return false;
    }
    let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
        .unwrap_or_else(|_| panic!("bad chunk size line {line:?}"));
    if size == 0 {
        let mut crlf = String::new();
        let _ = conn.read_line(&mut crlf).await;
        return false;
    }
    let start = out.len();
    out.resize(start + size + 2, 0);
    if conn.read_exact(&mut out[start..]).await.is_err() {
        out.truncate(start);
        return false;
    }
    out.truncate(start + size);
    true
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseEvent {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

impl SseEvent {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }
}

/// An open event stream.
pub struct Sse {
    conn: BufReader<TcpStream>,
    buf: Vec<u8>,
    pos: usize,
    ended: bool,
    /// Keep-alive comments seen.
    pub comments: usize,
}

/// Opens `path` as an event stream; the response instead when it is not 200.
pub async fn subscribe(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Result<Sse, Response> {
    let mut conn = connect(addr).await;
    let mut all = vec![("Accept", "text/event-stream")];
    all.extend_from_slice(headers);
    let head = request_head("GET", path, None, &all, 0, false);
    conn.get_mut()
        .write_all(head.as_bytes())
        .await
        .expect("send");
    let (status, headers) = read_head(&mut conn).await;
    if status != 200 {
        let body = read_body(&mut conn, &headers).await;
        return Err(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }
    assert_eq!(
        header(&headers, "content-type"),
        Some("text/event-stream"),
        "{headers:?}"
    );
    Ok(Sse {
        conn,
        buf: Vec::new(),
        pos: 0,
        ended: false,
        comments: 0,
    })
}

impl Sse {
    /// The next frame's bytes (without its blank line), events and
    /// comments alike; `None` once the stream has ended.
    pub async fn next_frame(&mut self) -> Option<&[u8]> {
        loop {
            // A frame ends with a blank line.
            if let Some(end) = memchr::memmem::find(&self.buf[self.pos..], b"\n\n") {
                let start = self.pos;
                self.pos += end + 2;
                return Some(&self.buf[start..start + end]);
            }
            if self.ended {
                return None;
            }
            self.buf.drain(..self.pos);
            self.pos = 0;
            if !read_chunk(&mut self.conn, &mut self.buf).await {
                self.ended = true;
            }
        }
    }

    /// The next event; `None` once the stream has ended. Comments and
    /// `retry:` lines are skipped (comments are counted).
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            let frame = String::from_utf8_lossy(self.next_frame().await?).into_owned();
            if let Some(event) = self.parse(&frame) {
                return Some(event);
            }
        }
    }

    /// One frame's event, or `None` for a frame of comments and `retry:`.
    fn parse(&mut self, frame: &str) -> Option<SseEvent> {
        let mut event = SseEvent {
            id: None,
            event: "message".into(),
            data: String::new(),
        };
        let mut any = false;
        for line in frame.split('\n') {
            if line.starts_with(':') {
                self.comments += 1;
                continue;
            }
            let (field, value) = line.split_once(": ").unwrap_or((line, ""));
            match field {
                "id" => event.id = Some(value.to_owned()),
                "event" => event.event = value.to_owned(),
                "data" => {
                    if !event.data.is_empty() {
                        event.data.push('\n');
                    }
                    event.data.push_str(value);
                }
                _ => continue,
            }
            any = true;
        }
        any.then_some(event)
    }

    /// Events until `end` (included).
    pub async fn until_end(&mut self) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            let end = event.event == "end";
            events.push(event);
            if end {
                break;
            }
        }
        events
    }
}

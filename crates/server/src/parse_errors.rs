//! JSON bodies for the answers hyper writes itself.
//!
//! A request hyper cannot parse (a malformed request line, method, header or
//! `Content-Length`, a URI over 64 KiB, a head over the limit) never reaches
//! the router: hyper answers it with 400, 414 or 431 and an empty body, then
//! closes the connection, and offers no hook to shape that answer. This
//! adapter sits between hyper and the socket and gives those answers the
//! same `{"code","description"}` body as every other error.
//!
//! It recognises them by their shape: a write that starts a response with
//! one of those statuses and `content-length: 0`. The router's own errors
//! always carry a JSON body, so they never match.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::wire::{Answer, Exception};

/// A connection whose hyper-made error answers get a JSON body.
#[derive(Debug)]
pub(crate) struct JsonParseErrors<IO> {
    inner: IO,
    /// A rewritten answer being written: its bytes, how many are out, and
    /// the length of hyper's buffer it replaces.
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<IO> JsonParseErrors<IO> {
    pub(crate) fn new(inner: IO) -> JsonParseErrors<IO> {
        JsonParseErrors {
            inner,
            pending: None,
        }
    }
}

/// The JSON answer replacing hyper's empty one in `buf`, if `buf` is one.
fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let (code, description) = match rest.get(..3)? {
        b"400" => (
            "BadRequest",
            "the request could not be parsed: its request line, a header or its \
             Content-Length is malformed",
        ),
        b"414" => ("URITooLong", "the request URI is too long"),
        b"431" => (
            "RequestHeaderFieldsTooLarge",
            // hyper's two bounds on a head: its bytes, and its header
            // fields (`httparse`'s array, 100).
            "the request head is too large: at most 64 KiB and 100 header fields are read",
        ),
        _ => return None,
    };
    let end = memchr::memmem::find(buf, b"\r\n\r\n")?;
    let head = &buf[..end + 2];
    if memchr::memmem::find(head, b"\r\ncontent-length: 0\r\n").is_none()
        || memchr::memmem::find(head, b"\r\ncontent-type:").is_some()
    {
        return None;
    }
    let status_line_end = memchr::memmem::find(buf, b"\r\n")?;
    let body = Answer(Exception {
        code: code.to_owned(),
        description: description.to_owned(),
        field: None,
        accepted: None,
    })
    .to_json()
    .ok()?;
    let mut out = Vec::with_capacity(160 + body.len());
    out.extend_from_slice(&buf[..status_line_end + 2]);
    out.extend_from_slice(b"content-type: application/json\r\nconnection: close\r\n");
    // The headers every other answer gets (`browser`).
    out.extend_from_slice(
        b"x-content-type-options: nosniff\r\nreferrer-policy: no-referrer\r\n\
          cross-origin-resource-policy: same-origin\r\n\
          content-security-policy: default-src 'none'; frame-ancestors 'none'\r\n",
    );
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body.as_bytes());
    Some(out)
}

impl<IO: AsyncRead + Unpin> AsyncRead for JsonParseErrors<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for JsonParseErrors<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if this.pending.is_none()
            && let Some(answer) = rewrite(buf)
        {
            this.pending = Some((answer, 0, buf.len()));
        }
        let Some((answer, written, replaces)) = &mut this.pending else {
            return Pin::new(&mut this.inner).poll_write(cx, buf);
        };
        while *written < answer.len() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &answer[*written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            *written += n;
        }
        let replaces = *replaces;
        this.pending = None;
        Poll::Ready(Ok(replaces))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn hypers_empty_400_gets_a_json_body() {
        let hyper = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let answer = String::from_utf8(rewrite(hyper).unwrap()).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{answer}"
        );
        assert!(
            answer.contains("content-type: application/json\r\n"),
            "{answer}"
        );
        assert!(answer.ends_with("}"), "{answer}");
    }

    #[test]
    fn the_routers_own_answers_pass_untouched() {
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
        assert!(rewrite(ours).is_none());
        let empty_ok = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        assert!(rewrite(empty_ok).is_none());
        assert!(rewrite(b"5\r\nhello\r\n").is_none());
    }
}

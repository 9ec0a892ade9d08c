//! The optional bearer token: when set, every route but the landing page
//! requires `Authorization: Bearer TOKEN` (the scheme in any case, as RFC
//! 7235 says).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use mfstream_model::origin::Origin;

use super::problem::Problem;
use super::{App, ServeError};

/// Refuses, at start-up, a token that would protect nothing (empty) or
/// that no `Authorization` header can carry as given: a leading or trailing
/// space (a client trims it), a control character (a header line cannot hold
/// one) or a non-ASCII character (header values are bytes, and clients
/// encode them differently).
pub(crate) fn check_token(token: &str, origin: &Origin) -> Result<(), ServeError> {
    if token.trim().is_empty() {
        return Err(ServeError::EmptyToken {
            origin: origin.clone(),
        });
    }
    let why = if token.starts_with(char::is_whitespace) {
        "starts with a space".to_owned()
    } else if token.ends_with(char::is_whitespace) {
        "ends with a space".to_owned()
    } else if let Some((at, _)) = token.char_indices().find(|(_, c)| c.is_control()) {
        format!("holds a control character at byte {at}")
    } else if let Some((at, _)) = token.char_indices().find(|(_, c)| !c.is_ascii()) {
        format!("holds a non-ASCII character at byte {at}")
    } else {
        return Ok(());
    };
    Err(ServeError::UnsendableToken { why })
}

/// Refuses a request without the token (401), unless it is for `/`.
pub(crate) async fn require_token(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = app.options.access.token.as_ref()
        && request.uri().path() != "/"
    {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if !given.is_some_and(|given| same(given.trim().as_bytes(), token.as_bytes())) {
            let mut response = Problem::new(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "this server requires `Authorization: Bearer TOKEN`".into(),
            )
            .into_response();
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return response;
        }
    }
    next.run(request).await
}

/// The credentials of a `Bearer` authorization, the scheme matched in any
/// case.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim_start().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then_some(credentials)
}

/// Compares in time that depends on the lengths only, not on where the
/// first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use mfstream_model::origin::Origin;

    use crate::ServeError;

    #[test]
    fn a_token_no_header_can_carry_is_refused() {
        for (token, why) in [
            (" s3cret", "starts with a space"),
            ("s3cret\t", "ends with a space"),
            ("s3\ncret", "control character at byte 2"),
            ("s3\u{7f}cret", "control character at byte 2"),
            ("sécret", "non-ASCII character at byte 1"),
        ] {
            match super::check_token(token, &Origin::Program) {
                Err(e @ ServeError::UnsendableToken { .. }) => {
                    let message = e.to_string();
                    assert!(message.contains(why), "{token:?}: {message}");
                    assert!(!message.contains(token.trim()), "{token:?}: {message}");
                }
                other => panic!("{token:?}: {other:?}"),
            }
        }
        let empty = super::check_token(" ", &Origin::env("MFSTREAM_TOKEN")).unwrap_err();
        assert_eq!(
            empty.to_string(),
            "the token is empty (from MFSTREAM_TOKEN): give a non-empty token, or none"
        );
        for token in ["s3cret", "a.b-c_d~e+f/g==", "two words"] {
            assert!(
                super::check_token(token, &Origin::Program).is_ok(),
                "{token:?}"
            );
        }
    }

    #[test]
    fn the_scheme_is_matched_in_any_case() {
        for value in ["Bearer s3cret", "bearer s3cret", "BEARER s3cret"] {
            assert_eq!(super::bearer(value), Some("s3cret"), "{value}");
        }
        assert_eq!(super::bearer("Basic s3cret"), None);
        assert_eq!(super::bearer("Bearers3cret"), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(super::same(b"secret", b"secret"));
        assert!(!super::same(b"secret", b"secreT"));
        assert!(!super::same(b"secret", b"secret2"));
    }
}

//! The optional bearer token: when set, every route but the landing page
//! requires `Authorization: Bearer TOKEN` (the scheme in any case, as RFC
//! 7235 says).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use super::problem::Problem;

/// Refuses a request without the token (401), unless it is for `/`.
pub(crate) async fn require_token(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &app.options.token
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

//! Error responses: `{"code","description"}` with the HTTP status that fits,
//! as OGC API exceptions are shaped.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use mfstream_engine::EngineError;
use mfstream_model::{RegistrationError, SpecError};
use mfstream_registry::RegistryError;

use super::wire::{Answer, Exception};

/// A request that could not be served, as the client sees it.
#[derive(Debug)]
pub(crate) struct Problem {
    status: StatusCode,
    code: &'static str,
    description: String,
    /// The request field at fault, when one is.
    field: Option<&'static str>,
    /// Instants taken before an ingest gave up.
    accepted: Option<usize>,
    /// Whether the connection closes after the answer (a body left unread).
    close: bool,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, code: &'static str, description: String) -> Problem {
        Problem {
            status,
            code,
            description,
            field: None,
            accepted: None,
            close: false,
        }
    }

    /// The same answer, closing the connection after it: for a request
    /// whose body was not (wholly) read, so nothing of it is taken for the
    /// next request.
    pub(crate) fn closing(self) -> Problem {
        Problem {
            close: true,
            ..self
        }
    }

    /// 400: a request field is invalid.
    pub(crate) fn invalid(field: &'static str, message: impl std::fmt::Display) -> Problem {
        Problem {
            field: Some(field),
            ..Problem::new(
                StatusCode::BAD_REQUEST,
                "InvalidParameterValue",
                format!("{field}: {message}"),
            )
        }
    }

    /// 422: a valid request that cannot apply to this property.
    pub(crate) fn unprocessable(field: &'static str, message: impl std::fmt::Display) -> Problem {
        Problem {
            field: Some(field),
            ..Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "UnprocessableEntity",
                format!("{field}: {message}"),
            )
        }
    }

    /// 413: a field of the body is over a bound the server keeps to.
    pub(crate) fn too_large(field: &'static str, message: impl std::fmt::Display) -> Problem {
        Problem {
            field: Some(field),
            ..Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PayloadTooLarge",
                format!("{field}: {message}"),
            )
        }
    }

    /// 404: nothing at this path.
    pub(crate) fn not_found(what: impl std::fmt::Display) -> Problem {
        Problem::new(StatusCode::NOT_FOUND, "NotFound", what.to_string())
    }

    /// 503: try again later.
    pub(crate) fn unavailable(description: String) -> Problem {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            description,
        )
    }

    /// The answer's code (`InvalidParameterValue`, …).
    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    /// The request field at fault, when one is.
    pub(crate) fn field(&self) -> Option<&'static str> {
        self.field
    }

    /// The instants an ingest accepted before it failed, when it says.
    pub(crate) fn accepted(&self) -> Option<usize> {
        self.accepted
    }

    /// The same answer, saying how many instants of an ingest were
    /// accepted before it failed.
    pub(crate) fn with_accepted(self, accepted: usize) -> Problem {
        Problem {
            accepted: Some(accepted),
            ..self
        }
    }

    /// The status (for a source that is not HTTP: MQTT tells a message it
    /// must refuse, 4xx, from a moment to wait, 5xx).
    #[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
    pub(crate) fn status(&self) -> StatusCode {
        self.status
    }

    /// What went wrong, as the body's `description` says.
    #[cfg_attr(not(any(feature = "mqtt", feature = "kafka")), allow(dead_code))]
    pub(crate) fn description(&self) -> &str {
        &self.description
    }

    /// 503 for an ingest that could not hand every instant over in time.
    pub(crate) fn ingest_busy(accepted: usize, total: usize, waited_ms: u128) -> Problem {
        Problem {
            accepted: Some(accepted),
            ..Problem::unavailable(format!(
                "accepted {accepted} of {total} instants: a query's buffer stayed full for \
                 {waited_ms} ms; send the rest again later"
            ))
        }
    }
}

impl From<SpecError> for Problem {
    fn from(e: SpecError) -> Problem {
        Problem::invalid(e.field, e.message)
    }
}

/// 400 for a body invalid in itself, 422 for a valid body that does not
/// fit the property it is registered on (the checks are the spec's).
impl From<RegistrationError> for Problem {
    fn from(e: RegistrationError) -> Problem {
        match e {
            RegistrationError::Unfit(e) => Problem::unprocessable(e.field, e.message),
            RegistrationError::Invalid(e) => e.into(),
        }
    }
}

/// An engine the registry does not know is the client's mistake (400, the
/// known engines listed); one it knows but cannot run is the server's (501,
/// naming what to set).
impl From<RegistryError> for Problem {
    fn from(e: RegistryError) -> Problem {
        match e {
            RegistryError::Unknown { .. } => Problem::invalid("engine", e),
            // A valid query the engine does not serve: others may.
            RegistryError::Unserved { .. } => Problem::unprocessable("engine", e),
            _ => Problem::new(StatusCode::NOT_IMPLEMENTED, "NotImplemented", e.to_string()),
        }
    }
}

impl From<EngineError> for Problem {
    fn from(e: EngineError) -> Problem {
        match e {
            EngineError::InvalidQuery(e) => e.into(),
            other => Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "EngineStartFailed",
                other.to_string(),
            ),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = Exception {
            code: self.code.to_owned(),
            description: self.description,
            field: self.field.map(str::to_owned),
            accepted: self.accepted.map(|n| n as u64),
        };
        let mut response = (self.status, Answer(body)).into_response();
        if self.close {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

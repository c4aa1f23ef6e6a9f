//! What `ready` serves: the `/ready` router ([`router`]), answering from the process's
//! [`Readiness`].

use axum::http::StatusCode;
use axum::routing::get;

use crate::chain::Readiness;

/// The `/ready` router over `readiness`.
pub fn router(readiness: Readiness) -> axum::Router {
    axum::Router::new().route(
        "/ready",
        get(move || {
            let readiness = readiness.clone();
            async move {
                let not = readiness.not_ready();
                if not.is_empty() {
                    (StatusCode::OK, "OK".to_owned())
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", not.join("\n")))
                }
            }
        }),
    )
}

//! The bundled web UI: the page at `/` (an askama template, `web/index.html`), its own files
//! under `/assets/` (ES modules and CSS from `web/assets/`) and the third-party browser code
//! under `/vendor/` (`web/vendor/`, written by `scripts/vendor-web`), both embedded with
//! rust-embed. The UI is a client of the public API like any other: this module serves files
//! and holds no conversation logic.

use std::borrow::Cow;

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use rust_embed::{EmbeddedFile, RustEmbed};

use super::error::ApiError;
use super::state::AppState;
use crate::config::DEMO_MODEL;

/// The page allows only its own script, style and API: no inline script, no third-party
/// origin, no framing. `data:` images are allowed for images sent inline in messages.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// Assets are not content-hashed, so browsers revalidate them (cheaply, with the ETag) rather
/// than keep a stale `app.js` after an upgrade.
const ASSET_CACHE_CONTROL: &str = "no-cache";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{*path}", get(asset))
        .route("/vendor/{*path}", get(vendored))
}

/// `web/assets/`, embedded in release builds; debug builds read the folder from disk (without
/// rust-embed's `debug-embed` feature), so editing the UI needs no rebuild.
#[derive(RustEmbed)]
#[folder = "web/assets"]
struct Assets;

/// `web/vendor/`: Markdown, sanitizer, highlighter and diff libraries at pinned versions, so
/// neither the build nor the page needs npm or a third-party origin.
#[derive(RustEmbed)]
#[folder = "web/vendor"]
struct Vendored;

#[derive(Template)]
#[template(path = "index.html", config = "web/askama.toml")]
struct IndexPage<'a> {
    version: &'a str,
    /// The default agent's model, shown in the sidebar.
    model: &'a str,
    /// The built-in offline model answers: the page says so, so nobody mistakes it for an LLM.
    is_demo: bool,
}

async fn index(State(state): State<AppState>) -> Result<Response, ApiError> {
    let config = state.runtime.config();
    let model = config.default_agent().model.as_str();
    let page = IndexPage {
        version: env!("CARGO_PKG_VERSION"),
        model,
        is_demo: model == DEMO_MODEL,
    };
    let html = page.render().map_err(|error| {
        tracing::error!(%error, "rendering the UI page failed");
        ApiError::Internal("rendering the page failed".to_owned())
    })?;
    let headers = [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
    ];
    Ok((headers, Html(html)).into_response())
}

async fn asset(Path(path): Path<String>, request_headers: HeaderMap) -> Response {
    serve_file(&path, Assets::get, &request_headers)
}

async fn vendored(Path(path): Path<String>, request_headers: HeaderMap) -> Response {
    serve_file(&path, Vendored::get, &request_headers)
}

fn serve_file(
    path: &str,
    get_file: fn(&str) -> Option<EmbeddedFile>,
    request_headers: &HeaderMap,
) -> Response {
    let not_found = || ApiError::NotFound(format!("no asset `{path}`")).into_response();
    // rust-embed guards its folder too; refusing `..` here keeps that true in debug builds,
    // where files are read from disk.
    if path.split(['/', '\\']).any(|part| part == "..") {
        return not_found();
    }
    let Some(file) = get_file(path) else {
        return not_found();
    };
    let etag = etag_of(&file.metadata.sha256_hash());
    let matches = request_headers
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|tag| tag.trim() == etag));
    let etag_value = HeaderValue::from_str(&etag).expect("a hex ETag is a valid header");
    let cache = HeaderValue::from_static(ASSET_CACHE_CONTROL);
    if matches {
        return (
            StatusCode::NOT_MODIFIED,
            [(header::ETAG, etag_value), (header::CACHE_CONTROL, cache)],
        )
            .into_response();
    }
    let content_type = content_type_of(file.metadata.mimetype());
    let body = match file.data {
        Cow::Borrowed(bytes) => axum::body::Body::from(bytes),
        Cow::Owned(bytes) => axum::body::Body::from(bytes),
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, cache),
            (header::ETAG, etag_value),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// Text types get an explicit charset: the assets are UTF-8 and must not be sniffed otherwise.
fn content_type_of(mimetype: &str) -> HeaderValue {
    let textual = mimetype.starts_with("text/")
        || mimetype == "application/javascript"
        || mimetype == "application/json"
        || mimetype == "image/svg+xml";
    let value = if textual && !mimetype.contains("charset") {
        format!("{mimetype}; charset=utf-8")
    } else {
        mimetype.to_owned()
    };
    HeaderValue::from_str(&value)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"))
}

fn etag_of(hash: &[u8; 32]) -> String {
    let hex: String = hash[..16]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("\"{hex}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_types_get_a_charset() {
        let check = |mimetype: &str, expected: &str| {
            assert_eq!(content_type_of(mimetype).to_str().unwrap(), expected);
        };
        check("text/css", "text/css; charset=utf-8");
        check(
            "application/javascript",
            "application/javascript; charset=utf-8",
        );
        check("image/png", "image/png");
    }

    #[test]
    fn the_page_names_the_demo_model() {
        let page = IndexPage {
            version: "1.2.3",
            model: "demo",
            is_demo: true,
        };
        let html = page.render().unwrap();
        assert!(html.contains("demo model (offline, built in)"));
        assert!(html.contains(r#"<script type="module" src="/assets/main.js">"#));
        assert!(
            !html.contains("<script>"),
            "no inline script: the CSP forbids it"
        );
    }
}

//! The bundled web UI: the page at `/` (an askama template, `web/index.html`), the page a
//! pairing link of `openvaala pair` opens at `/pair` (`web/pair.html`; the code stays in the
//! link's fragment, which never reaches the service, and its script redeems it), its own files
//! under `/assets/` (ES modules, CSS and icons from `web/assets/`), the third-party browser code
//! under `/vendor/` (`web/vendor/`, written by `scripts/vendor-web`), and what makes it an
//! installable app, at the root (`web/root/`): the manifest at `/manifest.webmanifest` and the
//! service worker at `/sw.js` (served from the root so that its scope is the whole UI), which
//! keeps the app's files for opening offline. All are embedded with rust-embed. The UI is a
//! client of the public API like any other: this module serves files and holds no conversation
//! logic.

use std::borrow::Cow;

use askama::Template;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use rust_embed::{EmbeddedFile, RustEmbed};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::state::AppState;
use crate::config::DEMO_MODEL;

/// The page allows only its own script, style, API, service worker and manifest: no inline
/// script, no third-party origin, no framing. `data:` images are allowed for images sent inline
/// in messages.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; worker-src 'self'; \
     manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The service worker fetches the app's files from this origin and nothing else; the icon of
/// the notifications it shows is one of them.
const WORKER_SECURITY_POLICY: &str = "default-src 'none'; connect-src 'self'; img-src 'self'";

/// Assets are not content-hashed, so browsers revalidate them (cheaply, with the ETag) rather
/// than keep a stale `app.js` after an upgrade.
const ASSET_CACHE_CONTROL: &str = "no-cache";

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/pair", get(pair))
        .route("/assets/{*path}", get(asset))
        .route("/vendor/{*path}", get(vendored))
        .route("/manifest.webmanifest", get(manifest))
        .route("/sw.js", get(service_worker))
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

/// `web/root/`: the files served at the root of the site, the web app manifest and the service
/// worker's code (read from disk in debug builds too).
#[derive(RustEmbed)]
#[folder = "web/root"]
struct Root;

#[derive(Template)]
#[template(path = "index.html", config = "web/askama.toml")]
struct IndexPage<'a> {
    version: &'a str,
    /// The default agent's model, shown in the sidebar.
    model: &'a str,
    /// The built-in offline model answers: the page says so, so nobody mistakes it for an LLM.
    is_demo: bool,
}

/// Where a pairing link lands: the page reads the code from the fragment and signs the browser
/// in with `POST /api/pair`.
#[derive(Template)]
#[template(path = "pair.html", config = "web/askama.toml")]
struct PairPage<'a> {
    version: &'a str,
}

async fn index(State(state): State<AppState>) -> Result<Response, ApiError> {
    let config = state.runtime.config();
    let model = config.default_agent().model.as_str();
    let page = IndexPage {
        version: env!("CARGO_PKG_VERSION"),
        model,
        is_demo: model == DEMO_MODEL,
    };
    page_response(page.render())
}

async fn pair() -> Result<Response, ApiError> {
    let page = PairPage {
        version: env!("CARGO_PKG_VERSION"),
    };
    page_response(page.render())
}

/// A rendered page, with the headers every page of the UI carries.
fn page_response(rendered: askama::Result<String>) -> Result<Response, ApiError> {
    let html = rendered.map_err(|error| {
        tracing::error!(%error, "rendering a UI page failed");
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

/// The web app manifest, of the type browsers look for (mime-guess would say the same; this
/// does not depend on it).
async fn manifest(request_headers: HeaderMap) -> Response {
    let mut response = serve_file("manifest.webmanifest", Root::get, &request_headers);
    if response.status() == StatusCode::OK {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/manifest+json; charset=utf-8"),
        );
    }
    response
}

/// `web/root/sw.js` after a first line the service writes: the name of the cache the worker
/// keeps the app's files in and the list of those files ([`OfflineFiles`]). The worker's bytes
/// thus change whenever one of the files does, which is what makes the browser install it again
/// (and drop the old cache). Browsers fetch a worker's script past their HTTP cache; `no-cache`
/// says the same to anything between.
async fn service_worker() -> Response {
    let Some(source) = Root::get("sw.js") else {
        return ApiError::NotFound("no service worker".to_owned()).into_response();
    };
    let files = OfflineFiles::of_this_build(&source.metadata.sha256_hash());
    let build = serde_json::to_string(&files).expect("a list of strings is JSON");
    let mut body = format!(
        "// Written by the service: this build's cache, and the app's files to keep in it.\n\
         const BUILD = {build};\n\n"
    )
    .into_bytes();
    body.extend_from_slice(&source.data);
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/javascript; charset=utf-8"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static(ASSET_CACHE_CONTROL),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(WORKER_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
        ],
        body,
    )
        .into_response()
}

/// What the service worker keeps so the page opens without the service: the page, the manifest,
/// every file of `web/assets/` (the icons among them) and the vendored code and styles (not
/// their licences). Never an API path: those are not files of the app.
#[derive(serde::Serialize)]
struct OfflineFiles {
    /// `openvaala-<version>-<digest of the files and the worker>`: a new name for every change.
    cache: String,
    files: Vec<String>,
}

impl OfflineFiles {
    fn of_this_build(worker_hash: &[u8; 32]) -> Self {
        let mut files = vec!["/".to_owned(), "/manifest.webmanifest".to_owned()];
        let mut digest = Sha256::new();
        digest.update(env!("CARGO_PKG_VERSION"));
        digest.update(worker_hash);
        let kept = |folder: &str, path: &str, file: Option<EmbeddedFile>| {
            let file = file?;
            Some((format!("/{folder}/{path}"), file.metadata.sha256_hash()))
        };
        let assets = Assets::iter().filter_map(|path| kept("assets", &path, Assets::get(&path)));
        let vendored = Vendored::iter()
            .filter(|path| {
                [".js", ".mjs", ".css"]
                    .iter()
                    .any(|ext| path.ends_with(ext))
            })
            .filter_map(|path| kept("vendor", &path, Vendored::get(&path)));
        let manifest = Root::get("manifest.webmanifest").map(|file| file.metadata.sha256_hash());
        for (url, hash) in assets.chain(vendored) {
            digest.update(url.as_bytes());
            digest.update(hash);
            files.push(url);
        }
        if let Some(hash) = manifest {
            digest.update(hash);
        }
        let short: String = digest.finalize()[..6]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        Self {
            cache: format!("openvaala-{}-{short}", env!("CARGO_PKG_VERSION")),
            files,
        }
    }
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
        assert!(html.contains(r#"<link rel="manifest" href="/manifest.webmanifest">"#));
    }

    async fn body_of(response: Response) -> Vec<u8> {
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn the_manifest_is_json_of_its_type_and_its_icons_exist() {
        let response = manifest(HeaderMap::new()).await;
        assert_eq!(response.status(), StatusCode::OK);
        let content_type = response.headers()[header::CONTENT_TYPE].to_str().unwrap();
        assert!(
            content_type.starts_with("application/manifest+json"),
            "{content_type}"
        );
        let manifest: serde_json::Value = serde_json::from_slice(&body_of(response).await).unwrap();
        assert_eq!(manifest["name"], "OpenVaala");
        assert_eq!(manifest["start_url"], "/");
        assert_eq!(manifest["scope"], "/");
        assert_eq!(manifest["display"], "standalone");
        let icons = manifest["icons"].as_array().unwrap();
        for size in ["192x192", "512x512"] {
            assert!(icons.iter().any(|icon| icon["sizes"] == size), "{size}");
        }
        assert!(icons.iter().any(|icon| icon["purpose"] == "maskable"));
        for icon in icons {
            let src = icon["src"].as_str().unwrap();
            let path = src.strip_prefix("/assets/").expect("an icon is an asset");
            assert!(Assets::get(path).is_some(), "{src} is missing");
        }
    }

    #[tokio::test]
    async fn the_service_worker_keeps_the_app_files_and_no_api_path() {
        let response = service_worker().await;
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert!(
            headers[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/javascript")
        );
        assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
        let script = String::from_utf8(body_of(response).await).unwrap();
        let line = script.lines().nth(1).unwrap();
        let build: serde_json::Value = serde_json::from_str(
            line.strip_prefix("const BUILD = ")
                .and_then(|rest| rest.strip_suffix(';'))
                .unwrap(),
        )
        .unwrap();
        let cache = build["cache"].as_str().unwrap();
        assert!(cache.starts_with("openvaala-"), "{cache}");
        let files: Vec<&str> = build["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|file| file.as_str().unwrap())
            .collect();
        for wanted in [
            "/",
            "/manifest.webmanifest",
            "/assets/main.js",
            "/assets/app.css",
            "/assets/favicon.svg",
            "/assets/icons/icon-192.png",
            "/vendor/marked/marked.esm.js",
        ] {
            assert!(files.contains(&wanted), "{wanted} is not kept: {files:?}");
        }
        assert!(
            files.iter().all(|file| !file.starts_with("/api")
                && *file != "/metrics"
                && !file.contains("LICENSE")),
            "{files:?}"
        );
        // The same build names the same cache; the worker's own code follows.
        assert_eq!(
            OfflineFiles::of_this_build(&Root::get("sw.js").unwrap().metadata.sha256_hash()).cache,
            cache
        );
        assert!(script.contains("addEventListener('fetch'"));
    }

    #[tokio::test]
    async fn the_pairing_page_has_its_own_script_and_the_pages_headers() {
        let response = pair().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let headers = response.headers().clone();
        assert_eq!(
            headers[header::CONTENT_SECURITY_POLICY],
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(headers[header::REFERRER_POLICY], "no-referrer");
        let html = String::from_utf8(body_of(response).await).unwrap();
        assert!(html.contains(r#"<script type="module" src="/assets/pair.js">"#));
        assert!(
            !html.contains("<script>"),
            "no inline script: the CSP forbids it"
        );
        assert!(Assets::get("pair.js").is_some());
    }

    #[test]
    fn the_policy_allows_the_worker_and_the_manifest_from_here_only() {
        assert!(CONTENT_SECURITY_POLICY.contains("worker-src 'self'"));
        assert!(CONTENT_SECURITY_POLICY.contains("manifest-src 'self'"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }
}

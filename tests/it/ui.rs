//! The bundled web UI over HTTP: the page, its assets, their headers. In debug builds rust-embed
//! reads `web/assets/` from disk (no `debug-embed` feature), so this checks the files and the
//! routes, not the embedding itself, which only release builds do.

use reqwest::header;

use crate::harness::{Server, ServerOptions};

#[tokio::test]
async fn the_page_is_html_with_a_strict_csp_and_names_the_demo_model() {
    let server = Server::start().await;
    let response = server.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    let content_type = headers[header::CONTENT_TYPE].to_str().unwrap();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let csp = headers
        .get(header::CONTENT_SECURITY_POLICY)
        .expect("the page sends a Content-Security-Policy")
        .to_str()
        .unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert!(!csp.contains("unsafe-eval"), "{csp}");
    let page = response.text().await.unwrap();
    assert!(
        page.contains(r#"<script type="module" src="/assets/main.js">"#),
        "{page}"
    );
    assert!(page.contains(r#"href="/assets/app.css""#), "{page}");
    assert!(page.contains("demo model (offline, built in)"), "{page}");
    assert!(page.contains(env!("CARGO_PKG_VERSION")), "{page}");
    assert!(
        !page.contains("<script>"),
        "no inline script: the CSP forbids it"
    );
}

#[tokio::test]
async fn the_page_names_a_configured_model() {
    let config = r#"
[providers.local]
protocol = "openai_chat"
base_url = "http://127.0.0.1:9/v1"

[models.coder]
provider = "local"
name = "qwen2.5-coder:7b"
context_window = 32768
max_output_tokens = 4096

[agents.default]
description = "General coding agent"
model = "coder"
"#;
    let server = Server::start_with(ServerOptions {
        config: Some(config.to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let page = server
        .client
        .get(server.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("coder"), "{page}");
    assert!(!page.contains("demo model (offline, built in)"), "{page}");
}

#[tokio::test]
async fn assets_have_their_content_types_and_revalidate() {
    let server = Server::start().await;
    for (path, expected) in [
        ("/assets/main.js", "javascript"),
        ("/assets/markdown.js", "javascript"),
        ("/assets/app.css", "text/css"),
        // Vendored libraries: module scripts need a JavaScript type, `.mjs` included.
        ("/vendor/marked/marked.esm.js", "javascript"),
        ("/vendor/dompurify/purify.es.mjs", "javascript"),
        ("/vendor/highlight.js/a11y-dark.min.css", "text/css"),
    ] {
        let response = server.client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers().clone();
        let content_type = headers[header::CONTENT_TYPE].to_str().unwrap();
        assert!(content_type.contains(expected), "{path}: {content_type}");
        assert!(headers.contains_key(header::CACHE_CONTROL), "{path}");
        assert!(!response.bytes().await.unwrap().is_empty(), "{path}");

        // The ETag lets a browser revalidate without downloading the file again.
        let etag = headers[header::ETAG].clone();
        let again = server
            .client
            .get(server.url(path))
            .header(header::IF_NONE_MATCH, etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}");
    }
}

#[tokio::test]
async fn an_unknown_asset_is_a_404() {
    let server = Server::start().await;
    for path in [
        "/assets/nothing-here.js",
        "/assets/..%2F..%2FCargo.toml",
        "/assets/%2E%2E/index.html",
        "/vendor/nothing-here.js",
        "/vendor/..%2F..%2FCargo.toml",
    ] {
        let (status, body) = server.get(path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(body["error"]["code"], "not_found", "{path}");
    }
}

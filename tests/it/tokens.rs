//! Named tokens, pairing and HTTPS, driven like clients: `openvaala token add|list|revoke` and
//! `/api/tokens` make and revoke tokens whose scope the API enforces and whose revocation ends
//! their event streams at once; `openvaala pair` signs a browser in once through a cookie whose
//! changes need the CSRF token; `[server] tls_cert` serves HTTPS and a renewed certificate from
//! the next connection on.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::harness::{Server, ServerOptions, TIMEOUT, fill_list, with_data_dir};

/// A client that sends `token` as its bearer token.
pub fn client_with(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    openvaala::tls::client_builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

async fn status_and_json(request: reqwest::RequestBuilder) -> (u16, Value) {
    crate::harness::read(request.send().await.unwrap()).await
}

/// `openvaala token add NAME --scope SCOPE`: the token printed.
async fn add_token(data_dir: &Path, name: &str, scope: &str) -> String {
    let (ok, output) = with_data_dir(&["token", "add", name, "--scope", scope], data_dir).await;
    assert!(ok, "{output}");
    let token = output
        .lines()
        .find(|line| line.starts_with("ovt_"))
        .unwrap_or_else(|| panic!("no token printed: {output}"));
    token.to_owned()
}

#[tokio::test]
async fn named_tokens_hold_to_their_scope_and_stop_at_once_when_revoked() {
    let server = Server::start().await;
    let reader = add_token(&server.data_dir, "dashboard", "read").await;
    let read = client_with(&reader);

    // A read token follows and lists...
    let (status, list) = status_and_json(read.get(server.url("/api/conversations"))).await;
    assert_eq!(status, 200, "{list}");
    let (status, session) = status_and_json(read.get(server.url("/api/session"))).await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["name"], "dashboard");
    assert_eq!(session["scope"], "read");
    assert_eq!(session["label"], "token:dashboard");
    assert_eq!(session["csrf"], Value::Null);
    // ...but changes nothing, and cannot see the other tokens.
    let (status, body) = status_and_json(
        read.post(server.url("/api/conversations"))
            .json(&json!({"text": "hello"})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("may only read")
    );
    let (status, _) = status_and_json(read.get(server.url("/api/tokens"))).await;
    assert_eq!(status, 403);
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 0);

    // A full token made through the API works for everything, and is shown once.
    let (status, made) = server
        .post("/api/tokens", json!({"name": "phone", "scope": "full"}))
        .await;
    assert_eq!(status, 201, "{made}");
    let phone = client_with(made["token"].as_str().unwrap());
    let (status, created) = status_and_json(
        phone
            .post(server.url("/api/conversations"))
            .json(&json!({"text": "from the phone"})),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let (_, tokens) = server.get("/api/tokens").await;
    let tokens = tokens["tokens"].as_array().unwrap().clone();
    assert_eq!(tokens.len(), 2, "{tokens:?}");
    assert!(tokens.iter().all(|token| token.get("token").is_none()));
    let phone_info = tokens.iter().find(|t| t["name"] == "phone").unwrap();
    assert_eq!(phone_info["kind"], "token");
    assert!(phone_info["last_used_at"].is_string(), "{phone_info}");
    // The file keeps hashes only.
    let file = std::fs::read_to_string(server.data_dir.join("tokens.json")).unwrap();
    assert!(!file.contains(&made["token"].as_str().unwrap()[4..]));
    assert!(!file.contains(&reader[4..]));
    // Bad input changes nothing.
    let (status, body) = server
        .post("/api/tokens", json!({"name": " ", "scope": "full"}))
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = server
        .post("/api/tokens", json!({"name": "x", "scope": "admin"}))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        std::fs::read_to_string(server.data_dir.join("tokens.json")).unwrap(),
        file
    );

    // Revoked through the API: the phone's open stream ends at once, its requests get 401.
    let response = phone.get(server.url("/api/events")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    assert!(stream.next().await.is_some(), "the stream's first event");
    let id = made["id"].as_str().unwrap();
    let (status, _) = server.delete(&format!("/api/tokens/{id}")).await;
    assert_eq!(status, 204);
    let ended = tokio::time::timeout(TIMEOUT, async {
        while let Some(chunk) = stream.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the revoked token's stream did not end");
    let (status, _) = status_and_json(phone.get(server.url("/api/conversations"))).await;
    assert_eq!(status, 401);

    // Revoked from the command line (another process): its stream ends too, within a second
    // or so.
    let response = read.get(server.url("/api/events")).send().await.unwrap();
    let mut stream = response.bytes_stream();
    assert!(stream.next().await.is_some());
    let (ok, listed) = with_data_dir(&["token", "list"], &server.data_dir).await;
    assert!(
        ok && listed.contains("dashboard") && !listed.contains(&reader),
        "{listed}"
    );
    let (ok, output) = with_data_dir(&["token", "revoke", "dashboard"], &server.data_dir).await;
    assert!(ok, "{output}");
    let ended = tokio::time::timeout(TIMEOUT, async {
        while let Some(Ok(_)) = stream.next().await {}
    })
    .await;
    assert!(
        ended.is_ok(),
        "the stream of a token revoked by the CLI did not end"
    );
    let (status, _) = status_and_json(read.get(server.url("/api/conversations"))).await;
    assert_eq!(status, 401);
    let (ok, output) = with_data_dir(&["token", "revoke", "dashboard"], &server.data_dir).await;
    assert!(!ok && output.contains("no token"), "{output}");
}

#[tokio::test]
async fn an_approval_records_which_token_answered_it() {
    let server = Server::start_with(ServerOptions {
        config: Some(
            "[agents.default]\ndescription = \"asks\"\nmodel = \"demo\"\n[agents.default.permissions]\nshell = \"ask\"\n"
                .to_owned(),
        ),
        ..ServerOptions::default()
    })
    .await;
    let token = add_token(&server.data_dir, "laptop", "full").await;
    let laptop = client_with(&token);
    let cwd = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (status, created) = server
        .post(
            "/api/conversations",
            json!({"text": "/shell true", "cwd": cwd.path().to_str().unwrap()}),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let approval = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (_, list) = server.get("/api/approvals").await;
            if let Some(approval) = list["approvals"].as_array().unwrap().first() {
                return approval.clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("an approval");
    let id = approval["id"].as_str().unwrap();
    let (status, answered) = status_and_json(
        laptop
            .post(server.url(&format!("/api/approvals/{id}")))
            .json(&json!({"decision": "allow_once"})),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["resolution"]["decided_by"], "token:laptop");
}

/// The code of a link `openvaala pair` printed, and the whole output.
async fn pair(data_dir: &Path, extra: &[&str]) -> (String, String) {
    let mut args = vec!["pair"];
    args.extend_from_slice(extra);
    let (ok, output) = with_data_dir(&args, data_dir).await;
    assert!(ok, "{output}");
    let code = output
        .split("/pair#code=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no link: {output}"))
        .to_owned();
    (code, output)
}

/// A client without any token or cookie.
fn anonymous() -> reqwest::Client {
    openvaala::tls::client_builder().build().unwrap()
}

fn session_cookie(response: &reqwest::Response) -> String {
    response
        .headers()
        .get(reqwest::header::SET_COOKIE)
        .expect("a cookie")
        .to_str()
        .unwrap()
        .to_owned()
}

/// A service listening on every interface prints no link to `0.0.0.0`: `pair` names this
/// machine (the link is opened on another device), `token url` its loopback.
#[tokio::test]
async fn links_of_a_service_on_every_interface_name_a_reachable_host() {
    let server = Server::start_with(ServerOptions {
        addr: Some("0.0.0.0:0".to_owned()),
        env: vec![("OPENVAALA_TOKEN".into(), "0123456789abcdef-strong".into())],
        ..Default::default()
    })
    .await;
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let (_, output) = pair(&server.data_dir, &["--no-qr"]).await;
    assert!(
        output.contains(&format!("http://{}:{port}/pair#code=", host.trim())),
        "{output}"
    );
    let (ok, output) = with_data_dir(&["token", "url"], &server.data_dir).await;
    assert!(ok, "{output}");
    assert!(
        output.starts_with(&format!("http://127.0.0.1:{port}/#token=")),
        "{output}"
    );
}

#[tokio::test]
async fn a_pairing_link_signs_one_browser_in_once_and_its_changes_need_the_csrf_token() {
    let server = Server::start().await;
    let (code, output) = pair(&server.data_dir, &[]).await;
    // The link is the running service's, with a QR code above it.
    assert!(
        output.contains(&format!("{}/pair#code={code}", server.base)),
        "{output}"
    );
    assert!(
        output.contains('█') || output.contains('▀'),
        "a QR code: {output}"
    );

    let browser = anonymous();
    let response = browser
        .post(server.url("/api/pair"))
        .json(&json!({"code": code, "name": "Pixel"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let cookie = session_cookie(&response);
    assert!(cookie.starts_with("openvaala_session=ovt_"), "{cookie}");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(flag), "{flag} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let (_, session) = crate::harness::read(response).await;
    assert_eq!(session["via"], "cookie");
    assert_eq!(session["label"], "device:Pixel");
    let csrf = session["csrf"].as_str().unwrap().to_owned();
    let cookie = cookie.split(';').next().unwrap().to_owned();

    // The link works once.
    let (status, body) = status_and_json(
        browser
            .post(server.url("/api/pair"))
            .json(&json!({"code": code, "name": "again"})),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("used already")
    );

    // The cookie reads; a change needs the CSRF token too.
    let (status, _) = status_and_json(
        browser
            .get(server.url("/api/conversations"))
            .header("cookie", &cookie),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = status_and_json(
        browser
            .post(server.url("/api/conversations"))
            .header("cookie", &cookie)
            .json(&json!({"text": "hi"})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("x-csrf-token")
    );
    let (status, body) = status_and_json(
        browser
            .post(server.url("/api/conversations"))
            .header("cookie", &cookie)
            .header("x-csrf-token", "0".repeat(64))
            .json(&json!({"text": "hi"})),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    let (_, list) = server.get("/api/conversations").await;
    assert_eq!(list["conversations"].as_array().unwrap().len(), 0);
    let (status, body) = status_and_json(
        browser
            .post(server.url("/api/conversations"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .json(&json!({"text": "hi"})),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    // The device is listed; signing out revokes it and clears the cookie.
    let (_, tokens) = server.get("/api/tokens").await;
    let device = &tokens["tokens"][0];
    assert_eq!(device["kind"], "device");
    assert_eq!(device["name"], "Pixel");
    let response = browser
        .delete(server.url("/api/session"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    assert!(session_cookie(&response).contains("Max-Age=0"));
    let (status, _) = status_and_json(
        browser
            .get(server.url("/api/conversations"))
            .header("cookie", &cookie),
    )
    .await;
    assert_eq!(status, 401);
    let (_, tokens) = server.get("/api/tokens").await;
    assert_eq!(tokens["tokens"].as_array().unwrap().len(), 0);
    // A bearer token has no browser session to end.
    let (status, body) = server.delete("/api/session").await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "not_a_browser_session", "{body}");

    // Past 1,000 tokens another is refused as a limit, and nothing changes. (The file is
    // filled by hand: the store reads it again when it changed.)
    let (status, body) = server.post("/api/tokens", json!({"name": "first"})).await;
    assert_eq!(status, 201, "{body}");
    let path = server.data_dir.join("tokens.json");
    let full = fill_list(&path, "tokens", 1000, |token, n| {
        token["id"] = json!(format!("tok_{n:016x}"));
        token["name"] = json!(format!("t{n}"));
        token["hash"] = json!(format!("{n:064x}"));
    });
    let (status, body) = server
        .post("/api/tokens", json!({"name": "one more"}))
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "limit_reached", "{body}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), full);

    // A code that never was is refused the same way, and a missing one is a bad request.
    let (status, _) = status_and_json(
        browser
            .post(server.url("/api/pair"))
            .json(&json!({"code": "f".repeat(32)})),
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = status_and_json(browser.post(server.url("/api/pair")).json(&json!({}))).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn behind_a_trusted_proxy_the_cookie_is_secure_and_only_there() {
    let server = Server::start_with(ServerOptions {
        config: Some("[server]\ntrusted_proxies = [\"127.0.0.1\"]\n".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    let (code, _) = pair(&server.data_dir, &["--no-qr", "--scope", "read"]).await;
    let response = anonymous()
        .post(server.url("/api/pair"))
        .header("x-forwarded-proto", "https")
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(session_cookie(&response).contains("; Secure"));
    let cookie = session_cookie(&response);
    let (_, session) = crate::harness::read(response).await;
    assert_eq!(session["scope"], "read");
    assert_eq!(session["name"], "browser");
    // A read-only device changes nothing, but may sign itself out.
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let csrf = session["csrf"].as_str().unwrap();
    let (status, _) = status_and_json(
        anonymous()
            .post(server.url("/api/conversations"))
            .header("cookie", &cookie)
            .header("x-csrf-token", csrf)
            .json(&json!({"text": "hi"})),
    )
    .await;
    assert_eq!(status, 403);
    let signed_out = anonymous()
        .delete(server.url("/api/session"))
        .header("cookie", &cookie)
        .header("x-csrf-token", csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_out.status(), 204);

    let untrusted = Server::start().await;
    let (code, _) = pair(&untrusted.data_dir, &["--no-qr"]).await;
    let response = anonymous()
        .post(untrusted.url("/api/pair"))
        .header("x-forwarded-proto", "https")
        .json(&json!({"code": code}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(!session_cookie(&response).contains("Secure"));
}

/// A self-signed certificate for 127.0.0.1 named `name`: (certificate PEM, key PEM, DER).
fn certificate(name: &str) -> (String, String, Vec<u8>) {
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// The certificate a fresh HTTPS connection to `url` is served, and the answer's status.
async fn served_certificate(url: &str, token: &str) -> (Vec<u8>, u16) {
    let client = openvaala::tls::client_builder()
        .tls_danger_accept_invalid_certs(true)
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let response = client.get(url).bearer_auth(token).send().await.unwrap();
    let info = response
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .expect("TLS information");
    (
        info.peer_certificate().unwrap().to_vec(),
        response.status().as_u16(),
    )
}

#[tokio::test]
async fn https_is_served_and_a_renewed_certificate_is_picked_up_without_a_restart() {
    let temp = tempfile::tempdir().unwrap();
    let (cert, key, first) = certificate("first");
    std::fs::write(temp.path().join("cert.pem"), &cert).unwrap();
    std::fs::write(temp.path().join("key.pem"), &key).unwrap();
    let data_dir = temp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    // Relative paths are read beside the config file (the harness puts it beside the data
    // directory).
    let server = Server::start_with(ServerOptions {
        data_dir: Some(data_dir.clone()),
        config: Some("[server]\ntls_cert = \"cert.pem\"\ntls_key = \"key.pem\"\n".to_owned()),
        ..ServerOptions::default()
    })
    .await;
    assert!(
        server.base.starts_with("https://127.0.0.1:"),
        "{}",
        server.base
    );
    let url = server.url("/api/conversations");
    let (served, status) = served_certificate(&url, &server.token).await;
    assert_eq!(status, 200);
    assert_eq!(served, first);
    // Plain HTTP on the same port gets no answer.
    let plain = anonymous()
        .get(url.replace("https://", "http://"))
        .send()
        .await;
    assert!(
        plain.is_err() || plain.unwrap().status() != 200,
        "plain HTTP was served"
    );
    // The CLI clients find the service over HTTPS: the sign-in link says https.
    let (ok, link) = with_data_dir(&["token", "url"], &data_dir).await;
    assert!(ok && link.starts_with("https://"), "{link}");

    // A broken certificate written over it: the previous one goes on being served.
    // (The files are looked at when a connection comes.)
    std::fs::write(temp.path().join("cert.pem"), "not a certificate").unwrap();
    let warned = tokio::time::timeout(TIMEOUT, async {
        loop {
            let (served, _) = served_certificate(&url, &server.token).await;
            assert_eq!(served, first);
            if server
                .log
                .lock()
                .unwrap()
                .iter()
                .any(|line| line.contains("cannot be used; serving the previous one"))
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(warned.is_ok(), "the broken certificate was never noticed");

    // A renewal: the next connections get the new certificate.
    let (cert, key, second) = certificate("second");
    std::fs::write(temp.path().join("key.pem"), &key).unwrap();
    std::fs::write(temp.path().join("cert.pem"), &cert).unwrap();
    let renewed = tokio::time::timeout(TIMEOUT, async {
        loop {
            if served_certificate(&url, &server.token).await.0 == second {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(renewed.is_ok(), "the renewed certificate was never served");
}

#[tokio::test]
async fn a_certificate_that_cannot_be_used_stops_the_start_with_the_reason() {
    let temp = tempfile::tempdir().unwrap();
    let config = format!(
        "[server]\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
        temp.path().join("missing.pem").display(),
        temp.path().join("key.pem").display()
    );
    let stderr = crate::harness::serve_refuses(&config).await;
    assert!(stderr.contains("cannot serve HTTPS"), "{stderr}");
    assert!(stderr.contains("missing.pem"), "{stderr}");
    let stderr = crate::harness::serve_refuses("[server]\ntls_cert = \"a.pem\"\n").await;
    assert!(stderr.contains("tls_key"), "{stderr}");
}

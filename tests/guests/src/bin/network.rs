//! Reaches for the network as a component can: `{"get": URL}` through
//! `wasi:http` (the host sends it through the call's egress proxy, which
//! applies the call's grant), `{"tcp": "HOST:PORT"}` through
//! `wasi:sockets` (denied to every component). Reports what happened as
//! data; the tests decide what must fail. Its capability `network.run`
//! declares any public host, and `network.none` no network.

use serde_json::{Value, json};

fn main() {
    let request = modhost_guests::read_request();
    if request.get("method").and_then(Value::as_str) == Some("describe") {
        let capability = |id: &str, network: bool| {
            json!({
                "id": id,
                "title": id,
                "description": "reach for the network",
                "input_schema": {"type": "object"},
                "effects": {"reads": [], "writes": [], "network": network, "spawns": [], "cost": "remote"},
            })
        };
        modhost_guests::answer(
            &request,
            json!({
                "id": modhost_guests::module_id(),
                "version": "0.1.0",
                "title": "guest network",
                "description": "a wasm runner test guest",
                "capabilities": [capability("network.run", true), capability("network.none", false)],
            }),
        );
        return;
    }
    let input = modhost_guests::input(&request);
    let output = if let Some(url) = input.get("get").and_then(Value::as_str) {
        get(url)
    } else if let Some(address) = input.get("tcp").and_then(Value::as_str) {
        match std::net::TcpStream::connect(address) {
            Ok(_) => json!({"ok": true}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        }
    } else {
        json!({"ok": false, "error": "unknown attempt"})
    };
    modhost_guests::answer_output(&request, &output);
}

/// GET `url` with `wasi:http/outgoing-handler`.
#[cfg(target_os = "wasi")]
fn get(url: &str) -> Value {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingRequest, Scheme};

    let (scheme, rest) = url.split_once("://").unwrap_or(("http", url));
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| rest.split_at(i));
    let outgoing = OutgoingRequest::new(Fields::new());
    let _ = outgoing.set_method(&Method::Get);
    let _ = outgoing.set_scheme(Some(if scheme == "https" {
        &Scheme::Https
    } else {
        &Scheme::Http
    }));
    let _ = outgoing.set_authority(Some(authority));
    let _ = outgoing.set_path_with_query(Some(path));
    let pending = match outgoing_handler::handle(outgoing, None) {
        Ok(pending) => pending,
        Err(e) => return json!({"ok": false, "error": format!("{e:?}")}),
    };
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return json!({"ok": false, "error": format!("{e:?}")}),
        other => return json!({"ok": false, "error": format!("{other:?}")}),
    };
    let status = response.status();
    let refused = response
        .headers()
        .get("x-modhost-refused")
        .first()
        .map(|v| String::from_utf8_lossy(v).into_owned());
    let mut text = Vec::new();
    if let Ok(body) = response.consume()
        && let Ok(stream) = body.stream()
    {
        while text.len() < 65536 {
            match stream.blocking_read(65536) {
                Ok(chunk) => text.extend_from_slice(&chunk),
                Err(_) => break,
            }
        }
    }
    json!({
        "ok": (200..300).contains(&status),
        "status": status,
        "refused": refused,
        "body": String::from_utf8_lossy(&text),
    })
}

#[cfg(not(target_os = "wasi"))]
fn get(_url: &str) -> Value {
    json!({"ok": false, "error": "wasi:http is for the wasm32-wasip2 build"})
}

//! `GET /api`: the OpenAPI document lists exactly the paths and methods the
//! server answers (probed, as a client would find them), every route of
//! the book's table (docs/src/server.md) is in it, it validates with `openapi-spec-validator`, and
//! real answers validate against its schemas.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use super::*;

/// The methods probed on every path.
const METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];

/// Paths a route could plausibly be added at, beyond the document's and
/// the book's: the prefixes of the property routes, and the usual names of
/// health, version and API endpoints. A route added at one of them without
/// its documentation fails the probe.
const GUESSES: [&str; 22] = [
    "/api.json",
    "/api/",
    "/openapi",
    "/openapi.json",
    "/collections",
    "/collections/{cid}",
    "/collections/{cid}/items",
    "/collections/{cid}/items/{fid}",
    "/collections/{cid}/items/{fid}/tproperties",
    "/collections/{cid}/items/{fid}/tproperties/{pname}",
    "/collections/{cid}/items/{fid}/tproperties/{pname}/stream",
    "/collections/{cid}/items/{fid}/tgsequence",
    "/collections/{cid}/items/{fid}/tgsequence/ingest",
    "/collections/{cid}/items/{fid}/tgsequence/queries",
    "/ingest",
    "/ingest/mqtt",
    "/queries",
    "/health",
    "/healthz",
    "/ready",
    "/status",
    "/version",
];

/// A template's path with its parameters filled in.
fn fill(template: &str) -> String {
    template
        .replace("{cid}", "c")
        .replace("{fid}", "f")
        .replace("{pname}", "p")
        .replace("{qid}", "0123456789abcdef0123456789abcdef")
}

/// The routes of the book's table (docs/src/server.md, `P/queries`
/// written out), as `(method, path template)`.
fn book_routes() -> BTreeSet<(String, String)> {
    let readme = crate::util::book("server.md");
    let start = readme
        .find("| method | path | answer |")
        .expect("server.md has the routes table");
    readme[start..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let path = cells[2].split('`').nth(1).expect("a `path` cell");
            let path = if let Some(rest) = path.strip_prefix('P') {
                format!("/collections/{{cid}}/items/{{fid}}/tproperties/{{pname}}{rest}")
            } else if let Some(rest) = path.strip_prefix('S') {
                format!("/collections/{{cid}}/items/{{fid}}/tgsequence{rest}")
            } else {
                path.to_owned()
            };
            (cells[1].to_owned(), path)
        })
        .collect()
}

/// Whether the server answers `method` on `path` with a route of its own:
/// not the fallback's 404, nor a 405.
async fn answers(client: &mut Client, method: &str, path: &str) -> bool {
    let response = client.request(method, path, &[], b"").await;
    let fallback = response.status == 404
        && response.json()["description"]
            .as_str()
            .is_some_and(|d| d.starts_with("no such resource"));
    !(fallback || response.status == 405)
}

#[tokio::test]
async fn the_api_lists_every_route_the_server_answers_and_only_those() {
    let server = Serve::start("api-routes", &["--token", "s3cret"], &[]);
    let refused = server.client().get("/api").await;
    assert_eq!(refused.status, 401, "{refused:?}");
    let mut client = server.client().with_token("s3cret");
    let response = client.get("/api").await;
    assert_eq!(response.status, 200, "{response:?}");
    assert_eq!(
        response.header("content-type"),
        Some("application/vnd.oai.openapi+json;version=3.1")
    );
    let document = response.json();
    assert_eq!(document["openapi"], "3.1.0");
    let documented: BTreeSet<(String, String)> = document["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .expect("a path item")
                .keys()
                .map(|method| (method.to_uppercase(), path.clone()))
        })
        .collect();
    let book = book_routes();
    let undocumented: Vec<_> = book.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "the book (server.md) lists {undocumented:?}, /api does not"
    );
    let templates: BTreeSet<String> = documented
        .iter()
        .map(|(_, path)| path.clone())
        .chain(book.iter().map(|(_, path)| path.clone()))
        .chain(GUESSES.iter().map(|path| path.to_string()))
        .collect();
    let mut answered = BTreeSet::new();
    for template in &templates {
        for method in METHODS {
            if answers(&mut client, method, &fill(template)).await {
                answered.insert((method.to_owned(), template.clone()));
            }
        }
    }
    assert_eq!(
        answered, documented,
        "answered (left) vs documented (right)"
    );
    // The landing links name it, as OGC API – Common's `service-desc`.
    let landing = client.get("/?f=json").await.json();
    let links = landing["links"].as_array().expect("links");
    assert!(
        links
            .iter()
            .any(|l| l["rel"] == "service-desc" && l["href"] == "/api"),
        "{landing}"
    );
}

#[tokio::test]
async fn without_a_token_the_api_requires_none() {
    let server = Serve::start("api-open", &[], &[]);
    let document = server.client().get("/api").await.json();
    assert!(document.get("security").is_none(), "{document}");
    assert!(document["components"].get("securitySchemes").is_none());
}

/// The refusals every route may give before its own work are declared once,
/// in `components.responses`, and each operation refers to them: 403 (a
/// `Host` or `Origin` the server does not answer) everywhere; 401 only with
/// a token, and not on the public `/`.
#[tokio::test]
async fn every_operation_refers_to_the_refusals_declared_once() {
    for token in [false, true] {
        let args: &[&str] = if token { &["--token", "s3cret"] } else { &[] };
        let server = Serve::start("api-refusals", args, &[]);
        let mut client = server.client().with_token("s3cret");
        let document = client.get("/api").await.json();
        let responses = &document["components"]["responses"];
        assert_eq!(
            responses["Forbidden"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Exception",
            "{responses}"
        );
        assert_eq!(
            responses.get("Unauthorized").is_some(),
            token,
            "{responses}"
        );
        let mut operations = 0;
        for (path, item) in document["paths"].as_object().expect("paths") {
            for (method, operation) in item.as_object().expect("a path item") {
                let answers = &operation["responses"];
                let what = format!("{method} {path} (token: {token})");
                assert_eq!(
                    answers["403"],
                    serde_json::json!({"$ref": "#/components/responses/Forbidden"}),
                    "{what}"
                );
                let unauthorized = answers.get("401");
                if token && path != "/" {
                    assert_eq!(
                        unauthorized,
                        Some(&serde_json::json!({"$ref": "#/components/responses/Unauthorized"})),
                        "{what}"
                    );
                } else {
                    assert_eq!(unauthorized, None, "{what}");
                }
                operations += 1;
            }
        }
        assert!(operations >= 19, "{operations} operations");
        // Declared once: an inline 401 or 403 on a route would repeat it.
        let text = document.to_string();
        let once = |description: &str| text.matches(description).count();
        assert_eq!(once("this server does not answer"), 1, "{text}");
        assert_eq!(
            once("no token, or not the server's"),
            usize::from(token),
            "{text}"
        );
    }
}

/// The Python that has `openapi_spec_validator` (and its `jsonschema`):
/// `$OPENAPI_SPEC_VALIDATOR_PYTHON`, else the venv `.ci/run` makes.
fn validator_python() -> PathBuf {
    let python = std::env::var_os("OPENAPI_SPEC_VALIDATOR_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/mfstream/oasv/bin/python"))
        })
        .expect("a HOME or OPENAPI_SPEC_VALIDATOR_PYTHON");
    let found = Command::new(&python)
        .args(["-c", "import openapi_spec_validator, jsonschema"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "needs openapi-spec-validator: {} cannot import it; run `python3 -m venv \
         ~/.cache/mfstream/oasv && ~/.cache/mfstream/oasv/bin/pip install \
         openapi-spec-validator` (as .ci/run does) or set OPENAPI_SPEC_VALIDATOR_PYTHON",
        python.display()
    );
    python
}

/// Validates each `(schema name, JSON)` against the document's schema of
/// that name, strictly: an object may hold only the properties its schema
/// names, so a field the server sends and the document omits fails.
const CHECK: &str = r##"
import json, sys
from jsonschema import Draft202012Validator
document = json.load(open(sys.argv[1]))
samples = json.load(open(sys.argv[2]))
def strict(schema):
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema
components = strict(document["components"])
failed = 0
for name, value in samples:
    schema = {"$ref": "#/components/schemas/" + name, "components": components}
    for error in Draft202012Validator(schema).iter_errors(value):
        failed += 1
        print(f"{name}: {error.message} at {list(error.absolute_path)}: {json.dumps(value)}")
sys.exit(1 if failed else 0)
"##;

#[tokio::test]
#[ignore = "needs openapi-spec-validator: pip install openapi-spec-validator (.ci/run does)"]
async fn the_api_validates_and_real_answers_fit_its_schemas() {
    let python = validator_python();
    let server = Serve::start("api-valid", &["--token", "s3cret"], &[]);
    let mut client = server.client().with_token("s3cret");
    let document = client.get("/api").await.body;
    let dir = TempDir::new("api-valid-files");
    let file = dir.join("api.json");
    std::fs::write(&file, &document).unwrap();
    let out = Command::new(&python)
        .args(["-m", "openapi_spec_validator"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Real answers, and the bodies sent, for the schemas to hold.
    let mut samples: Vec<(&str, serde_json::Value)> = Vec::new();
    let transform = serde_json::json!({"operation": "mul", "arg": 2, "onError": "skip"});
    let aggregate = serde_json::json!({"aggregation": "AVG",
        "window": {"type": "COUNT", "size": 2}, "grace": 0,
        "emitPartial": true, "type": "TReal", "engine": "local"});
    samples.push(("Registration", transform.clone()));
    samples.push(("Registration", aggregate.clone()));
    let created = client
        .post(&format!("{P}/queries"), &transform.to_string())
        .await;
    assert_eq!(created.status, 201, "{created:?}");
    samples.push(("CQuery", created.json()));
    let query = created.json()["channel"].as_str().unwrap().to_owned();
    let window = register(&mut client, P, &aggregate.to_string()).await;
    let mut sse = subscribe(
        server.addr,
        &format!("{query}/stream"),
        &[("Authorization", "Bearer s3cret")],
    )
    .await
    .expect("a stream");
    let mut windows = subscribe(
        server.addr,
        &format!("{window}/stream"),
        &[("Authorization", "Bearer s3cret")],
    )
    .await
    .expect("a stream");
    let body = format!("[{},{}]", instant(1, "1.5"), instant(2_000_000, "2.5"));
    let ingested = client.post(&format!("{P}/ingest"), &body).await;
    assert_eq!(ingested.status, 202, "{ingested:?}");
    samples.push(("Instant", serde_json::from_str(&instant(1, "1.5")).unwrap()));
    samples.push(("IngestAnswer", ingested.json()));
    let event = sse.next().await.expect("an instant event");
    assert_eq!(event.event, "instant");
    samples.push(("InstantEvent", event.json()));
    let event = windows.next().await.expect("a window event");
    assert_eq!(event.event, "window");
    samples.push(("WindowEvent", event.json()));
    samples.push(("CQuery", client.get(&query).await.json()));
    samples.push((
        "QueryList",
        client.get(&format!("{P}/queries")).await.json(),
    ));
    assert_eq!(client.delete(&query).await.status, 204);
    let end = sse.until_end().await;
    let end = end.last().expect("an end event");
    assert_eq!(end.event, "end");
    samples.push(("EndEvent", end.json()));
    let invalid = client
        .post(&format!("{P}/queries"), r#"{"operation":"nope"}"#)
        .await;
    assert_eq!(invalid.status, 400, "{invalid:?}");
    samples.push(("Exception", invalid.json()));
    samples.push(("Exception", client.get("/nowhere").await.json()));
    // The shared refusals: no token (401), a Host the server does not answer (403).
    let unauthorized = server.client().get("/engines").await;
    assert_eq!(unauthorized.status, 401, "{unauthorized:?}");
    samples.push(("Exception", unauthorized.json()));
    let request = "GET /engines HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer s3cret\r\nConnection: close\r\n\r\n";
    let forbidden = crate::client::raw(server.addr, request.as_bytes()).await;
    assert_eq!(forbidden.status, 403, "{forbidden:?}");
    samples.push(("Exception", forbidden.json()));
    samples.push(("Landing", client.get("/?f=json").await.json()));
    samples.push(("Conformance", client.get("/conformance").await.json()));
    for engine in client
        .get("/engines")
        .await
        .json()
        .as_array()
        .expect("engines")
    {
        samples.push(("Engine", engine.clone()));
    }
    positions(&mut client, server.addr, &mut samples).await;
    let samples_file = dir.join("samples.json");
    std::fs::write(&samples_file, serde_json::to_string(&samples).unwrap()).unwrap();
    let out = Command::new(&python)
        .args(["-c", CHECK])
        .arg(&file)
        .arg(&samples_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A feature's positions: a `position` and a geofence query, their answers
/// and events, and the bodies sent.
async fn positions(
    client: &mut Client,
    addr: std::net::SocketAddr,
    samples: &mut Vec<(&str, serde_json::Value)>,
) {
    const S: &str = "/collections/ships/items/s1/tgsequence";
    let auth = [("Authorization", "Bearer s3cret")];
    let position = serde_json::json!({"operation": "position"});
    let fence = serde_json::json!({"geofence": {"type": "Polygon",
        "coordinates": [[[2.0, 51.0], [3.0, 51.0], [3.0, 52.0], [2.0, 52.0], [2.0, 51.0]]]},
        "detect": ["inside", "outside"]});
    let mut streams = Vec::new();
    for body in [&position, &fence] {
        samples.push(("Registration", body.clone()));
        let created = client
            .post(&format!("{S}/queries"), &body.to_string())
            .await;
        assert_eq!(created.status, 201, "{created:?}");
        samples.push(("CQuery", created.json()));
        let path = created.json()["channel"].as_str().unwrap().to_owned();
        streams.push(
            subscribe(addr, &format!("{path}/stream"), &auth)
                .await
                .expect("a stream"),
        );
    }
    let body = serde_json::json!([{"datetime": at(1), "coordinates": [2.5, 51.5]}]);
    samples.push(("Positions", body.clone()));
    let ingested = client.post(&format!("{S}/ingest"), &body.to_string()).await;
    assert_eq!(ingested.status, 202, "{ingested:?}");
    samples.push(("IngestAnswer", ingested.json()));
    let event = streams[0].next().await.expect("a position");
    assert_eq!(event.event, "instant");
    samples.push(("InstantEvent", event.json()));
    let event = streams[1].next().await.expect("a detection");
    assert_eq!(event.event, "detect");
    samples.push(("DetectEvent", event.json()));
}

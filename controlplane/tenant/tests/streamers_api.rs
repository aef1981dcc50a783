//! The tenant API against a real kube-apiserver + etcd (`nsight_e2e::kube::Kube`; no kubelet,
//! so streamers stay pending): the API runs in the test's process with a kube client that
//! impersonates the tenant operator's ServiceAccount, bound to the Role the operator renders
//! (`render::tenant_operator`), so every call it makes is one that Role allows.
//!
//! - launch 10, the 11th refused (429 problem with the counts and the caller's own streamers);
//!   another user's delete refused (403); a delete frees a slot; listing; bad input is a 4xx;
//! - the Role: SubjectAccessReviews and real calls as the ServiceAccount are denied for other
//!   namespaces, kinds and verbs;
//! - idle streamers are reaped, a streamer being read is not.
//!
//! Needs `cargo xtask setup kube` (`eval "$(cargo xtask env)"`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests"
)]

use std::{collections::BTreeSet, time::Duration};

use nsight_api::NsightTenantOperator;
use nsight_e2e::{kube::Kube, wait_for};
use nsight_operator::render::{tenant_operator, Object, RenderSettings};
use nsight_tenant::{core::StreamerTemplate, Config};
use reqwest::blocking::Client as Http;
use serde_json::{json, Value};

const NS: &str = "research";
const SESSION: &str = "67e55044-10b1-426f-9247-bb680e5fe0c8";
const SA: &str = "tenant";

fn sa_user(ns: &str) -> String {
    format!("system:serviceaccount:{ns}:{SA}")
}

fn streamers(ns: &str) -> String {
    format!("/apis/nvidia.com/v1alpha1/namespaces/{ns}/nsightstreamers")
}

/// An API server with the streamer CRD, and `namespaces`.
fn cluster(namespaces: &[&str]) -> Kube {
    let kube = Kube::start();
    kube.install_crds(
        nsight_api::crds::all()
            .iter()
            .map(|crd| serde_json::to_value(crd).unwrap())
            .filter(|crd| crd["spec"]["names"]["kind"] == "NsightStreamer"),
    );
    for ns in namespaces {
        kube.create(
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        );
    }
    kube
}

/// The tenant operator's ServiceAccount, Role and RoleBinding in `ns`, as the operator renders
/// them (owner references dropped: no NsightTenantOperator exists here).
fn apply_tenant_rbac(kube: &Kube, ns: &str) {
    let mut cr = NsightTenantOperator::new(SA, Default::default());
    cr.metadata.namespace = Some(ns.into());
    cr.metadata.uid = Some("6f1d2c3b-0000-4000-8000-000000000001".into());
    let desired = tenant_operator::render(&cr, &RenderSettings::default()).unwrap();
    let mut applied = Vec::new();
    for object in desired.objects {
        let mut doc = match object {
            Object::ServiceAccount(o) => serde_json::to_value(o).unwrap(),
            Object::Role(o) => serde_json::to_value(o).unwrap(),
            Object::RoleBinding(o) => serde_json::to_value(o).unwrap(),
            _ => continue,
        };
        doc["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("ownerReferences");
        applied.push(doc["kind"].as_str().unwrap().to_owned());
        kube.create(&kube.collection(&doc), &doc);
    }
    assert_eq!(applied, ["ServiceAccount", "Role", "RoleBinding"]);
}

/// A kube-rs client authenticated as the admin but impersonating `user`.
fn client_as(rt: &tokio::runtime::Runtime, kube: &Kube, user: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kube.kubeconfig()).unwrap();
    rt.block_on(async {
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        config.auth_info.impersonate = Some(user.into());
        kube::Client::try_from(config).unwrap()
    })
}

/// Starts the tenant API for `ns` as its ServiceAccount and waits until it answers; its base
/// URL (`.../tenant/v1`).
fn start_api(rt: &tokio::runtime::Runtime, kube: &Kube, ns: &str, config: Config) -> String {
    let client = client_as(rt, kube, &sa_user(ns));
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let ns = ns.to_owned();
    rt.spawn(async move { nsight_tenant::run(listener, client, &ns, config).await });
    let http = Http::new();
    assert!(
        wait_for(Duration::from_secs(10), || {
            http.get(format!("http://{addr}/healthz"))
                .send()
                .ok()
                .filter(|r| r.status() == 200)
        })
        .is_some(),
        "the tenant API did not start (its /healthz needs no token)"
    );
    format!("http://{addr}/tenant/v1")
}

/// Long enough that nothing is reaped during a test.
const HOUR: Duration = Duration::from_secs(3600);

/// The API's settings in these tests: the default cap of 10, streamers idle for `idle` reaped,
/// the default template, no gateway token.
fn config(idle: Duration) -> Config {
    Config {
        max_active: 10,
        idle,
        template: StreamerTemplate::default(),
        gateway_token: None,
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One call as `user` (no identity header with `None`): (status, content type, body).
fn call(
    http: &Http,
    method: &str,
    url: &str,
    user: Option<&str>,
    body: Option<&str>,
) -> (u16, String, Value) {
    let mut req = http.request(method.parse().unwrap(), url);
    if let Some(user) = user {
        req = req.header("x-nsight-auth-identity", user);
    }
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let resp = req.send().unwrap();
    let status = resp.status().as_u16();
    let kind = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let text = resp.text().unwrap();
    (
        status,
        kind,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn launch(http: &Http, base: &str, user: &str) -> (u16, String, Value) {
    call(
        http,
        "POST",
        &format!("{base}/streamers"),
        Some(user),
        Some(&json!({"sessionId": SESSION}).to_string()),
    )
}

fn launched(http: &Http, base: &str, user: &str) -> String {
    let (status, _, body) = launch(http, base, user);
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["owner"], user);
    assert_eq!(body["sessionId"], SESSION);
    assert_eq!(body["phase"], "pending");
    let name = body["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("streamer-"), "{name}");
    name
}

/// (method, URL, identity, body, expected status, what the problem's detail says).
type Case<'a> = (
    &'a str,
    String,
    Option<&'a str>,
    Option<String>,
    u16,
    &'a str,
);

#[test]
fn launch_cap_owner_rbac_and_bad_input() {
    let kube = cluster(&[NS, "elsewhere"]);
    apply_tenant_rbac(&kube, NS);
    let rt = runtime();
    let base = start_api(
        &rt,
        &kube,
        NS,
        Config {
            template: StreamerTemplate {
                cloud_storage_ref: Some("storage".into()),
                image: None,
                runtime_class_name: None,
                // Admitted by the CRD the API server holds (the chart's).
                media: serde_json::from_value(json!({
                    "mediaPorts": [{"name": "webrtc", "port": 47998}],
                    "turn": {"enabled": true, "urls": ["turn:relay.example:3478?transport=udp"],
                             "credentialsSecret": "turn-credentials"},
                    "env": [{"name": "WEB_USERNAME", "value": "nvidia"}],
                }))
                .unwrap(),
            },
            ..config(HOUR)
        },
    );
    let http = Http::new();

    // A streamer made by hand is not the tenant API's: not counted, listed or served.
    kube.create(
        &streamers(NS),
        &json!({"apiVersion": "nvidia.com/v1alpha1", "kind": "NsightStreamer",
                "metadata": {"name": "by-hand"}, "spec": {"sessionId": SESSION}}),
    );

    // 10 launches (alice 6, bob 4) fit; the 11th is refused with the counts and alice's own.
    let alice: Vec<String> = (0..6).map(|_| launched(&http, &base, "alice")).collect();
    let bob: Vec<String> = (0..4).map(|_| launched(&http, &base, "bob")).collect();
    let object = kube
        .get(&format!("{}/{}", streamers(NS), alice[0]))
        .unwrap();
    assert_eq!(
        object["metadata"]["annotations"]["nsight.nvidia.com/owner"],
        "alice"
    );
    assert_eq!(object["spec"]["cloudStorageRef"], "storage");
    assert_eq!(
        object["spec"]["mediaPorts"],
        json!([{"name": "webrtc", "port": 47998, "protocol": "UDP"}])
    );
    assert_eq!(
        object["spec"]["turn"]["credentialsSecret"],
        "turn-credentials"
    );
    assert_eq!(object["spec"]["env"][0]["name"], "WEB_USERNAME");
    let (status, kind, refusal) = launch(&http, &base, "alice");
    assert_eq!(status, 429, "{refusal}");
    assert_eq!(kind, "application/problem+json");
    assert_eq!(refusal["title"], "Too Many Requests");
    assert_eq!(
        (refusal["active"].as_u64(), refusal["maxActive"].as_u64()),
        (Some(10), Some(10))
    );
    let yours: BTreeSet<String> = serde_json::from_value(refusal["yours"].clone()).unwrap();
    assert_eq!(yours, alice.iter().cloned().collect());
    let detail = refusal["detail"].as_str().unwrap();
    assert!(
        detail.contains("10 streamers run and at most 10 may run at once")
            && detail.contains("delete one of yours")
            && detail.contains(&alice[0]),
        "{detail}"
    );
    let (status, _, refusal) = launch(&http, &base, "carol");
    assert_eq!(status, 429);
    assert!(
        refusal["detail"]
            .as_str()
            .unwrap()
            .contains("none of them is yours"),
        "{refusal}"
    );

    // Lists: the caller's own, or everyone's; the cap either way.
    let (status, _, list) = call(
        &http,
        "GET",
        &format!("{base}/streamers"),
        Some("bob"),
        None,
    );
    assert_eq!(status, 200, "{list}");
    let names: Vec<&str> = list["streamers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names.iter().copied().collect::<BTreeSet<_>>(),
        bob.iter().map(String::as_str).collect()
    );
    assert_eq!(
        (list["active"].as_u64(), list["maxActive"].as_u64()),
        (Some(10), Some(10))
    );
    let (_, _, all) = call(
        &http,
        "GET",
        &format!("{base}/streamers?all=true"),
        Some("bob"),
        None,
    );
    assert_eq!(all["streamers"].as_array().unwrap().len(), 10, "{all}");

    // Owner rule: bob cannot delete alice's streamer; it is still there.
    let (status, kind, problem) = call(
        &http,
        "DELETE",
        &format!("{base}/streamers/{}", alice[0]),
        Some("bob"),
        None,
    );
    assert_eq!(status, 403, "{problem}");
    assert_eq!(kind, "application/problem+json");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("only its owner can delete it"),
        "{problem}"
    );
    let (status, _, got) = call(
        &http,
        "GET",
        &format!("{base}/streamers/{}", alice[0]),
        Some("bob"),
        None,
    );
    assert_eq!(
        (status, got["owner"].as_str()),
        (200, Some("alice")),
        "{got}"
    );

    // Alice deletes one of hers: the slot is free for the next launch, then the cap holds again.
    let (status, _, body) = call(
        &http,
        "DELETE",
        &format!("{base}/streamers/{}", alice[0]),
        Some("alice"),
        None,
    );
    assert_eq!(status, 204, "{body}");
    assert!(kube
        .get(&format!("{}/{}", streamers(NS), alice[0]))
        .is_none());
    launched(&http, &base, "bob");
    assert_eq!(launch(&http, &base, "alice").0, 429);

    // A launch for one report names its session.
    let (status, _, refused) = call(
        &http,
        "POST",
        &format!("{base}/streamers"),
        Some("alice"),
        Some(&json!({"report": format!("default/{SESSION}/1/train.nsys-rep")}).to_string()),
    );
    assert_eq!(status, 429, "the cap applies to reports too: {refused}");

    // Bad input: a clear 4xx problem, never a 500.
    let streamer = |name: &str| format!("{base}/streamers/{name}");
    let cases: Vec<Case<'_>> = vec![
        (
            "POST",
            format!("{base}/streamers"),
            None,
            Some(json!({"sessionId": SESSION}).to_string()),
            401,
            "x-nsight-auth-identity",
        ),
        (
            "GET",
            format!("{base}/streamers"),
            None,
            None,
            401,
            "x-nsight-auth-identity",
        ),
        (
            "POST",
            format!("{base}/streamers"),
            Some("alice"),
            Some("{not json".into()),
            400,
            "invalid JSON body",
        ),
        (
            "POST",
            format!("{base}/streamers"),
            Some("alice"),
            Some(r#"{"session":"x"}"#.into()),
            400,
            "unknown field",
        ),
        (
            "POST",
            format!("{base}/streamers"),
            Some("alice"),
            Some("{}".into()),
            400,
            "either `sessionId`",
        ),
        (
            "POST",
            format!("{base}/streamers"),
            Some("alice"),
            Some(json!({"sessionId": "nope"}).to_string()),
            400,
            "not a session ID",
        ),
        (
            "POST",
            format!("{base}/streamers"),
            Some("alice"),
            Some(json!({"report": "a/b"}).to_string()),
            400,
            "not a report key",
        ),
        (
            "POST",
            format!("{base}/streamers"),
            Some("alice"),
            Some(json!({"sessionId": SESSION, "report": "a/b/c/d"}).to_string()),
            400,
            "not both",
        ),
        (
            "GET",
            format!("{base}/streamers?all=maybe"),
            Some("alice"),
            None,
            400,
            "bad query",
        ),
        (
            "GET",
            streamer("Not_A_Name"),
            Some("alice"),
            None,
            400,
            "not a streamer name",
        ),
        (
            "GET",
            streamer("streamer-none"),
            Some("alice"),
            None,
            404,
            "no streamer streamer-none",
        ),
        (
            "DELETE",
            streamer("streamer-none"),
            Some("alice"),
            None,
            404,
            "no streamer",
        ),
        (
            "GET",
            streamer("by-hand"),
            Some("alice"),
            None,
            404,
            "no streamer by-hand",
        ),
        (
            "DELETE",
            streamer("by-hand"),
            Some("alice"),
            None,
            404,
            "no streamer by-hand",
        ),
        (
            "GET",
            format!("{base}/nothing"),
            Some("alice"),
            None,
            404,
            "no such endpoint",
        ),
        (
            "PUT",
            format!("{base}/streamers"),
            Some("alice"),
            Some("{}".into()),
            405,
            "method not allowed",
        ),
    ];
    for (method, url, user, body, want, says) in cases {
        let (status, kind, problem) = call(&http, method, &url, user, body.as_deref());
        assert_eq!(status, want, "{method} {url}: {problem}");
        assert_eq!(kind, "application/problem+json", "{method} {url}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap_or_default()
                .contains(says),
            "{method} {url}: {problem}"
        );
    }
    // The same API directly under /v1, and its OpenAPI document.
    let direct = base.replace("/tenant/v1", "/v1");
    let (status, _, list) = call(
        &http,
        "GET",
        &format!("{direct}/streamers"),
        Some("alice"),
        None,
    );
    assert_eq!(
        (status, list["streamers"].as_array().map(Vec::len)),
        (200, Some(5))
    );
    let (status, _, doc) = call(&http, "GET", &format!("{base}/openapi.json"), None, None);
    assert_eq!(
        (status, &doc["servers"][0]["url"]),
        (200, &json!("/tenant/v1"))
    );
    assert!(kube.get(&format!("{}/by-hand", streamers(NS))).is_some());

    // RBAC: the Role the operator renders lets the ServiceAccount do what the API does with
    // streamers in its namespace, and nothing else.
    let may = |user: &str, verb: &str, group: &str, resource: &str, sub: &str, ns: &str| {
        let (status, out) = kube.request(
            "POST",
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            Some(&json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user,
                         "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{NS}"), "system:authenticated"],
                         "resourceAttributes": {"namespace": ns, "verb": verb, "group": group,
                                                "resource": resource, "subresource": sub}}})),
        );
        assert_eq!(status, 201, "{out}");
        out["status"]["allowed"] == true
    };
    let sa = sa_user(NS);
    for verb in ["get", "list", "create", "patch", "delete"] {
        assert!(
            may(&sa, verb, "nvidia.com", "nsightstreamers", "", NS),
            "{verb}"
        );
        assert!(
            !may(&sa, verb, "nvidia.com", "nsightstreamers", "", "elsewhere"),
            "{verb} in another namespace"
        );
    }
    for verb in ["watch", "update", "deletecollection"] {
        assert!(
            !may(&sa, verb, "nvidia.com", "nsightstreamers", "", NS),
            "{verb}"
        );
    }
    for (group, resource, sub) in [
        ("nvidia.com", "nsightstreamers", "status"),
        ("nvidia.com", "nsighttenantoperators", ""),
        ("nvidia.com", "nsightcoordinators", ""),
        ("", "secrets", ""),
        ("", "pods", ""),
        ("", "serviceaccounts", ""),
        ("apps", "deployments", ""),
        ("rbac.authorization.k8s.io", "roles", ""),
    ] {
        for verb in ["get", "list", "create", "patch", "delete"] {
            assert!(
                !may(&sa, verb, group, resource, sub, NS),
                "{verb} {group}/{resource}/{sub}"
            );
        }
    }
    // Real calls as the ServiceAccount: other namespaces and kinds are forbidden.
    let as_sa = client_as(&rt, &kube, &sa);
    let forbidden = |result: Result<(), kube::Error>, what: &str| match result {
        Err(kube::Error::Api(s)) if s.code == 403 => {}
        other => panic!("{what}: expected 403, got {other:?}"),
    };
    rt.block_on(async {
        use kube::api::{Api, ListParams, PostParams};
        let elsewhere: Api<nsight_api::NsightStreamer> =
            Api::namespaced(as_sa.clone(), "elsewhere");
        forbidden(
            elsewhere.list(&ListParams::default()).await.map(|_| ()),
            "list streamers in another namespace",
        );
        let mut s = nsight_api::NsightStreamer::new("sneaky", Default::default());
        s.spec.session_id = Some(SESSION.into());
        forbidden(
            elsewhere
                .create(&PostParams::default(), &s)
                .await
                .map(|_| ()),
            "create a streamer in another namespace",
        );
        let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(as_sa.clone(), NS);
        forbidden(
            secrets.list(&ListParams::default()).await.map(|_| ()),
            "list Secrets",
        );
        let tenants: Api<NsightTenantOperator> = Api::namespaced(as_sa.clone(), NS);
        forbidden(
            tenants.get(SA).await.map(|_| ()),
            "read the NsightTenantOperator",
        );
        let all: Api<nsight_api::NsightStreamer> = Api::all(as_sa);
        forbidden(
            all.list(&ListParams::default()).await.map(|_| ()),
            "list streamers cluster-wide",
        );
    });
}

#[test]
fn idle_streamers_are_reaped_and_reads_keep_them() {
    const TEAM: &str = "team-b";
    let kube = cluster(&[TEAM]);
    apply_tenant_rbac(&kube, TEAM);
    let rt = runtime();
    let idle = Duration::from_secs(3);
    let base = start_api(&rt, &kube, TEAM, config(idle));
    let http = Http::new();
    // Before `left` was launched, so before its last activity.
    let before_launch = std::time::Instant::now();
    let left = launched(&http, &base, "alice");
    let kept = launched(&http, &base, "alice");
    let path = |name: &str| format!("{}/{name}", streamers(TEAM));
    let first_active = kube.get(&path(&kept)).unwrap()["metadata"]["annotations"]
        ["nsight.nvidia.com/last-active"]
        .as_str()
        .unwrap()
        .parse::<u64>()
        .unwrap();

    // `kept` is read every 300 ms; `left` is not and goes once idle for 3 s.
    let started = std::time::Instant::now();
    let mut reaped_after = None;
    while started.elapsed() < Duration::from_secs(10) {
        let (status, _, view) = call(
            &http,
            "GET",
            &format!("{base}/streamers/{kept}"),
            Some("bob"),
            None,
        );
        assert_eq!(status, 200, "a streamer being read was reaped: {view}");
        if reaped_after.is_none() && kube.get(&path(&left)).is_none() {
            reaped_after = Some(before_launch.elapsed());
        }
        if reaped_after.is_some_and(|t| before_launch.elapsed() > t + Duration::from_secs(2)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let reaped_after = reaped_after.expect("the idle streamer was not reaped in 10 s");
    assert!(
        reaped_after >= idle,
        "reaped before it was idle: {reaped_after:?}"
    );
    // Reads recorded activity on the object.
    let kept_object = kube
        .get(&path(&kept))
        .expect("the streamer being read is gone");
    let last_active: u64 = kept_object["metadata"]["annotations"]["nsight.nvidia.com/last-active"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        last_active > first_active + 2000,
        "{last_active} vs {first_active}"
    );
    let (_, _, view) = call(
        &http,
        "GET",
        &format!("{base}/streamers/{kept}"),
        Some("alice"),
        None,
    );
    assert_eq!(
        view["expiresAt"].as_u64().unwrap(),
        view["lastActiveAt"].as_u64().unwrap() + 3000,
        "{view}"
    );
    // Not read any more: reaped in turn.
    assert!(
        wait_for(Duration::from_secs(10), || kube
            .get(&path(&kept))
            .is_none()
            .then_some(()))
        .is_some(),
        "the streamer was not reaped once no longer read"
    );
    let (_, _, list) = call(
        &http,
        "GET",
        &format!("{base}/streamers"),
        Some("alice"),
        None,
    );
    assert_eq!(list["active"], 0, "{list}");
}

/// With a gateway token (as the operator deploys it), the API and the identity header it
/// trusts answer only the gateway: a caller on the Pod network that forges `alice` gets 403
/// and nothing is launched; with the token the same call works; `/healthz` stays open.
#[test]
fn only_the_gateway_reaches_the_api() {
    const GATEWAY: &str = "x-nsight-gateway-token";
    let token = "ngt_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let kube = cluster(&[NS]);
    apply_tenant_rbac(&kube, NS);
    let rt = runtime();
    let base = start_api(
        &rt,
        &kube,
        NS,
        Config {
            gateway_token: Some(
                nsight_contracts::gateway_only::GatewayToken::parse(token).unwrap(),
            ),
            ..config(HOUR)
        },
    );
    let http = Http::new();
    let (status, kind, refused) = launch(&http, &base, "alice");
    assert_eq!(status, 403, "{refused}");
    assert_eq!(kind, "application/problem+json");
    assert!(
        refused["detail"]
            .as_str()
            .unwrap()
            .contains("forwarded by the platform's gateway"),
        "{refused}"
    );
    let wrong = http
        .get(format!("{base}/streamers"))
        .header("x-nsight-auth-identity", "alice")
        .header(GATEWAY, format!("{token}x"))
        .send()
        .unwrap();
    assert_eq!(wrong.status(), 403, "a wrong token is refused too");
    let list = kube.get(&streamers(NS)).unwrap();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(0), "{list}");
    let launched = http
        .post(format!("{base}/streamers"))
        .header("x-nsight-auth-identity", "alice")
        .header(GATEWAY, token)
        .header("content-type", "application/json")
        .body(json!({"sessionId": SESSION}).to_string())
        .send()
        .unwrap();
    assert_eq!(launched.status(), 201, "{:?}", launched.text());
}

/// The served OpenAPI document holds for the live tenant API under schemathesis (PyPI, in the
/// venv of `cargo xtask setup python`): every documented operation (launches really create
/// streamers, up to the cap), generated inputs, every check (no 5xx, statuses, content types
/// and bodies as documented, schema-valid requests accepted and invalid ones refused), as
/// user `alice`.
#[test]
fn the_openapi_document_holds_under_schemathesis() {
    let kube = cluster(&[NS]);
    apply_tenant_rbac(&kube, NS);
    let rt = runtime();
    let base = start_api(&rt, &kube, NS, config(HOUR));
    let dir = nsight_e2e::TempDir::new("tenant-schemathesis");
    let checked = nsight_e2e::schemathesis::check(
        dir.path(),
        &format!("{base}/openapi.json"),
        &base,
        &["x-nsight-auth-identity: alice"],
    );
    if let Err(report) = checked {
        panic!("schemathesis found failures in the tenant API:\n{report}");
    }
}

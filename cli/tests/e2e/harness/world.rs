//! Two tenants on a running `einsora up` (dev mode's acme and globex), each with a browser
//! session and an API token, and objects of tenant A to aim tenant B at.

use std::time::Duration;

use einsora_core::ids::{MachineId, TenantId, WorkloadId};
use einsora_core::lifecycle::State;
use einsora_core::machine::Machine;
use einsora_core::reasons::Reason;
use einsora_core::region::Region;
use einsora_core::sharing::SharingLevel;
use einsora_store::{Admission, DatabaseUrl, MachineRegistration, Transition};
use serde_json::{Value, json};

use crate::harness::cli::dev_password;
use einsora_testkit::http::Answer;

use crate::harness::solo::Solo;
use crate::harness::support::Einsora;

/// One way to call the API as someone.
#[derive(Clone, Debug)]
pub enum Credential {
    Session { cookie: String, csrf: String },
    Token(String),
    Nobody,
}

impl Credential {
    pub fn headers(&self) -> Vec<(String, String)> {
        match self {
            Credential::Session { cookie, csrf } => vec![
                ("Cookie".into(), format!("einsora_session={cookie}")),
                ("X-CSRF-Token".into(), csrf.clone()),
            ],
            Credential::Token(token) => vec![("Authorization".into(), format!("Bearer {token}"))],
            Credential::Nobody => vec![],
        }
    }
}

pub struct Tenant {
    pub id: TenantId,
    pub session: Credential,
    pub token: Credential,
    /// Every secret issued to this tenant (for the secrets-in-logs check).
    pub secrets: Vec<String>,
}

/// Launches a workload with `body` as `who`; its ID.
pub fn launch(solo: &Solo, who: &Credential, body: Value) -> String {
    let made = call(solo, who, "POST", "/v1/workloads", Some(body));
    assert_eq!(made.status, 202, "{}", made.body);
    made.json()["id"].as_str().unwrap().to_owned()
}

/// A JupyterLab notebook of the tests' class, `cpu-1c-2g`.
pub fn a_notebook(name: &str) -> Value {
    serde_json::json!({ "kind": "notebook", "name": name, "gpu_class": "cpu-1c-2g",
                        "image": "jupyterlab" })
}

/// A new API token of `who`'s, called `laptop`: its secret.
pub fn new_token(solo: &Solo, who: &Credential) -> String {
    let body = serde_json::json!({ "name": "laptop" });
    let made = call(solo, who, "POST", "/v1/tokens", Some(body));
    assert_eq!(made.status, 200, "{}", made.body);
    made.json()["token"].as_str().unwrap().to_owned()
}

/// Revokes `who`'s token `id`.
pub fn revoke_token(solo: &Solo, who: &Credential, id: &str) {
    let revoked = call(solo, who, "DELETE", &format!("/v1/tokens/{id}"), None);
    assert!((200..300).contains(&revoked.status), "{}", revoked.body);
}

/// Calls the API as `who`, with a JSON body when one is given.
pub fn call(
    solo: &Solo,
    who: &Credential,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let mut headers = who.headers();
    if body.is_some() {
        headers.push(("Content-Type".into(), "application/json".into()));
    }
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let body = body.map(|b| b.to_string());
    solo.request(method, path, &headers, body.as_deref())
}

pub fn login(solo: &Solo, email: &str, password: &str) -> Credential {
    let body = json!({ "email": email, "password": password }).to_string();
    let answer = solo.request(
        "POST",
        "/v1/sessions",
        &[("Content-Type", "application/json")],
        Some(&body),
    );
    assert_eq!(answer.status, 200, "login {email}: {}", answer.body);
    let cookie = answer
        .header("set-cookie")
        .and_then(|c| c.strip_prefix("einsora_session="))
        .and_then(|c| c.split(';').next())
        .expect("a session cookie")
        .to_owned();
    let csrf = answer.json()["csrf_token"]
        .as_str()
        .expect("a CSRF token")
        .to_owned();
    Credential::Session { cookie, csrf }
}

pub fn tenant(solo: &Solo, email: &str) -> Tenant {
    let password = dev_password(solo, email);
    let session = login(solo, email, &password);
    let me = call(solo, &session, "GET", "/v1/me", None).json();
    let id: TenantId = me["tenant_id"].as_str().unwrap().parse().unwrap();
    let token = new_token(solo, &session);
    let Credential::Session { cookie, csrf } = &session else {
        unreachable!()
    };
    let secrets = vec![password, cookie.clone(), csrf.clone(), token.clone()];
    Tenant {
        id,
        session,
        token: Credential::Token(token),
        secrets,
    }
}

/// Tenant A's objects, by the kind of ID a route's path takes.
pub struct Objects {
    pub workload: String,
    pub token: String,
    pub machine: String,
    pub enrolment_token: String,
    /// The tenant's owner's user ID.
    pub user: String,
    pub invite: String,
    pub team: String,
    pub inference_key: String,
    /// The inference key's secret (for the secrets-in-logs check).
    pub inference_key_secret: String,
}

impl Objects {
    /// The ID of A's object that `path` names; a route with no case fails the test, so a new
    /// route can't slip past the isolation matrix.
    pub fn for_path(&self, path: &str) -> &str {
        let kinds = [
            ("/v1/workloads/{id}", &self.workload),
            ("/v1/tokens/{id}", &self.token),
            ("/v1/machines/{id}", &self.machine),
            ("/v1/enrolment-tokens/{id}", &self.enrolment_token),
            ("/v1/users/{id}", &self.user),
            ("/v1/invites/{id}", &self.invite),
            ("/v1/teams/{id}", &self.team),
            ("/v1/inference-keys/{id}", &self.inference_key),
        ];
        kinds
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix))
            .map(|(_, id)| id.as_str())
            .unwrap_or_else(|| panic!("no isolation case for {path}: add its object to Objects"))
    }
}

/// The region tenant A's running workload and machine are in: one this installation's
/// controller (which reconciles the first region, `local`) leaves alone, as if another region's
/// controller ran it there.
const ELSEWHERE: &str = "lab";

/// The built-in catalog with a second region, [`ELSEWHERE`], written into the data directory
/// of `e`; its path, for EINSORA_CATALOG.
pub fn catalog_with_a_second_region(e: &Einsora) -> String {
    let builtin = concat!(env!("CARGO_MANIFEST_DIR"), "/../catalog/catalog.yaml");
    let text = std::fs::read_to_string(builtin).unwrap();
    let regions = "regions:\n  - local\n";
    assert!(text.contains(regions), "the catalog's regions moved");
    let text = text.replace(regions, &format!("{regions}  - {ELSEWHERE}\n"));
    let path = e.dir().join("catalog.yaml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A workload (running on A's machine, so it can be opened), a token, a machine, an enrolment
/// token and an inference key of tenant A. Needs the catalog of [`catalog_with_a_second_region`]: the machine and
/// the run are recorded straight in the store, in a region this installation's controller
/// leaves alone, as agents and that region's controller will.
pub fn objects(solo: &Solo, a: &Tenant) -> Objects {
    let created = call(
        solo,
        &a.session,
        "POST",
        "/v1/workloads",
        Some(json!({
            "kind": "notebook", "name": "mine", "gpu_class": "cpu-1c-2g", "image": "jupyterlab",
            "region": ELSEWHERE,
        })),
    );
    assert_eq!(created.status, 202, "{}", created.body);
    let workload = created.json()["id"].as_str().unwrap().to_owned();
    let tokens = call(solo, &a.session, "GET", "/v1/tokens", None).json();
    let token = tokens["tokens"][0]["id"].as_str().unwrap().to_owned();
    let machine = MachineId::new();
    run_on_machine(solo, a.id, machine, workload.parse().unwrap());
    let enrolment = call(
        solo,
        &a.session,
        "POST",
        "/v1/enrolment-tokens",
        Some(json!({ "name": "lab" })),
    );
    let enrolment_token = enrolment.json()["enrolment_token"]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let me = call(solo, &a.session, "GET", "/v1/me", None).json();
    let invited = call(
        solo,
        &a.session,
        "POST",
        "/v1/invites",
        Some(json!({ "email": "invited@example.com" })),
    );
    assert_eq!(invited.status, 200, "{}", invited.body);
    let team = call(
        solo,
        &a.session,
        "POST",
        "/v1/teams",
        Some(json!({ "name": "ml" })),
    );
    assert_eq!(team.status, 200, "{}", team.body);
    let key = call(
        solo,
        &a.session,
        "POST",
        "/v1/inference-keys",
        Some(json!({ "name": "chat", "all_endpoints": true })),
    );
    assert_eq!(key.status, 200, "{}", key.body);
    Objects {
        workload,
        token,
        machine: machine.to_string(),
        enrolment_token,
        user: me["user_id"].as_str().unwrap_or_default().to_owned(),
        invite: invited.json()["invite"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        team: team.json()["id"].as_str().unwrap_or_default().to_owned(),
        inference_key: key.json()["inference_key"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        inference_key_secret: key.json()["key"].as_str().unwrap_or_default().to_owned(),
    }
}

fn run_on_machine(solo: &Solo, owner: TenantId, machine: MachineId, workload: WorkloadId) {
    let url = DatabaseUrl::parse(&solo.database).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = einsora_store::open(&url).await.unwrap();
        let registration = MachineRegistration {
            machine: Machine {
                trusted_users: Vec::new(),
                id: machine,
                owner,
                owner_user: None,
                name: "studio".into(),
                region: Region::new(ELSEWHERE).unwrap(),
                os: "linux".into(),
                arch: "x86_64".into(),
                cpus: 2,
                memory_bytes: 4 << 30,
                devices: vec![],
                sharing: SharingLevel::Private,
                cores: None,
            },
            drivers: vec!["docker".into()],
            models: vec![],
            gpu_note: None,
            vm: None,
            last_seen_at: Some(time::OffsetDateTime::now_utc()),
        };
        store.put_machine(&registration).await.unwrap();
        let w = store.workload(workload).await.unwrap().unwrap();
        let admission = Admission {
            placed_class: "cpu-1c-2g".into(),
            machine_id: Some(machine),
            driver: Some("docker".into()),
            devices: Vec::new(),
        };
        let step = |w, to, admission| Transition {
            workload: w,
            to,
            reason: &Reason::Ready,
            admission,
            fence: None,
        };
        let w = store
            .transition(&step(&w, State::Provisioning, Some(&admission)))
            .await
            .unwrap();
        store
            .transition(&step(&w, State::Running, None))
            .await
            .unwrap();
        // Let the store's writes settle before the api reads them.
        tokio::time::sleep(Duration::from_millis(50)).await;
    });
}

/// An answer with its request ID blanked, so two answers can be compared byte for byte.
pub fn without_request_id(answer: &Answer) -> (u16, String) {
    let mut body: Value =
        serde_json::from_str(&answer.body).unwrap_or(Value::String(answer.body.clone()));
    if let Some(error) = body.get_mut("error").and_then(Value::as_object_mut) {
        error.insert("request_id".into(), Value::Null);
    }
    (answer.status, body.to_string())
}

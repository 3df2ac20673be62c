//! Workloads as a test drives them through the JSON API: the owner, create, act, read, wait.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::solo::{OWNER_EMAIL, OWNER_PASSWORD, Solo};
use crate::harness::world::{Credential, call, login};

/// The owner's session and an API token called "laptop".
pub struct Owner {
    pub session: Credential,
    pub token: String,
}

impl Owner {
    pub fn of(solo: &Solo) -> Owner {
        let session = login(solo, OWNER_EMAIL, OWNER_PASSWORD);
        let token = crate::harness::world::new_token(solo, &session);
        Owner { session, token }
    }

    /// How timelines name this token.
    pub fn by_token(&self) -> String {
        format!(
            "{OWNER_EMAIL} (API token \"laptop\" ({}…))",
            &self.token[..8]
        )
    }
}

/// Creates a notebook of `class` (JupyterLab runs on every accelerator).
pub fn create(solo: &Solo, who: &Credential, name: &str, class: &str) -> Answer2 {
    let body =
        json!({ "kind": "notebook", "name": name, "gpu_class": class, "image": "jupyterlab" });
    let answer = call(solo, who, "POST", "/v1/workloads", Some(body));
    (answer.status, answer.json())
}

pub type Answer2 = (u16, Value);

pub fn act(solo: &Solo, who: &Credential, id: &str, action: &str) -> Answer2 {
    let answer = match action {
        "delete" => call(solo, who, "DELETE", &format!("/v1/workloads/{id}"), None),
        _ => call(
            solo,
            who,
            "POST",
            &format!("/v1/workloads/{id}/{action}"),
            Some(json!({})),
        ),
    };
    (answer.status, answer.json())
}

pub fn state(solo: &Solo, who: &Credential, id: &str) -> String {
    let answer = call(
        solo,
        who,
        "GET",
        &format!("/v1/workloads/{id}?include_deleted=true"),
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["state"].as_str().unwrap().to_owned()
}

pub fn wait_for(solo: &Solo, who: &Credential, id: &str, wanted: &str) {
    wait_for_within(solo, who, id, wanted, Duration::from_secs(60));
}

/// [`wait_for`], for what takes longer (an environment built on its machine first).
pub fn wait_for_within(solo: &Solo, who: &Credential, id: &str, wanted: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let now = state(solo, who, id);
        if now == wanted {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{id} stayed {now}, never {wanted}: {:?}\n{}",
            timeline(solo, who, id),
            solo.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `state: reason` per row, `note: reason` for notes, oldest first.
pub fn timeline(solo: &Solo, who: &Credential, id: &str) -> Vec<String> {
    let answer = call(
        solo,
        who,
        "GET",
        &format!("/v1/workloads/{id}/events"),
        None,
    );
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.json()["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let what = if e["note"] == true {
                "note"
            } else {
                e["to_state"].as_str().unwrap()
            };
            format!("{what}: {}", e["reason"].as_str().unwrap())
        })
        .collect()
}

//! The model files a machine offers, as its agent reports them: `GET /v1/machines` lists the
//! valid GGUF files in its models directory (never one that isn't a model), and follows the
//! directory soon after it changes. Needs what docker.rs needs.

use std::path::Path;
use std::time::Duration;

use einsora_testkit::eventually;

use crate::harness::notebooks::solo_with;
use crate::harness::solo::Solo;
use crate::harness::world::{Credential, call, tenant};

/// The paths of the model files the (one) machine offers.
fn offered(solo: &Solo, who: &Credential) -> Vec<String> {
    let machines = call(solo, who, "GET", "/v1/machines", None).json();
    machines["machines"][0]["models"]
        .as_array()
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m["path"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn offers(solo: &Solo, who: &Credential, wanted: &[&str]) {
    eventually(
        format!("the machine offers {wanted:?}"),
        Duration::from_secs(30),
        || (offered(solo, who) == wanted).then_some(()),
    );
}

#[test]
fn a_machine_offers_its_valid_model_files_and_follows_its_models_directory() {
    let (solo, leftovers) = solo_with(&[("EINSORA_AGENT_INVENTORY_EVERY", "1s")]);
    let acme = tenant(&solo, "dev@acme");
    offers(&solo, &acme.session, &["tiny.gguf"]);

    let models: &Path = leftovers.models();
    std::fs::create_dir(models.join("team")).unwrap();
    std::fs::copy(models.join("tiny.gguf"), models.join("team/second.gguf")).unwrap();
    offers(&solo, &acme.session, &["team/second.gguf", "tiny.gguf"]);
    std::fs::remove_file(models.join("tiny.gguf")).unwrap();
    offers(&solo, &acme.session, &["team/second.gguf"]);
}

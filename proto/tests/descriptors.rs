//! Contract rules the descriptor set must keep: enum shapes and JSON words, and secrets marked.

// A test harness: a failed unwrap is a failed test, and it reads its own environment.
#![allow(clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::BTreeSet;

use einsora_proto::schema::Schema;

fn schema() -> Schema {
    Schema::load().expect("FILE_DESCRIPTOR_SET decodes")
}

/// `WorkloadState` → `WORKLOAD_STATE`.
fn screaming(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[test]
fn every_enum_has_an_unspecified_zero_and_one_word_per_value() {
    let enums: Vec<_> = schema()
        .enums()
        .into_iter()
        .filter(|e| e.full_name.starts_with("einsora."))
        .collect();
    assert!(enums.len() >= 8, "enums missing from the descriptor set");
    for e in &enums {
        let short = e.full_name.rsplit('.').next().unwrap();
        let prefix = format!("{}_", screaming(short));
        let zero = &e.values[0];
        assert_eq!(zero.number, 0, "{}", e.full_name);
        assert_eq!(zero.name, format!("{prefix}UNSPECIFIED"), "{}", e.full_name);
        assert_eq!(
            zero.word, None,
            "{}: the zero value has a word",
            e.full_name
        );
        let mut words = BTreeSet::new();
        for v in &e.values[1..] {
            assert!(v.name.starts_with(&prefix), "{}.{}", e.full_name, v.name);
            let word = v
                .word
                .as_deref()
                .unwrap_or_else(|| panic!("{} has no word", v.name));
            assert!(
                !word.is_empty()
                    && word.bytes().all(|b| b.is_ascii_lowercase()
                        || b.is_ascii_digit()
                        || b == b'_'
                        || b == b'-'),
                "{}: word {word:?}",
                v.name
            );
            assert!(words.insert(word), "{}: word {word:?} repeats", e.full_name);
        }
    }
}

#[test]
fn pinned_json_words_are_spelled_as_in_design() {
    let schema = schema();
    let words = |name: &str| -> Vec<String> {
        let e = schema.enum_type(name).unwrap();
        e.values.into_iter().filter_map(|v| v.word).collect()
    };
    assert_eq!(
        words("einsora.common.v1.WorkloadState"),
        [
            "pending",
            "queued",
            "provisioning",
            "running",
            "stopping",
            "stopped",
            "failed",
            "deleting",
            "deleted"
        ]
    );
    assert_eq!(
        words("einsora.common.v1.WorkloadKind"),
        ["vm", "notebook", "endpoint"]
    );
}

#[test]
fn secret_fields_are_marked() {
    let secrets: BTreeSet<String> = schema().secret_fields().into_iter().collect();
    let expected: BTreeSet<String> = [
        "einsora.access.v1.NotebookLink.link",
        "einsora.access.v1.VmSsh.ticket",
        "einsora.accounts.v1.LoginRequest.password",
        "einsora.accounts.v1.LoginResponse.session_id",
        "einsora.accounts.v1.Session.csrf_token",
        "einsora.accounts.v1.ChangePasswordRequest.current_password",
        "einsora.accounts.v1.ChangePasswordRequest.new_password",
        "einsora.accounts.v1.CreateTokenResponse.token",
        "einsora.accounts.v1.CreateInferenceKeyResponse.key",
        "einsora.accounts.v1.CreateInviteResponse.secret",
        "einsora.accounts.v1.CreatePasswordResetResponse.secret",
        "einsora.accounts.v1.AcceptInviteRequest.secret",
        "einsora.accounts.v1.AcceptInviteRequest.password",
        "einsora.accounts.v1.ResetPasswordRequest.secret",
        "einsora.accounts.v1.ResetPasswordRequest.password",
        "einsora.enrolment.v1.CreateEnrolmentTokenResponse.token",
        "einsora.agent.v1.EnrollRequest.enrolment_token",
        "einsora.agent.v1.AccessTarget.token",
        "einsora.internal.v1.AuthenticateRequest.session_id",
        "einsora.internal.v1.AuthenticateRequest.api_token",
        "einsora.internal.v1.AuthenticateRequest.inference_key",
        "einsora.internal.v1.AuthenticateRequest.csrf_token",
        "einsora.internal.v1.RedeemTicketRequest.ticket",
        "einsora.internal.v1.ResolveAccessTargetResponse.token",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(secrets, expected);
}

#[test]
fn fields_named_like_secrets_are_marked_secret() {
    let schema = schema();
    let secrets: BTreeSet<String> = schema.secret_fields().into_iter().collect();
    // Fields whose names look secret but hold a token's description, ID or public prefix.
    let not_secret = [
        "einsora.accounts.v1.Credential.token_id",
        "einsora.accounts.v1.Credential.token_name",
        "einsora.accounts.v1.Credential.token_prefix",
        "einsora.accounts.v1.CreateTokenResponse.api_token",
        "einsora.accounts.v1.ListTokensResponse.tokens",
        // Counts and limits of tokens an engine used, not credentials.
        "einsora.accounts.v1.InferenceLimits.tokens_per_minute",
        "einsora.accounts.v1.InferenceLimits.tokens_per_day",
        "einsora.accounts.v1.InferenceKey.tokens_used_today",
        "einsora.accounts.v1.InferenceKey.tokens_left_today",
        "einsora.accounts.v1.TenantInferenceLimits.tokens_used_today",
        "einsora.accounts.v1.TenantInferenceLimits.tokens_left_today",
        "einsora.internal.v1.AuthenticateResponse.tenant_tokens_today",
        "einsora.internal.v1.InferenceGrant.tokens_today",
        "einsora.internal.v1.TokenCount.prompt_tokens",
        "einsora.internal.v1.TokenCount.completion_tokens",
        "einsora.usage.v1.ListUsageRequest.tokens",
        "einsora.usage.v1.ListUsageResponse.tokens",
        "einsora.usage.v1.TokenUsage.prompt_tokens",
        "einsora.usage.v1.TokenUsage.completion_tokens",
        "einsora.enrolment.v1.CreateEnrolmentTokenResponse.enrolment_token",
        "einsora.enrolment.v1.ListEnrolmentTokensResponse.enrolment_tokens",
    ];
    for m in schema
        .messages()
        .iter()
        .filter(|m| m.full_name.starts_with("einsora."))
    {
        for f in &m.fields {
            // Page tokens are cursors, not credentials.
            let looks_secret = ["token", "password", "ticket", "session_id", "link"]
                .iter()
                .any(|w| f.contains(w))
                && !f.ends_with("page_token");
            let full = format!("{}.{f}", m.full_name);
            if looks_secret && !secrets.contains(&full) {
                assert!(
                    not_secret.contains(&full.as_str()),
                    "{full} looks like a secret but isn't marked"
                );
            }
        }
    }
}

#[test]
fn every_einsora_package_is_in_the_set() {
    let messages = schema().messages();
    for package in [
        "common",
        "workloads",
        "machines",
        "catalog",
        "access",
        "accounts",
        "usage",
        "enrolment",
        "agent",
        "internal",
    ] {
        let prefix = format!("einsora.{package}.v1.");
        assert!(
            messages.iter().any(|m| m.full_name.starts_with(&prefix)),
            "no messages in {prefix}"
        );
    }
}

//! Rules for the fields of a create body that need no catalog or store.

use super::create_workload::{
    DEFAULT_SLOTS, MAX_DISK_GIB, MAX_FALLBACK, MAX_FALLBACK_AFTER_S, MAX_SERVED_NAME, MAX_SLOTS,
    MAX_SSH_KEYS, PARK_AFTER_IDLE_S,
};
use super::{ConvertError, Problem};
use crate::common::v1::VmParams;

/// A workload name: a DNS label starting with a letter.
pub(super) fn check_name(field: &str, name: &str) -> Result<(), ConvertError> {
    if name.is_empty() {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    let ok = name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ConvertError::invalid(
            field,
            "use 1 to 63 lowercase letters, digits and hyphens, starting with a letter and not \
             ending with a hyphen",
        ))
    }
}

/// A class or image name, by the catalog's rule for names.
pub(super) fn check_catalog_name(field: &str, name: &str) -> Result<(), ConvertError> {
    if name.is_empty() {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    let ok = name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(ConvertError::invalid(
            field,
            "use 1 to 63 lowercase letters, digits, dots and hyphens, starting and ending with \
             a letter or digit",
        ))
    }
}

pub(super) fn check_fallback(
    gpu_class: &str,
    fallback: &[String],
    after_s: Option<u32>,
) -> Result<(), ConvertError> {
    if fallback.len() > MAX_FALLBACK {
        return Err(ConvertError::invalid(
            "fallback",
            format!("list at most {MAX_FALLBACK} classes"),
        ));
    }
    for (i, class) in fallback.iter().enumerate() {
        let field = format!("fallback[{i}]");
        check_catalog_name(&field, class)?;
        if class == gpu_class {
            return Err(ConvertError::invalid(field, "it is the requested class"));
        }
        if fallback[..i].contains(class) {
            return Err(ConvertError::invalid(field, "it repeats an earlier class"));
        }
    }
    match after_s {
        Some(_) if fallback.is_empty() => Err(ConvertError::invalid(
            "fallback_after_s",
            "it needs a fallback list",
        )),
        Some(s) if s > MAX_FALLBACK_AFTER_S => Err(ConvertError::invalid(
            "fallback_after_s",
            format!("wait at most {MAX_FALLBACK_AFTER_S} seconds"),
        )),
        _ => Ok(()),
    }
}

/// A model file's path in the models directory, such as `team/my-model.gguf`: relative path
/// segments of safe characters.
pub(super) fn check_model(field: &str, model: &str) -> Result<(), ConvertError> {
    if model.is_empty() {
        return Err(ConvertError::new(field, Problem::Missing));
    }
    if einsora_core::machine::is_model_path(model) {
        Ok(())
    } else {
        Err(ConvertError::invalid(
            field,
            "name a GGUF file in the models directory by its path there, such as my-model.gguf \
             or team/my-model.gguf: up to 256 letters, digits, '-', '_', '.' and '/' between \
             non-empty segments",
        ))
    }
}

/// An endpoint's slots: 1 to [`MAX_SLOTS`], [`DEFAULT_SLOTS`] when unset.
pub(super) fn check_slots(slots: Option<u32>) -> Result<u32, ConvertError> {
    match slots {
        None => Ok(DEFAULT_SLOTS),
        Some(n) if (1..=MAX_SLOTS).contains(&n) => Ok(n),
        Some(_) => Err(ConvertError::invalid(
            "endpoint.slots",
            format!("use 1 to {MAX_SLOTS} slots"),
        )),
    }
}

/// An endpoint's idle time before it parks (`EndpointParams.park_after_idle_s`): unset, or
/// within [`PARK_AFTER_IDLE_S`].
pub(super) fn check_park_after_idle(seconds: Option<u32>) -> Result<Option<u32>, ConvertError> {
    match seconds {
        Some(s) if !PARK_AFTER_IDLE_S.contains(&s) => Err(ConvertError::invalid(
            "endpoint.park_after_idle_s",
            format!(
                "use {} to {} seconds (a minute to a week), or leave it unset to never park",
                PARK_AFTER_IDLE_S.start(),
                PARK_AFTER_IDLE_S.end()
            ),
        )),
        other => Ok(other),
    }
}

/// A served name (`EndpointParams.served_name`): letters, digits, `.`, `_`, `:`, `/` and `-`,
/// not starting with `-`, `:` or `/`, up to [`MAX_SERVED_NAME`].
pub(super) fn check_served_name(field: &str, name: String) -> Result<String, ConvertError> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b"._:/-".contains(&b);
    let ok = name.len() <= MAX_SERVED_NAME
        && name.bytes().all(allowed)
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_');
    if ok {
        Ok(name)
    } else {
        Err(ConvertError::invalid(
            field,
            format!(
                "use 1 to {MAX_SERVED_NAME} letters, digits, '.', '_', ':', '/' and '-', not \
                 starting with '-', ':' or '/'"
            ),
        ))
    }
}

pub(super) fn check_vm(p: &VmParams) -> Result<(), ConvertError> {
    if p.ssh_authorized_keys.len() > MAX_SSH_KEYS {
        return Err(ConvertError::invalid(
            "vm.ssh_authorized_keys",
            format!("list at most {MAX_SSH_KEYS} keys"),
        ));
    }
    for (i, key) in p.ssh_authorized_keys.iter().enumerate() {
        let mut parts = key.split(' ');
        let algorithm = parts.next().unwrap_or_default();
        let ok = key.len() <= 8192
            && key.bytes().all(|b| (b' '..=b'~').contains(&b))
            && ["ssh-", "ecdsa-", "sk-"]
                .iter()
                .any(|p| algorithm.starts_with(p))
            && parts.next().is_some_and(|blob| !blob.is_empty());
        if !ok {
            return Err(ConvertError::invalid(
                format!("vm.ssh_authorized_keys[{i}]"),
                "use one OpenSSH public key line, e.g. `ssh-ed25519 AAAA… you@host`",
            ));
        }
    }
    if let Some(gib) = p.disk_gib
        && !(1..=MAX_DISK_GIB).contains(&gib)
    {
        return Err(ConvertError::invalid(
            "vm.disk_gib",
            format!("use 1 to {MAX_DISK_GIB} GiB"),
        ));
    }
    Ok(())
}

use tonic::metadata::MetadataValue;

use super::*;

const PHC: &str =
    "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA";

#[test]
fn hmac_matches_rfc_4231() {
    let short = hmac_sha256(&[0x0b; 20], b"Hi There");
    assert_eq!(
        secrets::hex(&short),
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    );
    let long = hmac_sha256(
        &[0xaa; 131],
        b"Test Using Larger Than Block-Size Key - Hash Key First",
    );
    assert_eq!(
        secrets::hex(&long),
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    );
}

#[test]
fn a_proof_is_its_users_until_it_expires_or_the_password_changes() {
    let (user, now) = (UserId::new(), OffsetDateTime::now_utc());
    let proof = issue(&user, PHC, now).unwrap();
    assert!(well_formed(&proof), "{proof}");
    let proofs = vec![proof.clone()];
    assert_eq!(
        check(&proofs, &user, PHC, now),
        Some(secrets::sha256(&proof))
    );
    let almost = now + LIFETIME - Duration::from_secs(1);
    assert!(check(&proofs, &user, PHC, almost).is_some());
    assert_eq!(check(&proofs, &user, PHC, now + LIFETIME), None, "expired");
    assert_eq!(
        check(&proofs, &UserId::new(), PHC, now),
        None,
        "another user"
    );
    let new_password = PHC.replace("aGFz", "bmV3");
    assert_eq!(
        check(&proofs, &user, &new_password, now),
        None,
        "a new password"
    );
    let second = issue(&user, PHC, now).unwrap();
    assert_ne!(second, proof, "each sign-in gets its own");
}

#[test]
fn a_tampered_proof_is_worth_nothing() {
    let (user, now) = (UserId::new(), OffsetDateTime::now_utc());
    let proof = issue(&user, PHC, now).unwrap();
    let parts: Vec<&str> = proof.split('.').collect();
    let later = (now + 2 * LIFETIME).unix_timestamp().to_string();
    let flip = |s: &str| {
        let last = if s.ends_with('0') { "1" } else { "0" };
        format!("{}{last}", &s[..s.len() - 1])
    };
    for forged in [
        [parts[0], &later, parts[2], parts[3]].join("."),
        [parts[0], parts[1], &flip(parts[2]), parts[3]].join("."),
        [parts[0], parts[1], parts[2], &flip(parts[3])].join("."),
        ["v2", parts[1], parts[2], parts[3]].join("."),
        proof.to_uppercase(),
        format!("{proof}."),
    ] {
        assert_eq!(
            check(std::slice::from_ref(&forged), &user, PHC, now),
            None,
            "{forged}"
        );
    }
    // Garbage first doesn't hide a good one after it.
    let both = vec!["junk".to_owned(), proof.clone()];
    assert_eq!(check(&both, &user, PHC, now), Some(secrets::sha256(&proof)));
}

#[test]
fn only_well_formed_proofs_are_taken_from_metadata() {
    let proof = issue(&UserId::new(), PHC, OffsetDateTime::now_utc()).unwrap();
    let mut metadata = MetadataMap::new();
    for value in ["nonsense", "v1.1.2.3", &proof] {
        metadata.append(METADATA, MetadataValue::try_from(value).unwrap());
    }
    assert_eq!(presented(&metadata), [proof]);
    assert!(presented(&MetadataMap::new()).is_empty());
}

//! The rotation policy at fixed dates (no wall clock, no sleeping).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "tests")]

use super::*;
use crate::certs::{
    agent_channel_wanted, issue, service_names, AGENT_CERT_KEY, AGENT_KEY_KEY, SERVER_CERT_KEY,
    SERVER_KEY_KEY,
};

/// 2026-03-01 00:00 UTC.
const T0: i64 = 20_513 * DAY;

fn days(n: i64) -> i64 {
    T0 + n * DAY
}

fn wanted() -> Wanted {
    agent_channel_wanted(
        "team/coord",
        service_names("coord", "team", "cluster.local"),
    )
}

fn ders(files: &Files, key: &str) -> Vec<Vec<u8>> {
    certificates(&files[key]).unwrap()
}

/// Whether the leaf `key` of `files` is signed by the CA certificate `ca` (DER): signature and
/// issuer name, as a TLS peer checks them.
fn signed_by(files: &Files, key: &str, ca: &[u8]) -> bool {
    let leaf_der = ders(files, key).remove(0);
    let leaf = parse(&leaf_der).unwrap();
    let ca = parse(ca).unwrap();
    leaf.verify_signature(Some(ca.public_key())).is_ok()
        && leaf.issuer().as_raw() == ca.subject().as_raw()
}

#[test]
fn a_fresh_set_has_nothing_due() {
    let files = issue(&wanted(), T0).unwrap();
    assert_eq!(plan(&files, &wanted(), T0), Vec::<Reason>::new());
    assert_eq!(plan(&files, &wanted(), days(200)), Vec::<Reason>::new());
    assert!(rotate(&files, &wanted(), days(200)).unwrap().is_none());
    let ca = parse(&ders(&files, CA_KEY)[0]).unwrap().validity().clone();
    assert!(ca.not_after.timestamp() >= days(CA_DAYS));
    let leaf_der = ders(&files, SERVER_CERT_KEY).remove(0);
    let leaf = parse(&leaf_der).unwrap();
    assert!(leaf.validity().not_after.timestamp() >= days(LEAF_DAYS));
    assert!(leaf.validity().not_after.timestamp() < days(LEAF_DAYS + 2));
}

#[test]
fn at_two_thirds_of_their_life_leaves_are_renewed_under_the_same_ca() {
    let files = issue(&wanted(), T0).unwrap();
    let reasons = plan(&files, &wanted(), days(250));
    assert_eq!(
        reasons,
        [
            Reason::LeafExpiring {
                key: SERVER_CERT_KEY,
                days_left: 115
            },
            Reason::LeafExpiring {
                key: AGENT_CERT_KEY,
                days_left: 115
            },
        ]
    );
    let renewed = renew(&files, &wanted(), &reasons, days(250)).unwrap();
    // Same CA, same bundle, same CA key; new leaves and keys.
    assert_eq!(renewed[CA_KEY], files[CA_KEY]);
    assert_eq!(renewed[CA_PRIVATE_KEY], files[CA_PRIVATE_KEY]);
    assert_ne!(renewed[SERVER_CERT_KEY], files[SERVER_CERT_KEY]);
    assert_ne!(renewed[AGENT_KEY_KEY], files[AGENT_KEY_KEY]);
    let ca = ders(&files, CA_KEY).remove(0);
    assert!(signed_by(&renewed, SERVER_CERT_KEY, &ca));
    assert!(signed_by(&renewed, AGENT_CERT_KEY, &ca));
    // The same authority key identifier as the leaves the CA signed before.
    let aki = |files: &Files, key: &str| {
        let der = ders(files, key).remove(0);
        let cert = parse(&der).unwrap();
        cert.extensions()
            .iter()
            .find_map(|e| match e.parsed_extension() {
                x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(a) => {
                    a.key_identifier.as_ref().map(|k| k.0.to_vec())
                }
                _ => None,
            })
    };
    assert!(aki(&files, SERVER_CERT_KEY).is_some());
    assert_eq!(aki(&renewed, SERVER_CERT_KEY), aki(&files, SERVER_CERT_KEY));
    assert_eq!(plan(&renewed, &wanted(), days(250)), Vec::<Reason>::new());
}

#[test]
fn near_its_expiry_the_ca_is_replaced_and_the_bundle_keeps_the_old_one() {
    let files = issue(&wanted(), T0).unwrap();
    let old_ca = ders(&files, CA_KEY).remove(0);
    let at = days(CA_DAYS - 390);
    let reasons = plan(&files, &wanted(), at);
    assert_eq!(reasons, [Reason::CaExpiring { days_left: 390 }]);
    let renewed = renew(&files, &wanted(), &reasons, at).unwrap();
    let bundle = ders(&renewed, CA_KEY);
    assert_eq!(bundle.len(), 2);
    assert_ne!(bundle[0], old_ca);
    assert_eq!(bundle[1], old_ca);
    assert_ne!(renewed[CA_PRIVATE_KEY], files[CA_PRIVATE_KEY]);
    assert!(signed_by(&renewed, SERVER_CERT_KEY, &bundle[0]));
    assert!(signed_by(&renewed, AGENT_CERT_KEY, &bundle[0]));
    assert_eq!(plan(&renewed, &wanted(), at), Vec::<Reason>::new());

    // Once the old CA expired it leaves the bundle (its leaves are due by then too).
    let later = days(CA_DAYS + 1);
    let reasons = plan(&renewed, &wanted(), later);
    assert!(reasons.contains(&Reason::OldCaExpired), "{reasons:?}");
    assert!(!reasons.iter().any(Reason::new_ca), "{reasons:?}");
    let trimmed = renew(&renewed, &wanted(), &reasons, later).unwrap();
    assert_eq!(ders(&trimmed, CA_KEY), [bundle[0].clone()]);
    assert!(signed_by(&trimmed, SERVER_CERT_KEY, &bundle[0]));
    assert_eq!(plan(&trimmed, &wanted(), later), Vec::<Reason>::new());
}

#[test]
fn changed_names_renew_that_leaf_only() {
    let files = issue(&wanted(), T0).unwrap();
    let mut moved = wanted();
    moved.leaves[0].names = service_names("coord", "team", "example.internal");
    let reasons = plan(&files, &moved, days(1));
    assert_eq!(reasons, [Reason::NamesChanged(SERVER_CERT_KEY)]);
    let renewed = renew(&files, &moved, &reasons, days(1)).unwrap();
    assert_ne!(renewed[SERVER_CERT_KEY], files[SERVER_CERT_KEY]);
    assert_ne!(renewed[SERVER_KEY_KEY], files[SERVER_KEY_KEY]);
    assert_eq!(renewed[AGENT_CERT_KEY], files[AGENT_CERT_KEY]);
    assert_eq!(renewed[CA_KEY], files[CA_KEY]);
    assert_eq!(plan(&renewed, &moved, days(1)), Vec::<Reason>::new());
    // The order of the names does not matter.
    let mut reordered = moved.clone();
    reordered.leaves[0].names.reverse();
    assert_eq!(plan(&renewed, &reordered, days(1)), Vec::<Reason>::new());
}

#[test]
fn a_secret_without_ca_key_is_migrated_to_a_new_ca_trusting_the_old_one() {
    let mut files = issue(&wanted(), T0).unwrap();
    files.remove(CA_PRIVATE_KEY);
    let old_ca = ders(&files, CA_KEY).remove(0);
    let reasons = plan(&files, &wanted(), days(10));
    assert_eq!(reasons, [Reason::CaKeyMissing]);
    let migrated = renew(&files, &wanted(), &reasons, days(10)).unwrap();
    assert!(migrated.contains_key(CA_PRIVATE_KEY));
    let bundle = ders(&migrated, CA_KEY);
    assert_eq!(bundle.len(), 2);
    assert_eq!(bundle[1], old_ca);
    assert!(signed_by(&migrated, AGENT_CERT_KEY, &bundle[0]));
    assert_eq!(plan(&migrated, &wanted(), days(10)), Vec::<Reason>::new());
}

#[test]
fn garbage_is_renewed_with_a_reason_never_a_panic() {
    let good = issue(&wanted(), T0).unwrap();

    let mut files = good.clone();
    files.insert(CA_KEY.into(), "not a certificate".into());
    let reasons = plan(&files, &wanted(), days(1));
    assert!(
        matches!(&reasons[..], [Reason::CaUnreadable(_)]),
        "{reasons:?}"
    );
    assert!(describe(&reasons).contains("ca.crt is not a readable certificate"));
    let renewed = renew(&files, &wanted(), &reasons, days(1)).unwrap();
    assert_eq!(ders(&renewed, CA_KEY).len(), 1);
    assert_eq!(plan(&renewed, &wanted(), days(1)), Vec::<Reason>::new());

    let mut files = good.clone();
    files.insert(
        SERVER_CERT_KEY.into(),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
    );
    files.insert(
        AGENT_CERT_KEY.into(),
        "-----BEGIN CERTIFICATE-----\n".into(),
    );
    let reasons = plan(&files, &wanted(), days(1));
    assert!(
        matches!(
            &reasons[..],
            [
                Reason::LeafUnreadable(SERVER_CERT_KEY, _),
                Reason::LeafUnreadable(AGENT_CERT_KEY, _)
            ]
        ),
        "{reasons:?}"
    );
    let renewed = renew(&files, &wanted(), &reasons, days(1)).unwrap();
    assert_eq!(renewed[CA_KEY], good[CA_KEY]);
    assert_eq!(plan(&renewed, &wanted(), days(1)), Vec::<Reason>::new());

    // A key that is not the certificate's, a CA key that is garbage.
    let mut files = good.clone();
    files.insert(SERVER_KEY_KEY.into(), good[AGENT_KEY_KEY].clone());
    assert_eq!(
        plan(&files, &wanted(), days(1)),
        [Reason::LeafKeyMismatch(SERVER_KEY_KEY)]
    );
    let mut files = good.clone();
    files.insert(CA_PRIVATE_KEY.into(), "garbage".into());
    let reasons = plan(&files, &wanted(), days(1));
    assert!(
        matches!(&reasons[..], [Reason::CaKeyUnusable(_)]),
        "{reasons:?}"
    );
    // The reasons never carry key material.
    assert!(!describe(&reasons).contains("garbage"));
}

#[test]
fn a_leaf_of_another_ca_is_renewed() {
    let one = issue(&wanted(), T0).unwrap();
    let other = issue(&wanted(), T0).unwrap();
    let mut files = one.clone();
    files.insert(AGENT_CERT_KEY.into(), other[AGENT_CERT_KEY].clone());
    files.insert(AGENT_KEY_KEY.into(), other[AGENT_KEY_KEY].clone());
    assert_eq!(
        plan(&files, &wanted(), days(1)),
        [Reason::LeafNotOfThisCa(AGENT_CERT_KEY)]
    );
}

use super::*;
use crate::schema::Schema;

/// Every domain value survives the round trip, and its proto value's JSON word (the
/// `einsora.options.v1.word` option) is the domain's own word.
fn check_words<T>(all: &[T], proto_enum: &str, word: impl Fn(T) -> &'static str)
where
    T: ProtoEnum + PartialEq + std::fmt::Debug,
    T::Proto: std::fmt::Debug,
{
    let schema = Schema::load().unwrap();
    let info = schema.enum_type(proto_enum).unwrap();
    let values_with_words = info.values.iter().filter(|v| v.word.is_some()).count();
    assert_eq!(
        values_with_words,
        all.len(),
        "{proto_enum}: one word per domain value"
    );
    for &value in all {
        let raw = value.to_field();
        assert_eq!(T::from_field("f", raw), Ok(value));
        let name = &info.values.iter().find(|v| v.number == raw).unwrap().name;
        assert_eq!(info.word_of(name), Some(word(value)), "{proto_enum}.{name}");
    }
}

#[test]
fn every_enum_round_trips_and_matches_the_domain_words() {
    check_words(WorkloadKind::ALL, "einsora.common.v1.WorkloadKind", |v| {
        v.as_str()
    });
    check_words(State::ALL, "einsora.common.v1.WorkloadState", |v| {
        v.as_str()
    });
    check_words(
        AcceleratorKind::ALL,
        "einsora.common.v1.AcceleratorKind",
        |v| v.as_str(),
    );
    check_words(SharingLevel::ALL, "einsora.common.v1.SharingLevel", |v| {
        v.as_str()
    });
    check_words(Mode::ALL, "einsora.agent.v1.Mode", |v| v.as_str());
    check_words(StatusCode::ALL, "einsora.agent.v1.StatusCode", |v| {
        v.as_str()
    });
    let isolation = |v| match v {
        Isolation::Weak => "weak",
        Isolation::Strong => "strong",
    };
    check_words(
        &[Isolation::Weak, Isolation::Strong],
        "einsora.catalog.v1.Isolation",
        isolation,
    );
}

#[test]
fn unspecified_is_an_error_naming_the_field() {
    let err = State::from_field("state", 0).unwrap_err();
    assert_eq!(err, ConvertError::new("state", Problem::Unspecified));
    assert_eq!(err.to_string(), "state is required (it is unspecified)");

    let err = WorkloadKind::try_from(common_pb::WorkloadKind::Unspecified).unwrap_err();
    assert_eq!(err.field, "kind");
    let err = Mode::try_from(agent_pb::Mode::Unspecified).unwrap_err();
    assert_eq!(err.field, "mode");
}

#[test]
fn unknown_values_are_an_error_naming_the_field() {
    let err = StatusCode::from_field("statuses.workloads[0].code", 999).unwrap_err();
    assert_eq!(err.field, "statuses.workloads[0].code");
    assert_eq!(err.problem, Problem::UnknownEnumValue(999));
    assert!(AcceleratorKind::from_field("vendor", -1).is_err());
}

#[test]
fn from_on_send_matches_to_field() {
    assert_eq!(
        common_pb::WorkloadState::from(State::Running),
        common_pb::WorkloadState::Running
    );
    assert_eq!(SharingLevel::InviteOnly.to_field(), 2);
    assert_eq!(
        agent_pb::StatusCode::from(StatusCode::SandboxChanged) as i32,
        StatusCode::SandboxChanged.to_field()
    );
}

#[test]
fn lists_name_the_bad_element() {
    let kinds: Vec<WorkloadKind> = enum_list("kinds", &[1, 2, 3]).unwrap();
    assert_eq!(
        kinds,
        [
            WorkloadKind::Vm,
            WorkloadKind::Notebook,
            WorkloadKind::Endpoint
        ]
    );
    let err = enum_list::<WorkloadKind>("kinds", &[2, 0]).unwrap_err();
    assert_eq!(err.field, "kinds[1]");
}

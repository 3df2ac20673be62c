use super::*;

fn columns(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// A dump is checked as it comes: tables known and in order, columns the target's (in any
/// order), rows as wide as their table, and every table there by the end.
#[test]
fn a_dump_that_doesnt_fit_is_named_where_it_goes_wrong() {
    let mut expect = Expect::new();
    let ours = columns(&["id", "name"]);
    let why = expect
        .table("secrets", &ours, &ours)
        .unwrap_err()
        .to_string();
    assert_eq!(why, "secrets: is not a table of this einsora's store");
    let why = expect.row(2).unwrap_err().to_string();
    assert_eq!(why, "a row before any table");

    expect
        .table("users", &columns(&["name", "id"]), &ours)
        .expect("the same columns, in another order");
    assert_eq!(expect.row(2).unwrap(), "users");
    let why = expect.row(3).unwrap_err().to_string();
    assert_eq!(why, "users: a row of 3 values for 2 columns");
    let why = expect
        .table("tenants", &ours, &ours)
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("tenants comes after a table that must follow it"),
        "{why}"
    );
    let why = expect
        .table("sessions", &columns(&["id"]), &ours)
        .unwrap_err()
        .to_string();
    assert!(
        why.starts_with("sessions: the backup's columns [\"id\"]"),
        "{why}"
    );
    let why = expect.finish().unwrap_err().to_string();
    assert_eq!(
        why,
        "the backup ends without the table tenants: it is incomplete"
    );
}

#[test]
fn rows_are_inserted_by_quoted_name_and_an_identity_as_dumped() {
    assert_eq!(
        insert_sql("workload_events", &columns(&["seq", "to_state"]), true),
        "INSERT INTO \"workload_events\" (\"seq\", \"to_state\") OVERRIDING SYSTEM VALUE VALUES ($1, $2)"
    );
    assert_eq!(
        insert_sql("tenants", &columns(&["id"]), false),
        "INSERT INTO \"tenants\" (\"id\") VALUES ($1)"
    );
}

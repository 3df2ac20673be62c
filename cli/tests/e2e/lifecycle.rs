//! Solo end to end on the fake backend: `einsora up` on a temp data dir, workloads launched from
//! the CLI and the JSON API through their whole life, capacity and quota, and usage.

use std::time::{Duration, Instant};

use crate::harness::cli::Cli;
use crate::harness::solo::{Engine, OWNER_EMAIL, Solo};
use crate::harness::workloads::*;
use crate::harness::world::call;

const FAST: [(&str, &str); 1] = [("EINSORA_FAKE_READY_DELAY", "0s")];

#[test]
fn workloads_live_their_whole_life_from_the_cli_and_the_json_api_on_sqlite() {
    whole_life(Engine::Sqlite);
}

#[test]
fn workloads_live_their_whole_life_from_the_cli_and_the_json_api_on_postgres() {
    whole_life(Engine::Postgres);
}

fn whole_life(engine: Engine) {
    let solo = Solo::start_on(engine, &FAST);
    let owner = Owner::of(&solo);
    let by_session = format!("{OWNER_EMAIL} (browser session)");
    let by_token = owner.by_token();
    let cli = Cli::with_token(&solo, &owner.token);

    let launched = cli.json(&[
        "launch",
        "--kind",
        "notebook",
        "--name",
        "from-cli",
        "--class",
        "cpu-1c-2g",
        "--image",
        "jupyterlab",
    ]);
    let from_cli = launched["id"].as_str().unwrap().to_owned();
    let (status, created) = create(&solo, &owner.session, "from-json", "cpu-1c-2g");
    assert_eq!(status, 202, "{created}");
    let from_json = created["id"].as_str().unwrap().to_owned();
    let session = &owner.session;

    for id in [&from_cli, &from_json] {
        wait_for(&solo, session, id, "running");
    }
    cli.ok(&["stop", &from_cli]);
    assert_eq!(act(&solo, session, &from_json, "stop").0, 202);
    for id in [&from_cli, &from_json] {
        wait_for(&solo, session, id, "stopped");
    }
    cli.ok(&["start", &from_cli]);
    assert_eq!(act(&solo, session, &from_json, "start").0, 202);
    for id in [&from_cli, &from_json] {
        wait_for(&solo, session, id, "running");
    }
    cli.ok(&["delete", &from_cli]);
    assert_eq!(act(&solo, session, &from_json, "delete").0, 202);
    for id in [&from_cli, &from_json] {
        wait_for(&solo, session, id, "deleted");
    }

    let life = |created_by: &str, actor: &str| {
        vec![
            format!("pending: created by {created_by}"),
            "provisioning: admitted: 1 × cpu-1c-2g".to_owned(),
            "running: ready".to_owned(),
            format!("stopping: stop requested by {actor}"),
            "stopped: resources released".to_owned(),
            format!("pending: start requested by {actor}"),
            "provisioning: admitted: 1 × cpu-1c-2g".to_owned(),
            "running: ready".to_owned(),
            format!("deleting: delete requested by {actor}"),
            "deleted: deleted, with everything it stored".to_owned(),
        ]
    };
    assert_eq!(
        timeline(&solo, session, &from_cli),
        life(&by_token, &by_token)
    );
    assert_eq!(
        timeline(&solo, session, &from_json),
        life(&by_session, &by_session)
    );
}

#[test]
fn full_capacity_queues_with_the_seeds_reason_then_admits_first_come_first_with_backfill() {
    let solo = Solo::start(&[
        ("EINSORA_FAKE_READY_DELAY", "0s"),
        ("EINSORA_FAKE_CAPACITY", "l40s-48gb=2,cpu-1c-2g=1"),
    ]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let id = |a: Answer2| {
        assert_eq!(a.0, 202, "{}", a.1);
        a.1["id"].as_str().unwrap().to_owned()
    };
    let first = id(create(&solo, who, "first", "l40s-48gb"));
    wait_for(&solo, who, &first, "running");
    let second = id(create(&solo, who, "second", "l40s-48gb"));
    wait_for(&solo, who, &second, "running");
    let third = id(create(&solo, who, "third", "l40s-48gb"));
    wait_for(&solo, who, &third, "queued");
    let fourth = id(create(&solo, who, "fourth", "l40s-48gb"));
    wait_for(&solo, who, &fourth, "queued");
    assert_eq!(
        timeline(&solo, who, &third)[1],
        "queued: waiting for l40s-48gb capacity: requested 1 GPU(s), 0 free",
        "the owner's tenant is trusted: it sees what is free"
    );
    let small = id(create(&solo, who, "small", "cpu-1c-2g"));
    wait_for(&solo, who, &small, "running");
    assert_eq!(
        state(&solo, who, &third),
        "queued",
        "backfill: a request that fits goes ahead"
    );
    assert_eq!(act(&solo, who, &first, "delete").0, 202);
    wait_for(&solo, who, &third, "running");
    assert_eq!(
        state(&solo, who, &fourth),
        "queued",
        "first come, first served"
    );
    assert_eq!(act(&solo, who, &second, "stop").0, 202);
    wait_for(&solo, who, &fourth, "running");
}

#[test]
fn quota_is_refused_at_create_and_at_start() {
    let solo = Solo::start(&FAST);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    limit_owner(&solo, "cpu-4c-16g", 1);
    let (status, held) = create(&solo, who, "holds", "cpu-4c-16g");
    assert_eq!(status, 202, "{held}");
    let holds = held["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &holds, "running");
    let (status, refused) = create(&solo, who, "too-many", "cpu-4c-16g");
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("quota_exceeded")),
        "{refused}"
    );
    assert_eq!(act(&solo, who, &holds, "stop").0, 202);
    wait_for(&solo, who, &holds, "stopped");
    let (status, other) = create(&solo, who, "now-fits", "cpu-4c-16g");
    assert_eq!(status, 202, "a stopped workload holds no quota: {other}");
    let (status, refused) = act(&solo, who, &holds, "start");
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (409, Some("quota_exceeded")),
        "{refused}"
    );
    assert_eq!(
        state(&solo, who, &holds),
        "stopped",
        "a refused start changes nothing"
    );
}

/// Sets the owner tenant's quota for `class` in the database, as an operator would.
fn limit_owner(solo: &Solo, class: &str, units: u32) {
    let sql = format!(
        "INSERT INTO quotas (tenant_id, gpu_class, limit_units) \
         SELECT id, '{class}', {units} FROM tenants WHERE slug = 'owner'"
    );
    solo.execute(&sql);
}

#[test]
fn usage_of_a_run_across_an_hour_boundary_is_split_at_it() {
    let solo = Solo::start(&[
        ("EINSORA_FAKE_READY_DELAY", "0s"),
        ("EINSORA_METERING_INTERVAL", "1s"),
    ]);
    let owner = Owner::of(&solo);
    let who = &owner.session;
    let (_, made) = create(&solo, who, "metered", "cpu-1c-2g");
    let id = made["id"].as_str().unwrap().to_owned();
    wait_for(&solo, who, &id, "running");
    assert_eq!(act(&solo, who, &id, "stop").0, 202);
    wait_for(&solo, who, &id, "stopped");
    // The clock, injected into the timeline: it ran from 10:59:30 to 11:00:45 on 1 March 2026.
    let at = |hms: &str| {
        time::PrimitiveDateTime::parse(
            &format!("2026-03-01 {hms}"),
            time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
        )
        .unwrap()
        .assume_utc()
        .unix_timestamp()
            * 1000
    };
    let uuid = uuid::Uuid::parse_str(&id).unwrap();
    let key = format!("X'{}'", uuid.simple());
    solo.execute(&format!(
        "UPDATE workload_events SET at = CASE to_state WHEN 'running' THEN {} \
             WHEN 'stopping' THEN {} WHEN 'stopped' THEN {} ELSE {} END WHERE workload_id = {key}; \
             UPDATE workloads SET updated_at = updated_at + 1 WHERE id = {key}",
        at("10:59:30"),
        at("11:00:45"),
        at("11:00:46"),
        at("10:59:00"),
    ));
    let deadline = Instant::now() + Duration::from_secs(60);
    let records = loop {
        let answer = call(
            &solo,
            who,
            "GET",
            "/v1/usage?from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z",
            None,
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
        let records = answer.json()["records"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if records.len() == 2 || Instant::now() > deadline {
            break records;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let hours: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r["hour_start"].as_str().unwrap(),
                r["seconds"].as_u64().unwrap(),
                r["placed_class"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        hours,
        [
            ("2026-03-01T10:00:00Z", 30, "cpu-1c-2g"),
            ("2026-03-01T11:00:00Z", 45, "cpu-1c-2g")
        ],
        "{records:?}"
    );
}

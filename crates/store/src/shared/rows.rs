// Decoding rows, shared by both engines (included; see shared/mod docs in sqlite.rs).

const WORKLOAD_COLUMNS: &str = "id, tenant_id, owner_id, kind, name, gpu_class, placed_class, units, \
     image, region, machine_id, driver, devices, attempt, fallback, fallback_after_s, params, \
     state, reason, version, created_at, updated_at";

fn parse_word<T: std::str::FromStr>(what: &'static str, s: &str) -> Result<T, StoreError> {
    s.parse().map_err(|_| StoreError::corrupt(what, s))
}

fn to_u32(what: &'static str, n: i64) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|_| StoreError::corrupt(what, n))
}

fn workload_from_row(row: &<Db as sqlx::Database>::Row) -> Result<Workload, StoreError> {
    let fallback: String = row.try_get("fallback")?;
    let devices: String = row.try_get("devices")?;
    let region: String = row.try_get("region")?;
    Ok(Workload {
        id: WorkloadId::from_uuid(row.try_get("id")?),
        tenant_id: TenantId::from_uuid(row.try_get("tenant_id")?),
        owner: row
            .try_get::<Option<Uuid>, _>("owner_id")?
            .map(einsora_core::ids::UserId::from_uuid),
        kind: parse_word("kind", &row.try_get::<String, _>("kind")?)?,
        name: row.try_get("name")?,
        gpu_class: row.try_get("gpu_class")?,
        placed_class: row.try_get("placed_class")?,
        units: to_u32("units", row.try_get("units")?)?,
        image: row.try_get("image")?,
        region: Region::new(&region).map_err(|_| StoreError::corrupt("region", &region))?,
        machine_id: row
            .try_get::<Option<Uuid>, _>("machine_id")?
            .map(MachineId::from_uuid),
        driver: row.try_get("driver")?,
        devices: serde_json::from_str(&devices)
            .map_err(|_| StoreError::corrupt("device list", &devices))?,
        attempt: Attempt::new(to_u32("attempt", row.try_get("attempt")?)?),
        fallback: serde_json::from_str(&fallback)
            .map_err(|_| StoreError::corrupt("fallback list", &fallback))?,
        fallback_after_s: row
            .try_get::<Option<i64>, _>("fallback_after_s")?
            .map(|s| to_u32("fallback_after_s", s))
            .transpose()?,
        params: row.try_get("params")?,
        state: parse_word("state", &row.try_get::<String, _>("state")?)?,
        reason: row.try_get("reason")?,
        version: row.try_get("version")?,
        created_at: from_ms(row.try_get("created_at")?)?,
        updated_at: from_ms(row.try_get("updated_at")?)?,
    })
}

fn event_from_row(row: &<Db as sqlx::Database>::Row) -> Result<Event, StoreError> {
    let from: Option<String> = row.try_get("from_state")?;
    Ok(Event {
        seq: row.try_get("seq")?,
        workload_id: WorkloadId::from_uuid(row.try_get("workload_id")?),
        from: from.map(|s| parse_word("state", &s)).transpose()?,
        to: parse_word("state", &row.try_get::<String, _>("to_state")?)?,
        reason: row.try_get("reason")?,
        attempt: Attempt::new(to_u32("attempt", row.try_get("attempt")?)?),
        at: from_ms(row.try_get("at")?)?,
    })
}

// Decoding inventory rows, shared by both engines (included).

use einsora_core::ids::UsageRecordId;
use einsora_core::machine::{CpuCores, Machine, VmHost};

use crate::{MachineRecord, UsageRecord};

const MACHINE_COLUMNS: &str = "id, owner_id, owner_user_id, trusted_users, name, region, os, arch, cpus, memory_bytes, \
     accelerators, drivers, sharing, last_seen_at, revoked_at, created_at, flagged_for, \
     flagged_at, flagged_last_at, models, gpu_note, gpu_usage, gpu_usage_at, performance_cores, \
     efficiency_cores, vm_accel, vm_limit";

const USAGE_COLUMNS: &str =
    "id, tenant_id, workload_id, region, machine_id, placed_class, units, hour_start, seconds";

/// A tenant's machines (`$1`), each with how many of that tenant's workloads hold it.
static SELECT_MACHINES: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {MACHINE_COLUMNS}, (SELECT COUNT(*) FROM workloads w WHERE w.machine_id = \
         machines.id AND w.tenant_id = $1 AND w.state IN ({})) AS workload_count \
         FROM machines WHERE owner_id = $1",
        *crate::state_sql::HOLDS_CAPACITY
    )
});

/// How it runs VMs, when its agent said.
fn vm_from_row(row: &<Db as sqlx::Database>::Row) -> Result<Option<VmHost>, StoreError> {
    let Some(accel) = row.try_get::<Option<String>, _>("vm_accel")? else {
        return Ok(None);
    };
    Ok(Some(VmHost {
        accel: parse_word("VM acceleration", &accel)?,
        limit: row
            .try_get::<Option<i64>, _>("vm_limit")?
            .map(|n| to_u32("VM limit", n))
            .transpose()?,
    }))
}

/// Its CPUs by kind, when both counts are there.
fn cores_from_row(row: &<Db as sqlx::Database>::Row) -> Result<Option<CpuCores>, StoreError> {
    let performance: Option<i64> = row.try_get("performance_cores")?;
    let efficiency: Option<i64> = row.try_get("efficiency_cores")?;
    Ok(match (performance, efficiency) {
        (Some(p), Some(e)) => Some(CpuCores {
            performance: to_u32("performance cores", p)?,
            efficiency: to_u32("efficiency cores", e)?,
        }),
        _ => None,
    })
}

fn machine_from_row(row: &<Db as sqlx::Database>::Row) -> Result<MachineRecord, StoreError> {
    let region: String = row.try_get("region")?;
    let memory: i64 = row.try_get("memory_bytes")?;
    let count: i64 = row.try_get("workload_count")?;
    let drivers: String = row.try_get("drivers")?;
    Ok(MachineRecord {
        machine: Machine {
            trusted_users: {
                let text: String = row.try_get("trusted_users")?;
                serde_json::from_str::<Vec<Uuid>>(&text)
                    .map_err(|_| StoreError::corrupt("trusted user list", &text))?
                    .into_iter()
                    .map(einsora_core::ids::UserId::from_uuid)
                    .collect()
            },
            id: MachineId::from_uuid(row.try_get("id")?),
            owner: TenantId::from_uuid(row.try_get("owner_id")?),
            owner_user: row
                .try_get::<Option<Uuid>, _>("owner_user_id")?
                .map(einsora_core::ids::UserId::from_uuid),
            name: row.try_get("name")?,
            region: Region::new(&region).map_err(|_| StoreError::corrupt("region", &region))?,
            os: row.try_get("os")?,
            arch: row.try_get("arch")?,
            cpus: to_u32("cpus", row.try_get("cpus")?)?,
            memory_bytes: u64::try_from(memory)
                .map_err(|_| StoreError::corrupt("memory size", memory))?,
            devices: crate::devices::from_json(&row.try_get::<String, _>("accelerators")?)?,
            sharing: parse_word("sharing level", &row.try_get::<String, _>("sharing")?)?,
            cores: cores_from_row(row)?,
        },
        drivers: serde_json::from_str(&drivers)
            .map_err(|_| StoreError::corrupt("driver list", &drivers))?,
        models: crate::model_files::from_json(&row.try_get::<String, _>("models")?)?,
        gpu_note: row
            .try_get::<Option<String>, _>("gpu_note")?
            .map(|w| parse_word("GPU note", &w))
            .transpose()?,
        vm: vm_from_row(row)?,
        gpu_usage: row
            .try_get::<Option<String>, _>("gpu_usage")?
            .map(|text| crate::devices::usage_from_json(&text))
            .transpose()?
            .unwrap_or_default(),
        gpu_usage_at: optional_ms(row.try_get("gpu_usage_at")?)?,
        last_seen_at: optional_ms(row.try_get("last_seen_at")?)?,
        revoked_at: optional_ms(row.try_get("revoked_at")?)?,
        created_at: from_ms(row.try_get("created_at")?)?,
        workload_count: to_u32("workload count", count)?,
        flag: match (
            row.try_get::<Option<String>, _>("flagged_for")?,
            optional_ms(row.try_get("flagged_at")?)?,
            optional_ms(row.try_get("flagged_last_at")?)?,
        ) {
            (Some(what), Some(since), Some(last)) => Some(crate::MachineFlag { what, since, last }),
            _ => None,
        },
    })
}

fn usage_from_row(row: &<Db as sqlx::Database>::Row) -> Result<UsageRecord, StoreError> {
    let region: String = row.try_get("region")?;
    Ok(UsageRecord {
        id: UsageRecordId::from_uuid(row.try_get("id")?),
        tenant_id: TenantId::from_uuid(row.try_get("tenant_id")?),
        workload_id: WorkloadId::from_uuid(row.try_get("workload_id")?),
        region: Region::new(&region).map_err(|_| StoreError::corrupt("region", &region))?,
        machine_id: row
            .try_get::<Option<Uuid>, _>("machine_id")?
            .map(MachineId::from_uuid),
        placed_class: row.try_get("placed_class")?,
        units: to_u32("units", row.try_get("units")?)?,
        hour_start: from_ms(row.try_get("hour_start")?)?,
        seconds: to_u32("seconds", row.try_get("seconds")?)?,
    })
}

fn optional_ms(ms: Option<i64>) -> Result<Option<time::OffsetDateTime>, StoreError> {
    ms.map(from_ms).transpose()
}

//! A machine's accelerator devices, stored as a JSON array in `machines.accelerators`:
//! `[{"vendor": "nvidia", "model": "NVIDIA L40S", "uuid": "GPU-…", "memory_bytes": 48…}]`;
//! and how busy they were at the last sample, in `machines.gpu_usage`:
//! `[{"uuid": "GPU-…", "utilization_percent": 87, "memory_used_bytes": 20…}]`.

use einsora_core::machine::{Device, GpuSample};
use serde_json::{Value, json};

use crate::StoreError;

pub(crate) fn to_json(devices: &[Device]) -> String {
    let list: Vec<Value> = devices
        .iter()
        .map(|d| {
            json!({
                "vendor": d.vendor.as_str(),
                "model": d.model,
                "uuid": d.uuid,
                "memory_bytes": d.memory_bytes,
            })
        })
        .collect();
    Value::from(list).to_string()
}

pub(crate) fn from_json(text: &str) -> Result<Vec<Device>, StoreError> {
    let corrupt = || StoreError::corrupt("device list", text);
    let list: Vec<Value> = serde_json::from_str(text).map_err(|_| corrupt())?;
    list.iter()
        .map(|d| {
            let text_field = |name: &str| d.get(name).and_then(Value::as_str).ok_or_else(corrupt);
            Ok(Device {
                vendor: text_field("vendor")?.parse().map_err(|_| corrupt())?,
                model: text_field("model")?.to_owned(),
                uuid: text_field("uuid")?.to_owned(),
                memory_bytes: d
                    .get("memory_bytes")
                    .and_then(Value::as_u64)
                    .ok_or_else(corrupt)?,
            })
        })
        .collect()
}

pub(crate) fn usage_to_json(gpus: &[GpuSample]) -> String {
    let list: Vec<Value> = gpus
        .iter()
        .map(|g| {
            json!({
                "uuid": g.uuid,
                "utilization_percent": g.utilization_percent,
                "memory_used_bytes": g.memory_used_bytes,
            })
        })
        .collect();
    Value::from(list).to_string()
}

pub(crate) fn usage_from_json(text: &str) -> Result<Vec<GpuSample>, StoreError> {
    let corrupt = || StoreError::corrupt("GPU usage", text);
    let list: Vec<Value> = serde_json::from_str(text).map_err(|_| corrupt())?;
    list.iter()
        .map(|g| {
            let number = |name: &str| g.get(name).and_then(Value::as_u64).ok_or_else(corrupt);
            Ok(GpuSample {
                uuid: g
                    .get("uuid")
                    .and_then(Value::as_str)
                    .ok_or_else(corrupt)?
                    .to_owned(),
                utilization_percent: u32::try_from(number("utilization_percent")?)
                    .map_err(|_| corrupt())?,
                memory_used_bytes: number("memory_used_bytes")?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use einsora_core::accelerator::AcceleratorKind;

    use super::*;

    #[test]
    fn devices_round_trip_and_bad_json_is_corrupt() {
        let devices = vec![Device {
            vendor: AcceleratorKind::Nvidia,
            model: "NVIDIA L40S".into(),
            uuid: "GPU-1".into(),
            memory_bytes: 48 << 30,
        }];
        assert_eq!(from_json(&to_json(&devices)).unwrap(), devices);
        assert_eq!(from_json("[]").unwrap(), []);
        for bad in [
            "{}",
            "[{}]",
            r#"[{"vendor":"tpu","model":"","uuid":"","memory_bytes":1}]"#,
        ] {
            assert!(
                matches!(from_json(bad), Err(StoreError::Corrupt { .. })),
                "{bad}"
            );
        }
    }
}

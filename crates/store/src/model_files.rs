//! A machine's model files, stored as a JSON array in `machines.models`:
//! `[{"path": "team/my-model.gguf", "size_bytes": 123}]`.

use einsora_core::machine::ModelFile;

use crate::StoreError;

pub(crate) fn to_json(models: &[ModelFile]) -> String {
    serde_json::to_string(models).unwrap_or_else(|_| "[]".to_owned())
}

pub(crate) fn from_json(text: &str) -> Result<Vec<ModelFile>, StoreError> {
    serde_json::from_str(text).map_err(|_| StoreError::corrupt("model file list", text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_files_round_trip_and_bad_json_is_corrupt() {
        let models = vec![ModelFile {
            path: "team/a.gguf".into(),
            size_bytes: 7,
        }];
        let text = to_json(&models);
        assert_eq!(text, r#"[{"path":"team/a.gguf","size_bytes":7}]"#);
        assert_eq!(from_json(&text).unwrap(), models);
        assert!(from_json("[{\"path\": 1}]").is_err());
        assert!(from_json("{}").is_err());
    }
}

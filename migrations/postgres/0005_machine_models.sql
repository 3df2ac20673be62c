-- The model files a machine's agent validated in its models directory, as its last inventory
-- reported them: a JSON array of {"path": "team/my-model.gguf", "size_bytes": 123}.

ALTER TABLE machines ADD COLUMN models TEXT NOT NULL DEFAULT '[]';

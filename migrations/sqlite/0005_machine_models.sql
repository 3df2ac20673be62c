-- The model files a machine's agent validated in its models directory (SQLite flavour of
-- migrations/postgres/0005_machine_models.sql): a JSON array of
-- {"path": "team/my-model.gguf", "size_bytes": 123}.

ALTER TABLE machines ADD COLUMN models TEXT NOT NULL DEFAULT '[]';

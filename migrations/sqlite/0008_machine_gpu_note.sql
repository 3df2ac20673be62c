-- Why a machine's GPUs aren't offered for placement, as its agent last said (SQLite flavour
-- of migrations/postgres/0008_machine_gpu_note.sql): a word of einsora_core's GpuNote, or
-- NULL when they are (or it has none).

ALTER TABLE machines ADD COLUMN gpu_note TEXT;

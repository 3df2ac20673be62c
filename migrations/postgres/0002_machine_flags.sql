-- A machine flagged for misbehaving on its stream: what for (a word of the controller's
-- vocabulary, e.g. `oversized_report`, `report_flood`), first when and last when.

ALTER TABLE machines ADD COLUMN flagged_for TEXT;
ALTER TABLE machines ADD COLUMN flagged_at BIGINT;
ALTER TABLE machines ADD COLUMN flagged_last_at BIGINT;

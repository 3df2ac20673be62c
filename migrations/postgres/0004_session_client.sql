-- What signed each session in: the dashboard (`browser`, and any client that doesn't say) or
-- `einsora login` (`cli`). It names the session in timelines; it grants nothing.

ALTER TABLE sessions ADD COLUMN client TEXT NOT NULL DEFAULT 'browser'
    CHECK (client IN ('browser', 'cli'));

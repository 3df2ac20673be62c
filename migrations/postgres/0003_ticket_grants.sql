-- The credential that asked for each notebook ticket: the browser session (its ID's hash) or
-- the API token (its ID). The access proxy ends the notebook sessions a ticket opened once
-- that credential ends (logout, password change or reset, revocation). One of the two is set.

ALTER TABLE access_tickets ADD COLUMN granted_session BYTEA;
ALTER TABLE access_tickets ADD COLUMN granted_token UUID;

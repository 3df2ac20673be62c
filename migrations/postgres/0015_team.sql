-- Users of a tenant with roles (owner, admin, member), disabled users, one-time invite and
-- password-reset links, and who owns each workload and machine: weak isolation is for the
-- machine owner's own workloads, by user, not by tenant (docs/api.md "Users and roles").

ALTER TABLE users ADD COLUMN role TEXT NOT NULL DEFAULT 'member'
    CHECK (role IN ('owner', 'admin', 'member'));
-- Set while the user may not sign in; their sessions were ended and tokens revoked then.
ALTER TABLE users ADD COLUMN disabled_at BIGINT;
-- Until now a tenant's first user was its owner.
UPDATE users SET role = 'owner' WHERE id IN (
    SELECT (SELECT f.id FROM users f WHERE f.tenant_id = t.id ORDER BY f.created_at, f.id LIMIT 1)
    FROM tenants t);

-- The user who created the workload: a member sees and manages only their own.
ALTER TABLE workloads ADD COLUMN owner_id UUID;
UPDATE workloads SET owner_id = (
    SELECT f.id FROM users f WHERE f.tenant_id = workloads.tenant_id
    ORDER BY f.created_at, f.id LIMIT 1);

-- The user whose enrolment token brought the machine in: weakly isolated drivers run only
-- their workloads.
ALTER TABLE machines ADD COLUMN owner_user_id UUID;
UPDATE machines SET owner_user_id = COALESCE(
    (SELECT e.created_by FROM enrolment_tokens e WHERE e.machine_id = machines.id
     ORDER BY e.used_at LIMIT 1),
    (SELECT f.id FROM users f WHERE f.tenant_id = machines.owner_id
     ORDER BY f.created_at, f.id LIMIT 1));
-- Other users of the tenant its owning user lets run weakly isolated workloads there: a JSON
-- list of user IDs.
ALTER TABLE machines ADD COLUMN trusted_users TEXT NOT NULL DEFAULT '[]';

-- One-time links an admin passes on by hand: an invite (a new user of the tenant, with the
-- role given, sets their password) or a password reset (for user_id). Only the secret's
-- SHA-256 is kept.
CREATE TABLE account_links (
    id           UUID PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('invite', 'password_reset')),
    tenant_id    UUID NOT NULL REFERENCES tenants(id),
    email        TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    user_id      UUID REFERENCES users(id) ON DELETE CASCADE,
    secret_hash  BYTEA NOT NULL UNIQUE,
    created_by   UUID NOT NULL,
    created_at   BIGINT NOT NULL,
    expires_at   BIGINT NOT NULL,
    used_at      BIGINT,
    revoked_at   BIGINT,
    CHECK ((kind = 'invite') = (user_id IS NULL))
);
CREATE INDEX account_links_tenant ON account_links (tenant_id, kind, created_at);

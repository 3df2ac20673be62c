// `UserStore`, shared by both engines (included). A module of its own, so its imports can't
// collide with the other included files'.

mod users_sql {
    use super::*;

    use einsora_core::ids::{AccountLinkId, UserId};
    use einsora_core::role::Role;

    use super::accounts_sql::{USER_BY_ID, insert_user, user_from_row};
    use crate::accounts::{NewUser, SecretHash, User};
    use crate::time_ms::to_ms;
    use crate::users::{
        AccountLinkRecord, Invitee, LinkKind, NewAccountLink, UserChange, UserRecord, UserRefusal,
        email_taken,
    };

    type DbRow = <Db as sqlx::Database>::Row;

    const USER_RECORD_COLUMNS: &str =
        "id, email, display_name, role, team_id, created_at, disabled_at";
    const LINK_COLUMNS: &str = "id, kind, email, role, user_id, created_by, created_at, \
         expires_at, used_at, revoked_at";

    fn optional_ms(row: &DbRow, column: &str) -> Result<Option<time::OffsetDateTime>, StoreError> {
        row.try_get::<Option<i64>, _>(column)?
            .map(from_ms)
            .transpose()
    }

    fn user_record(row: &DbRow) -> Result<UserRecord, StoreError> {
        Ok(UserRecord {
            id: UserId::from_uuid(row.try_get("id")?),
            email: row.try_get("email")?,
            display_name: row.try_get("display_name")?,
            role: parse_word("role", &row.try_get::<String, _>("role")?)?,
            team_id: row
                .try_get::<Option<Uuid>, _>("team_id")?
                .map(einsora_core::ids::TeamId::from_uuid),
            created_at: from_ms(row.try_get("created_at")?)?,
            disabled_at: optional_ms(row, "disabled_at")?,
        })
    }

    fn link_record(row: &DbRow) -> Result<AccountLinkRecord, StoreError> {
        let kind: String = row.try_get("kind")?;
        Ok(AccountLinkRecord {
            id: AccountLinkId::from_uuid(row.try_get("id")?),
            kind: LinkKind::from_word(&kind)
                .ok_or_else(|| StoreError::corrupt("link kind", &kind))?,
            email: row.try_get("email")?,
            role: parse_word("role", &row.try_get::<String, _>("role")?)?,
            user_id: row
                .try_get::<Option<Uuid>, _>("user_id")?
                .map(UserId::from_uuid),
            created_by: UserId::from_uuid(row.try_get("created_by")?),
            created_at: from_ms(row.try_get("created_at")?)?,
            expires_at: from_ms(row.try_get("expires_at")?)?,
            used_at: optional_ms(row, "used_at")?,
            revoked_at: optional_ms(row, "revoked_at")?,
        })
    }

    async fn read_user(
        tx: &mut Tx<'_>,
        tenant: TenantId,
        id: UserId,
    ) -> Result<Option<UserRecord>, StoreError> {
        let sql =
            format!("SELECT {USER_RECORD_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2");
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(tenant.as_uuid())
            .bind(id.as_uuid())
            .fetch_optional(&mut **tx)
            .await?;
        row.as_ref().map(user_record).transpose()
    }

    /// Locks the tenant's users (its row, which every change of its users takes first), so
    /// two admins can't each demote or disable one of the last two owners.
    async fn lock_tenant(tx: &mut Tx<'_>, tenant: TenantId) -> Result<(), StoreError> {
        let found: Option<Uuid> = sqlx::query_scalar(concat!(
            "SELECT id FROM tenants WHERE id = $1",
            for_update!()
        ))
        .bind(tenant.as_uuid())
        .fetch_optional(&mut **tx)
        .await?;
        found.map(|_| ()).ok_or(StoreError::NotFound)
    }

    /// Refuses a change that leaves the tenant without an enabled owner (`but`: the user being
    /// changed, whose row no longer counts).
    async fn keep_an_owner(
        tx: &mut Tx<'_>,
        tenant: TenantId,
        but: UserId,
    ) -> Result<(), StoreError> {
        let others: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM users WHERE tenant_id = $1 AND role = 'owner' \
             AND disabled_at IS NULL AND id <> $2",
        )
        .bind(tenant.as_uuid())
        .bind(but.as_uuid())
        .fetch_one(&mut **tx)
        .await?;
        if others == 0 {
            return Err(UserRefusal::LastOwner.into());
        }
        Ok(())
    }

    /// Ends every session and revokes every live API token and inference key of the user.
    async fn cut_off(tx: &mut Tx<'_>, user: UserId, now: i64) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM sessions WHERE user_id = $1")
            .bind(user.as_uuid())
            .execute(&mut **tx)
            .await?;
        sqlx::query(
            "UPDATE api_tokens SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user.as_uuid())
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "UPDATE inference_keys SET revoked_at = $1 WHERE user_id = $2 AND revoked_at IS NULL",
        )
        .bind(now)
        .bind(user.as_uuid())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Takes a link of `kind` once: of any number of concurrent takers, exactly one gets the
    /// row, in the caller's transaction.
    async fn take_link(
        tx: &mut Tx<'_>,
        secret_hash: &SecretHash,
        kind: LinkKind,
        now: i64,
    ) -> Result<Option<AccountLinkRecord>, StoreError> {
        let sql = format!(
            "UPDATE account_links SET used_at = $1 WHERE secret_hash = $2 AND kind = $3 \
             AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $1 \
             RETURNING {LINK_COLUMNS}, tenant_id"
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(&secret_hash[..])
            .bind(kind.word())
            .fetch_optional(&mut **tx)
            .await?;
        row.as_ref().map(link_record).transpose()
    }

    async fn user_by_id(tx: &mut Tx<'_>, id: UserId) -> Result<Option<User>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(USER_BY_ID.as_str()))
            .bind(id.as_uuid())
            .fetch_optional(&mut **tx)
            .await?;
        row.as_ref().map(user_from_row).transpose()
    }

    #[async_trait::async_trait]
    impl crate::UserStore for ThisStore {
        #[tracing::instrument(level = "debug", name = "store.users", skip_all)]
        async fn users(&self, tenant: TenantId) -> Result<Vec<UserRecord>, StoreError> {
            let sql = format!(
                "SELECT {USER_RECORD_COLUMNS} FROM users WHERE tenant_id = $1 \
                 ORDER BY created_at, id"
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(tenant.as_uuid())
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(user_record).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.user_of", skip_all)]
        async fn user_of(
            &self,
            tenant: TenantId,
            id: UserId,
        ) -> Result<Option<UserRecord>, StoreError> {
            let sql =
                format!("SELECT {USER_RECORD_COLUMNS} FROM users WHERE tenant_id = $1 AND id = $2");
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(tenant.as_uuid())
                .bind(id.as_uuid())
                .fetch_optional(self.reader())
                .await?;
            row.as_ref().map(user_record).transpose()
        }

        #[tracing::instrument(level = "debug", name = "store.update_user", skip_all)]
        async fn update_user(
            &self,
            tenant: TenantId,
            id: UserId,
            change: &UserChange,
        ) -> Result<Option<UserRecord>, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            lock_tenant(&mut tx, tenant).await?;
            let Some(user) = read_user(&mut tx, tenant, id).await? else {
                return Ok(None);
            };
            let role = change.role.unwrap_or(user.role);
            let disabled = change.disabled.unwrap_or(user.disabled_at.is_some());
            if user.role == Role::Owner && (role != Role::Owner || disabled) {
                keep_an_owner(&mut tx, tenant, id).await?;
            }
            let disabled_at = match (disabled, user.disabled_at) {
                (true, Some(at)) => Some(to_ms(at)),
                (true, None) => Some(now),
                (false, _) => None,
            };
            sqlx::query("UPDATE users SET role = $1, disabled_at = $2 WHERE id = $3")
                .bind(role.as_str())
                .bind(disabled_at)
                .bind(id.as_uuid())
                .execute(&mut *tx)
                .await?;
            if disabled {
                cut_off(&mut tx, id, now).await?;
            }
            let updated = read_user(&mut tx, tenant, id).await?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(updated)
        }

        #[tracing::instrument(level = "debug", name = "store.remove_user", skip_all)]
        async fn remove_user(&self, tenant: TenantId, id: UserId) -> Result<bool, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            lock_tenant(&mut tx, tenant).await?;
            let Some(user) = read_user(&mut tx, tenant, id).await? else {
                return Ok(false);
            };
            if user.role == Role::Owner {
                keep_an_owner(&mut tx, tenant, id).await?;
            }
            let workloads: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM workloads WHERE owner_id = $1 AND state <> 'deleted'",
            )
            .bind(id.as_uuid())
            .fetch_one(&mut *tx)
            .await?;
            let machines: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM machines WHERE owner_user_id = $1 AND revoked_at IS NULL",
            )
            .bind(id.as_uuid())
            .fetch_one(&mut *tx)
            .await?;
            if workloads > 0 || machines > 0 {
                return Err(UserRefusal::StillOwns {
                    workloads: workloads.unsigned_abs(),
                    machines: machines.unsigned_abs(),
                }
                .into());
            }
            // Its enrolment tokens name their creator; sessions, tokens, tickets and resets
            // go with the user (ON DELETE CASCADE).
            sqlx::query("DELETE FROM enrolment_tokens WHERE created_by = $1")
                .bind(id.as_uuid())
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM users WHERE id = $1")
                .bind(id.as_uuid())
                .execute(&mut *tx)
                .await?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(true)
        }

        #[tracing::instrument(level = "debug", name = "store.create_account_link", skip_all)]
        async fn create_account_link(
            &self,
            link: &NewAccountLink,
        ) -> Result<AccountLinkRecord, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let (email, role) = match (link.kind, link.user_id) {
                (LinkKind::Invite, None) => {
                    let taken: Option<Uuid> =
                        sqlx::query_scalar("SELECT id FROM users WHERE email = $1")
                            .bind(&link.email)
                            .fetch_optional(&mut *tx)
                            .await?;
                    if taken.is_some() {
                        return Err(email_taken(&link.email));
                    }
                    (link.email.clone(), link.role)
                }
                (LinkKind::PasswordReset, Some(user)) => {
                    let user = read_user(&mut tx, link.tenant_id, user)
                        .await?
                        .ok_or(StoreError::NotFound)?;
                    (user.email, user.role)
                }
                _ => {
                    return Err(StoreError::InvalidInput(
                        "an invite names no user; a password reset names one".into(),
                    ));
                }
            };
            sqlx::query(
                "INSERT INTO account_links (id, kind, tenant_id, email, role, user_id, \
                 secret_hash, created_by, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            )
            .bind(link.id.as_uuid())
            .bind(link.kind.word())
            .bind(link.tenant_id.as_uuid())
            .bind(&email)
            .bind(role.as_str())
            .bind(link.user_id.map(|u| *u.as_uuid()))
            .bind(&link.secret_hash[..])
            .bind(link.created_by.as_uuid())
            .bind(now)
            .bind(to_ms(link.expires_at))
            .execute(&mut *tx)
            .await?;
            commit_action(tx, Some(ActivityObject::of(link.id))).await?;
            Ok(AccountLinkRecord {
                id: link.id,
                kind: link.kind,
                email,
                role,
                user_id: link.user_id,
                created_by: link.created_by,
                created_at: from_ms(now)?,
                expires_at: from_ms(to_ms(link.expires_at))?,
                used_at: None,
                revoked_at: None,
            })
        }

        #[tracing::instrument(level = "debug", name = "store.account_links", skip_all)]
        async fn account_links(
            &self,
            tenant: TenantId,
            kind: LinkKind,
        ) -> Result<Vec<AccountLinkRecord>, StoreError> {
            let sql = format!(
                "SELECT {LINK_COLUMNS} FROM account_links WHERE tenant_id = $1 AND kind = $2 \
                 ORDER BY created_at DESC, id DESC"
            );
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(tenant.as_uuid())
                .bind(kind.word())
                .fetch_all(self.reader())
                .await?;
            rows.iter().map(link_record).collect()
        }

        #[tracing::instrument(level = "debug", name = "store.revoke_account_link", skip_all)]
        async fn revoke_account_link(
            &self,
            tenant: TenantId,
            id: AccountLinkId,
        ) -> Result<Option<AccountLinkRecord>, StoreError> {
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let sql = format!(
                "UPDATE account_links SET revoked_at = COALESCE(revoked_at, $1) \
                 WHERE id = $2 AND tenant_id = $3 AND used_at IS NULL RETURNING {LINK_COLUMNS}"
            );
            let row = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(now_ms())
                .bind(id.as_uuid())
                .bind(tenant.as_uuid())
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = row else {
                return Ok(None);
            };
            let link = link_record(&row)?;
            commit_action(tx, Some(ActivityObject::of(id))).await?;
            Ok(Some(link))
        }

        #[tracing::instrument(level = "debug", name = "store.accept_invite", skip_all)]
        async fn accept_invite(
            &self,
            secret_hash: &SecretHash,
            invitee: &Invitee,
        ) -> Result<Option<User>, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let Some(link) = take_link(&mut tx, secret_hash, LinkKind::Invite, now).await? else {
                return Ok(None);
            };
            let tenant: Uuid =
                sqlx::query_scalar("SELECT tenant_id FROM account_links WHERE id = $1")
                    .bind(link.id.as_uuid())
                    .fetch_one(&mut *tx)
                    .await?;
            // Without a name of their own, the e-mail's local part.
            let display_name = match invitee.display_name.trim() {
                "" => link
                    .email
                    .split('@')
                    .next()
                    .unwrap_or(&link.email)
                    .to_owned(),
                name => name.to_owned(),
            };
            let user = NewUser {
                id: invitee.id,
                tenant_id: TenantId::from_uuid(tenant),
                email: link.email.clone(),
                display_name,
                role: link.role,
                phc: invitee.phc.clone(),
            };
            insert_user(&mut tx, &user, now).await?;
            let user = user_by_id(&mut tx, invitee.id).await?;
            commit_action(tx, Some(ActivityObject::of(invitee.id))).await?;
            Ok(user)
        }

        #[tracing::instrument(level = "debug", name = "store.reset_password", skip_all)]
        async fn reset_password(
            &self,
            secret_hash: &SecretHash,
            phc: &str,
        ) -> Result<Option<User>, StoreError> {
            let now = now_ms();
            let mut conn = self.writer().await?;
            let mut tx = begin_write(&mut conn).await?;
            let Some(link) = take_link(&mut tx, secret_hash, LinkKind::PasswordReset, now).await?
            else {
                return Ok(None);
            };
            let Some(user) = link.user_id else {
                return Ok(None);
            };
            // A disabled user's reset does nothing (and is used up).
            let Some(found) = user_by_id(&mut tx, user).await? else {
                tx.commit().await?;
                return Ok(None);
            };
            sqlx::query(
                "UPDATE password_credentials SET phc = $1, updated_at = $2 WHERE user_id = $3",
            )
            .bind(phc)
            .bind(now)
            .bind(user.as_uuid())
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM sessions WHERE user_id = $1")
                .bind(user.as_uuid())
                .execute(&mut *tx)
                .await?;
            commit_action(tx, Some(ActivityObject::of(user))).await?;
            Ok(Some(found))
        }
    }
}

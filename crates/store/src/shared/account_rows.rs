// Rows and queries of `AccountStore`, shared by both engines (included by accounts.rs).

/// A user row joined with its tenant, as `user_from_row` reads it.
const USER_COLUMNS: &str =
    "u.id AS user_id, u.tenant_id, t.name AS tenant_name, u.email, u.role AS user_role";
/// Only enabled users: a disabled user's credentials authenticate nothing, even if one was
/// left behind.
const USER_JOIN: &str = "JOIN users u ON u.id = x.user_id AND u.disabled_at IS NULL \
     JOIN tenants t ON t.id = u.tenant_id";
const TOKEN_COLUMNS: &str = "x.id, x.user_id, x.name, x.prefix, x.created_at, x.expires_at, \
     x.revoked_at, x.last_used_at";

type DbRow = <Db as sqlx::Database>::Row;

pub(super) fn user_from_row(row: &DbRow) -> Result<User, StoreError> {
    Ok(User {
        id: UserId::from_uuid(row.try_get("user_id")?),
        tenant_id: TenantId::from_uuid(row.try_get("tenant_id")?),
        tenant_name: row.try_get("tenant_name")?,
        email: row.try_get("email")?,
        role: parse_word("role", &row.try_get::<String, _>("user_role")?)?,
    })
}

fn optional_time(row: &DbRow, column: &str) -> Result<Option<time::OffsetDateTime>, StoreError> {
    row.try_get::<Option<i64>, _>(column)?
        .map(from_ms)
        .transpose()
}

fn token_from_row(row: &DbRow) -> Result<ApiTokenRecord, StoreError> {
    Ok(ApiTokenRecord {
        id: TokenId::from_uuid(row.try_get("id")?),
        user_id: UserId::from_uuid(row.try_get("user_id")?),
        name: row.try_get("name")?,
        prefix: row.try_get("prefix")?,
        created_at: from_ms(row.try_get("created_at")?)?,
        expires_at: optional_time(row, "expires_at")?,
        revoked_at: optional_time(row, "revoked_at")?,
        last_used_at: optional_time(row, "last_used_at")?,
    })
}

/// A new user and their password, in the caller's transaction: `Taken(Email)` if the address
/// has an account.
pub(super) async fn insert_user(
    tx: &mut Tx<'_>,
    user: &NewUser,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO users (id, tenant_id, email, display_name, role, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(user.id.as_uuid())
    .bind(user.tenant_id.as_uuid())
    .bind(&user.email)
    .bind(&user.display_name)
    .bind(user.role.as_str())
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(|e| match e.as_database_error() {
        Some(db) if db.is_unique_violation() => {
            StoreError::Taken(crate::Taken::Email(user.email.clone()))
        }
        _ => e.into(),
    })?;
    sqlx::query("INSERT INTO password_credentials (user_id, phc, updated_at) VALUES ($1, $2, $3)")
        .bind(user.id.as_uuid())
        .bind(&user.phc)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

fn hash_from(what: &'static str, bytes: Vec<u8>) -> Result<SecretHash, StoreError> {
    let len = bytes.len();
    bytes
        .try_into()
        .map_err(|_| StoreError::corrupt(what, format!("{len} bytes")))
}

static SESSION_BY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {USER_COLUMNS}, x.csrf_hash, x.client, x.expires_at FROM sessions x {USER_JOIN} \
         WHERE x.id_hash = $1 AND x.expires_at > $2"
    )
});
static TOKEN_BY_HASH: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {USER_COLUMNS}, {TOKEN_COLUMNS} FROM api_tokens x {USER_JOIN} \
         WHERE x.token_hash = $1 AND x.revoked_at IS NULL \
         AND (x.expires_at IS NULL OR x.expires_at > $2)"
    )
});
static TOKENS_OF_USER: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {TOKEN_COLUMNS} FROM api_tokens x WHERE x.user_id = $1 ORDER BY x.id")
});
static TOKEN_BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("SELECT {TOKEN_COLUMNS} FROM api_tokens x WHERE x.id = $1")
});
static LOGIN_BY_EMAIL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {USER_COLUMNS}, x.phc FROM password_credentials x {USER_JOIN} \
         WHERE u.email = $1"
    )
});
pub(super) static USER_BY_ID: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT {USER_COLUMNS} FROM users u JOIN tenants t ON t.id = u.tenant_id \
         WHERE u.id = $1 AND u.disabled_at IS NULL"
    )
});

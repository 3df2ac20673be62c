//! Test fixtures shared by the controller's unit tests: a throwaway store (einsora_testkit) with
//! one untrusted tenant and a user of it, who makes enrolment tokens.

use std::sync::Arc;

use einsora_core::ids::{EnrolmentTokenId, TenantId, UserId};
use einsora_core::region::Region;
use einsora_store::{NewEnrolmentToken, NewUser, QuotaClass, Store, secret_hash};
use einsora_testkit::db::TestDb;
use einsora_testkit::fixtures::tenant_as;
use time::OffsetDateTime;

pub struct Tenancy {
    pub store: Arc<dyn Store>,
    pub tenant: TenantId,
    pub user: UserId,
    _db: TestDb,
}

impl Tenancy {
    pub async fn new() -> Tenancy {
        let db = TestDb::sqlite().await;
        let store = Arc::clone(&db.store);
        let tenant = tenant_as(&*store, false, QuotaClass::Default, None).await;
        let user = UserId::new();
        let you = NewUser {
            role: einsora_core::role::Role::Owner,
            id: user,
            tenant_id: tenant,
            email: "you@acme.test".into(),
            display_name: "You".into(),
            phc: "$argon2id$unused".into(),
        };
        store.create_user(&you).await.unwrap();
        Tenancy {
            store,
            tenant,
            user,
            _db: db,
        }
    }

    /// An enrolment token with this secret, good for an hour, into region `local`.
    pub async fn token(&self, secret: &str) {
        let made = NewEnrolmentToken {
            id: EnrolmentTokenId::new(),
            tenant_id: self.tenant,
            name: "lab-box".into(),
            region: Region::new("local").unwrap(),
            prefix: "enr_Ab3x".into(),
            token_hash: secret_hash(secret),
            created_by: self.user,
            expires_at: OffsetDateTime::now_utc() + time::Duration::hours(1),
        };
        self.store.create_enrolment_token(&made).await.unwrap();
    }
}

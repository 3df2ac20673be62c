//! Users and roles over the services as the gateway calls them: what each role may do, what a
//! member sees of another member's workloads, invites and password resets end to end, and a
//! disabled user's credentials refused at once.

use einsora_core::role::Role;
use einsora_proto::accounts::v1 as users_pb;
use einsora_proto::accounts::v1::user_service_server::UserService;
use einsora_proto::activity::v1::activity_service_server::ActivityService;
use einsora_proto::convert::ProtoEnum;
use einsora_proto::enrolment::v1 as enrolment_pb;
use einsora_proto::enrolment::v1::enrolment_token_service_server::EnrolmentTokenService;
use einsora_proto::workloads::v1 as pb;
use einsora_proto::workloads::v1::workload_service_server::WorkloadService;
use tonic::Code;

use crate::{Env, Who, env, error_code, notebook};

fn is(status: &tonic::Status, code: Code) {
    assert_eq!(status.code(), code, "{status:?}");
}

fn invite(email: &str, role: Role) -> users_pb::CreateInviteRequest {
    users_pb::CreateInviteRequest {
        email: email.into(),
        role: role.to_field(),
        expires_at: None,
    }
}

fn update(who: &Who, role: Option<Role>, disabled: Option<bool>) -> users_pb::UpdateUserRequest {
    users_pb::UpdateUserRequest {
        id: who.user.to_string(),
        role: role.map_or(0, Role::to_field),
        disabled,
        team_id: None,
    }
}

async fn team(env: &Env) -> (Who, Who, Who, Who) {
    let owner = env.tenant("acme", None).await;
    let admin = env
        .user(owner.tenant, "admin@acme.example", Role::Admin)
        .await;
    let ann = env
        .user(owner.tenant, "ann@acme.example", Role::Member)
        .await;
    let bob = env
        .user(owner.tenant, "bob@acme.example", Role::Member)
        .await;
    (owner, admin, ann, bob)
}

/// A member launches and manages their own workloads, and sees no other member's: another
/// member's workload answers exactly as an unknown ID, on every workload route; owners and
/// admins see and manage everyone's.
#[tokio::test]
async fn a_member_sees_and_manages_only_their_own_workloads() {
    let env = env().await;
    let (owner, admin, ann, bob) = team(&env).await;
    let anns = env
        .create(&ann, notebook("anns", "cpu-1c-2g"))
        .await
        .unwrap();
    let bobs = env
        .create(&bob, notebook("bobs", "cpu-1c-2g"))
        .await
        .unwrap();
    let list = |who: &Who| {
        let req = who.req(pb::ListWorkloadsRequest::default());
        async {
            let listed = env.workloads.list_workloads(req).await.unwrap();
            let mut names: Vec<String> = listed
                .into_inner()
                .workloads
                .into_iter()
                .map(|w| w.name)
                .collect();
            names.sort();
            names
        }
    };
    assert_eq!(list(&ann).await, ["anns"]);
    assert_eq!(list(&bob).await, ["bobs"]);
    assert_eq!(list(&admin).await, ["anns", "bobs"]);
    assert_eq!(list(&owner).await, ["anns", "bobs"]);

    let get = |who: &Who, id: &str| {
        let req = who.req(pb::GetWorkloadRequest {
            id: id.into(),
            include_deleted: true,
        });
        env.workloads.get_workload(req)
    };
    let theirs = get(&ann, &bobs.id).await.unwrap_err();
    let unknown = get(&ann, &crate::unknown_id()).await.unwrap_err();
    is(&theirs, Code::NotFound);
    assert_eq!(theirs.message(), unknown.message());
    let stop = |who: &Who, id: &str| {
        env.workloads
            .stop_workload(who.req(pb::StopWorkloadRequest { id: id.into() }))
    };
    is(&stop(&ann, &bobs.id).await.unwrap_err(), Code::NotFound);
    let events = ann.req(pb::ListWorkloadEventsRequest {
        id: bobs.id.clone(),
    });
    is(
        &env.workloads
            .list_workload_events(events)
            .await
            .unwrap_err(),
        Code::NotFound,
    );
    assert!(get(&ann, &anns.id).await.is_ok());
    // An admin deletes a member's workload; its timeline names the admin.
    let req = admin.req(pb::DeleteWorkloadRequest {
        id: anns.id.clone(),
    });
    let deleted = env
        .workloads
        .delete_workload(req)
        .await
        .unwrap()
        .into_inner();
    assert!(
        deleted.state_reason.contains("admin@acme.example"),
        "{}",
        deleted.state_reason
    );
}

/// Owners and admins administer; members don't, and are told so. An admin manages members
/// only; nobody changes their own role or disables themselves.
#[tokio::test]
async fn roles_decide_who_administers_whom() {
    let env = env().await;
    let (owner, admin, ann, bob) = team(&env).await;
    let users = &env.users;

    // Members: no invites, no user changes, no enrolment tokens, no activity log.
    let refused = users
        .create_invite(ann.browser(invite("x@acme.example", Role::Member)))
        .await
        .unwrap_err();
    is(&refused, Code::PermissionDenied);
    assert!(
        refused.message().contains("owner or admin"),
        "{}",
        refused.message()
    );
    let refused = users
        .update_user(ann.browser(update(&bob, None, Some(true))))
        .await;
    is(&refused.unwrap_err(), Code::PermissionDenied);
    let enrol = enrolment_pb::CreateEnrolmentTokenRequest {
        name: "box".into(),
        ..Default::default()
    };
    let refused = env
        .enrolment
        .create_enrolment_token(ann.browser(enrol))
        .await;
    is(&refused.unwrap_err(), Code::PermissionDenied);
    let log = ann.req(einsora_proto::activity::v1::ListActivityRequest::default());
    is(
        &env.activity.list_activity(log).await.unwrap_err(),
        Code::PermissionDenied,
    );
    // Every user sees the tenant's users.
    let listed = users
        .list_users(ann.req(users_pb::ListUsersRequest {}))
        .await
        .unwrap();
    assert_eq!(listed.into_inner().users.len(), 4);

    // An admin: members yes, admins and owners no, not as a role to give either.
    let to_admin = users.update_user(admin.browser(update(&ann, Some(Role::Admin), None)));
    is(&to_admin.await.unwrap_err(), Code::PermissionDenied);
    let demote_owner = users.update_user(admin.browser(update(&owner, Some(Role::Member), None)));
    is(&demote_owner.await.unwrap_err(), Code::PermissionDenied);
    let invite_admin = users.create_invite(admin.browser(invite("y@acme.example", Role::Admin)));
    is(&invite_admin.await.unwrap_err(), Code::PermissionDenied);
    let disabled = users
        .update_user(admin.browser(update(&bob, None, Some(true))))
        .await
        .unwrap()
        .into_inner();
    assert!(disabled.disabled_at.is_some());
    // Nobody manages themselves; the owner makes an admin.
    let own = users.update_user(owner.browser(update(&owner, Some(Role::Member), None)));
    is(&own.await.unwrap_err(), Code::FailedPrecondition);
    let promoted = users
        .update_user(owner.browser(update(&ann, Some(Role::Admin), None)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(promoted.role, Role::Admin.to_field());
    // The owner moves themselves into a team (nothing else of their own).
    let ml = einsora_proto::accounts::v1::team_service_server::TeamService::create_team(
        &env.quotas,
        owner.browser(users_pb::CreateTeamRequest { name: "ml".into() }),
    )
    .await
    .unwrap()
    .into_inner();
    let mine = users_pb::UpdateUserRequest {
        team_id: Some(ml.id.clone()),
        ..update(&owner, None, None)
    };
    let moved = users
        .update_user(owner.browser(mine))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(moved.team_id, ml.id);
    // Another tenant's user is unknown.
    let other = env.tenant("globex", None).await;
    let foreign = users.update_user(other.browser(update(&ann, None, Some(true))));
    is(&foreign.await.unwrap_err(), Code::NotFound);
    // A member with a live workload isn't removed; the answer says why.
    let cat = env
        .user(owner.tenant, "cat@acme.example", Role::Member)
        .await;
    env.create(&cat, notebook("cats", "cpu-1c-2g"))
        .await
        .unwrap();
    let remove = users_pb::RemoveUserRequest {
        id: cat.user.to_string(),
    };
    let refused = users.remove_user(owner.browser(remove)).await.unwrap_err();
    assert_eq!(error_code(&refused), "still_owns", "{refused:?}");
}

/// An invite is made by a session (never a token), shown once, accepted once with a good
/// password, and makes a user who signs in; a reset sets a password once.
#[tokio::test]
async fn an_invite_makes_a_user_once_and_a_reset_sets_a_password_once() {
    let env = env().await;
    let (owner, _, ann, _) = team(&env).await;
    let users = &env.users;
    let by_token = users.create_invite(owner.req(invite("new@acme.example", Role::Member)));
    is(&by_token.await.unwrap_err(), Code::PermissionDenied);
    let made = users
        .create_invite(owner.browser(invite(" New@Acme.Example ", Role::Member)))
        .await
        .unwrap()
        .into_inner();
    let record = made.invite.unwrap();
    assert_eq!(record.email, "new@acme.example", "normalised");
    let accept = |secret: &str, password: &str| users_pb::AcceptInviteRequest {
        secret: secret.into(),
        display_name: "New".into(),
        password: password.into(),
    };
    let short = users.accept_invite(tonic::Request::new(accept(&made.secret, "short")));
    is(&short.await.unwrap_err(), Code::InvalidArgument);
    let joined = users
        .accept_invite(tonic::Request::new(accept(
            &made.secret,
            "a long enough password",
        )))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(joined.tenant_name, "acme");
    let user = joined.user.unwrap();
    assert_eq!(
        (user.email.as_str(), user.role),
        ("new@acme.example", Role::Member.to_field())
    );
    let again = users.accept_invite(tonic::Request::new(accept(
        &made.secret,
        "another long one!",
    )));
    let gone = again.await.unwrap_err();
    let garbage = users
        .accept_invite(tonic::Request::new(accept("nope", "another long one!")))
        .await
        .unwrap_err();
    is(&gone, Code::Unauthenticated);
    assert_eq!(
        gone.message(),
        garbage.message(),
        "used and unknown answer alike"
    );
    let login = env
        .store
        .password_login("new@acme.example")
        .await
        .unwrap()
        .unwrap();
    assert!(login.phc.starts_with("$argon2id$"));
    let listed = users
        .list_invites(owner.req(users_pb::ListInvitesRequest {}))
        .await;
    let listed = listed.unwrap().into_inner().invites;
    assert!(listed[0].used_at.is_some());

    let reset = users_pb::CreatePasswordResetRequest {
        id: ann.user.to_string(),
    };
    let made = users
        .create_password_reset(owner.browser(reset))
        .await
        .unwrap()
        .into_inner();
    let set = |secret: &str| users_pb::ResetPasswordRequest {
        secret: secret.into(),
        password: "a brand new password".into(),
    };
    let done = users
        .reset_password(tonic::Request::new(set(&made.secret)))
        .await;
    assert_eq!(done.unwrap().into_inner().email, "ann@acme.example");
    let twice = users
        .reset_password(tonic::Request::new(set(&made.secret)))
        .await;
    is(&twice.unwrap_err(), Code::Unauthenticated);
    // Ann's session ended with the reset.
    let req = ann.browser(pb::ListWorkloadsRequest::default());
    is(
        &env.workloads.list_workloads(req).await.unwrap_err(),
        Code::Unauthenticated,
    );
}

/// An invite is its tenant's: another tenant's admin neither lists nor revokes it (revoking
/// answers exactly as an unknown ID), and whoever redeems it joins the tenant that made it.
#[tokio::test]
async fn an_invite_belongs_to_the_tenant_that_made_it() {
    let env = env().await;
    let (owner, ..) = team(&env).await;
    let other = env.tenant("globex", None).await;
    let users = &env.users;
    let made = users
        .create_invite(owner.browser(invite("joiner@example.com", Role::Admin)))
        .await
        .unwrap()
        .into_inner();
    let id = made.invite.unwrap().id;
    let theirs = users
        .list_invites(other.req(users_pb::ListInvitesRequest {}))
        .await
        .unwrap()
        .into_inner()
        .invites;
    assert!(theirs.iter().all(|i| i.id != id), "{theirs:?}");
    let revoke = |id: String| users_pb::RevokeInviteRequest { id };
    let foreign = users
        .revoke_invite(other.browser(revoke(id.clone())))
        .await
        .unwrap_err();
    let unknown = users
        .revoke_invite(other.browser(revoke(einsora_core::ids::WorkloadId::new().to_string())))
        .await
        .unwrap_err();
    is(&foreign, Code::NotFound);
    assert_eq!(foreign.message(), unknown.message(), "as an unknown ID");

    let joined = users
        .accept_invite(tonic::Request::new(users_pb::AcceptInviteRequest {
            secret: made.secret,
            display_name: String::new(),
            password: "a long enough password".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(joined.tenant_name, "acme", "the invite's tenant, still");
    let listed = users
        .list_users(other.req(users_pb::ListUsersRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .users;
    assert!(
        listed.iter().all(|u| u.email != "joiner@example.com"),
        "{listed:?}"
    );
}

/// A disabled user's token and session are refused on their very next call.
#[tokio::test]
async fn a_disabled_users_credentials_are_refused_at_once() {
    let env = env().await;
    let (owner, _, ann, _) = team(&env).await;
    let list = |req| env.workloads.list_workloads(req);
    assert!(
        list(ann.req(pb::ListWorkloadsRequest::default()))
            .await
            .is_ok()
    );
    env.users
        .update_user(owner.browser(update(&ann, None, Some(true))))
        .await
        .unwrap();
    for req in [
        ann.req(pb::ListWorkloadsRequest::default()),
        ann.browser(pb::ListWorkloadsRequest::default()),
    ] {
        is(&list(req).await.unwrap_err(), Code::Unauthenticated);
    }
}

// Generated from docs/openapi.json by cli/tests/dashboard_types.rs: do not edit. To update,
// run EINSORA_UPDATE_DASHBOARD_TYPES=1 cargo test -p einsora --test dashboard_types

export interface ErrorEnvelope {
  error: {
    code: "invalid_request" | "unauthenticated" | "forbidden" | "not_found" | "method_not_allowed" | "conflict" | "quota_exceeded" | "invalid_transition" | "last_owner" | "still_owns" | "rate_limited" | "internal" | "unavailable";
    message: string;
    request_id: string;
  };
}

export interface AccessGrant {
  endpoint?: EndpointAccess;
  notebook?: NotebookLink;
  ssh?: VmSsh;
  workload_id: string;
}

export interface EndpointAccess {
  base_url: string;
}

export interface NotebookLink {
  expires_at?: string;
  link: string;
}

export interface VmSsh {
  expires_at?: string;
  ticket: string;
  url: string;
}

export interface AcceptInviteResponse {
  tenant_name: string;
  user?: User;
}

export interface ApiToken {
  created_at?: string;
  expires_at?: string;
  id: string;
  last_used_at?: string;
  name: string;
  prefix: string;
  revoked_at?: string;
}

export type ChangePasswordResponse = Record<string, unknown>;

export interface CreateInferenceKeyResponse {
  inference_key?: InferenceKey;
  key: string;
}

export interface CreateInviteResponse {
  invite?: Invite;
  secret: string;
}

export interface CreatePasswordResetResponse {
  reset?: Invite;
  secret: string;
}

export interface CreateTokenResponse {
  api_token?: ApiToken;
  token: string;
}

export interface Credential {
  description: string;
  kind?: "session" | "api_token";
  token_id: string;
  token_name: string;
  token_prefix: string;
}

export type DeleteTeamResponse = Record<string, unknown>;

export interface InferenceKey {
  all_endpoints: boolean;
  created_at?: string;
  endpoint_ids: string[];
  id: string;
  last_used_at?: string;
  limits?: InferenceLimits;
  name: string;
  owner_email: string;
  prefix: string;
  revoked_at?: string;
  tokens_left_today?: string;
  tokens_used_today: string;
  user_id: string;
}

export interface InferenceLimits {
  requests_per_minute?: number;
  tokens_per_day?: number;
  tokens_per_minute?: number;
}

export interface InferenceLimitsInput {
  requests_per_minute?: number;
  tokens_per_day?: number;
  tokens_per_minute?: number;
}

export interface Invite {
  created_at?: string;
  created_by: string;
  email: string;
  expires_at?: string;
  id: string;
  revoked_at?: string;
  role?: "owner" | "admin" | "member";
  used_at?: string;
  user_id: string;
}

export interface ListInferenceKeysResponse {
  keys: InferenceKey[];
}

export interface ListInvitesResponse {
  invites: Invite[];
}

export interface ListQuotasResponse {
  quotas: Quota[];
}

export interface ListTeamsResponse {
  teams: Team[];
}

export interface ListTokensResponse {
  tokens: ApiToken[];
}

export interface ListUsersResponse {
  users: User[];
}

export type LogoutResponse = Record<string, unknown>;

export interface Me {
  credential?: Credential;
  email: string;
  role?: "owner" | "admin" | "member";
  tenant_id: string;
  tenant_name: string;
  user_id: string;
}

export interface Quota {
  cpus?: number;
  gpu_class: string;
  held: string;
  held_cpus: string;
  held_memory_gib: string;
  limit?: number;
  memory_gib?: number;
  scope?: "tenant" | "team" | "user";
  subject: string;
  subject_id: string;
}

export type RemoveUserResponse = Record<string, unknown>;

export interface ResetPasswordResponse {
  email: string;
}

export interface Session {
  csrf_token: string;
  expires_at?: string;
  me?: Me;
}

export interface Team {
  created_at?: string;
  id: string;
  members: number;
  name: string;
}

export interface TenantInferenceLimits {
  limits?: InferenceLimits;
  tokens_left_today?: string;
  tokens_used_today: string;
}

export interface User {
  created_at?: string;
  disabled_at?: string;
  display_name: string;
  email: string;
  id: string;
  role?: "owner" | "admin" | "member";
  team_id: string;
}

export interface ActivityEntry {
  action: string;
  actor: string;
  at?: string;
  client_addr: string;
  id: string;
  object_id: string;
  object_kind: string;
  request_id: string;
  result: string;
  user_id: string;
}

export interface ListActivityResponse {
  entries: ActivityEntry[];
  next_page_token: string;
}

export interface Catalog {
  classes: ComputeClass[];
  drivers: Driver[];
  images: Image[];
  regions: Region[];
}

export interface ComputeClass {
  accelerator?: "nvidia" | "apple" | "amd" | "cpu";
  cpus: number;
  device_models: string[];
  devices: number;
  memory_gib: number;
  name: string;
  regions: string[];
  unified_memory_gib?: number;
}

export interface Driver {
  accelerators: Array<"nvidia" | "apple" | "amd" | "cpu">;
  development_only: boolean;
  isolation?: "weak" | "strong";
  kinds: Array<"vm" | "notebook" | "endpoint">;
  name: string;
  os: string;
  per_machine_limit?: number;
}

export interface DriverRef {
  accelerators: Array<"nvidia" | "apple" | "amd" | "cpu">;
  driver: string;
}

export interface Image {
  classes: string[];
  driver_refs: DriverRef[];
  kinds: Array<"vm" | "notebook" | "endpoint">;
  name: string;
  runtimes: Runtime[];
}

export interface Region {
  is_default: boolean;
  name: string;
}

export interface Runtime {
  accelerators: Array<"nvidia" | "apple" | "amd" | "cpu">;
  name: string;
}

export interface CpuCores {
  efficiency: number;
  performance: number;
}

export interface EndpointParams {
  model: string;
  park_after_idle_s?: number;
  served_name?: string;
  slots?: number;
}

export interface EndpointParamsInput {
  model: string;
  park_after_idle_s?: number;
  served_name?: string;
  slots?: number;
}

export interface GpuUse {
  memory_used_bytes: string;
  sampled_at?: string;
  utilization_percent: number;
}

export interface ModelFile {
  path: string;
  size_bytes: string;
}

export type NotebookParams = Record<string, unknown>;

export type NotebookParamsInput = Record<string, never>;

export interface VmHost {
  accel: string;
  limit: number;
}

export interface VmParams {
  disk_gib?: number;
  ssh_authorized_keys: string[];
}

export interface VmParamsInput {
  disk_gib?: number;
  ssh_authorized_keys?: string[];
}

export interface CreateEnrolmentTokenResponse {
  enrolment_token?: EnrolmentToken;
  token: string;
}

export interface EnrolmentToken {
  created_at?: string;
  expires_at?: string;
  id: string;
  machine_id: string;
  name: string;
  prefix: string;
  region: string;
  revoked_at?: string;
  used_at?: string;
}

export interface ListEnrolmentTokensResponse {
  enrolment_tokens: EnrolmentToken[];
}

export interface Device {
  gpu_use?: GpuUse;
  memory_bytes: string;
  model: string;
  uuid: string;
  vendor?: "nvidia" | "apple" | "amd" | "cpu";
  workload_ids: string[];
}

export interface ListMachinesResponse {
  machines: Machine[];
}

export interface Machine {
  arch: string;
  cores?: CpuCores;
  cpus: number;
  created_at?: string;
  devices: Device[];
  drivers: string[];
  flag?: MachineFlag;
  gpu_note: string;
  id: string;
  last_seen_at?: string;
  memory_bytes: string;
  models: ModelFile[];
  name: string;
  os: string;
  owner_user_id: string;
  region: string;
  revoked_at?: string;
  sharing?: "private" | "invite-only" | "community";
  status?: "online" | "offline" | "revoked";
  trusted_user_ids: string[];
  vm?: VmHost;
  workload_count: number;
}

export interface MachineFlag {
  last?: string;
  reason: string;
  since?: string;
}

export interface RoleStatus {
  detail: string;
  healthy: boolean;
  name: string;
}

export interface Status {
  machines_offline: number;
  machines_online: number;
  roles: RoleStatus[];
  workloads: Record<string, number>;
}

export interface GetUsageReportResponse {
  by: string;
  from?: string;
  rows: UsageReportRow[];
  to?: string;
}

export interface ListUsageResponse {
  next_page_token: string;
  records: UsageRecord[];
  tokens: TokenUsage[];
}

export interface TokenUsage {
  completion_tokens: string;
  endpoint_id: string;
  hour_start?: string;
  key_id: string;
  prompt_tokens: string;
  requests: string;
  tenant_id: string;
  user_id: string;
}

export interface UsageRecord {
  hour_start?: string;
  machine_id: string;
  placed_class: string;
  region: string;
  seconds: number;
  tenant_id: string;
  units: number;
  workload_id: string;
}

export interface UsageReportRow {
  group_id: string;
  label: string;
  placed_class: string;
  seconds: string;
  unit_hours: string;
  unit_seconds: string;
  workloads: number;
}

export interface ListWorkloadEventsResponse {
  events: WorkloadEvent[];
}

export interface ListWorkloadLogsResponse {
  dropped: string;
  lines: LogLine[];
  next_after: string;
}

export interface ListWorkloadsResponse {
  next_page_token: string;
  workloads: Workload[];
}

export interface LogLine {
  attempt: number;
  dropped_before: string;
  gap_before: boolean;
  number: string;
  printed_at?: string;
  stream: string;
  text: string;
}

export interface Workload {
  attempt: number;
  created_at?: string;
  device_uuids: string[];
  driver: string;
  endpoint?: EndpointParams;
  fallback: string[];
  fallback_after_s?: number;
  gpu_class: string;
  gpu_use?: GpuUse;
  id: string;
  image: string;
  kind?: "vm" | "notebook" | "endpoint";
  machine_id: string;
  name: string;
  notebook?: NotebookParams;
  placed_class: string;
  region: string;
  state?: "pending" | "queued" | "provisioning" | "running" | "stopping" | "stopped" | "failed" | "deleting" | "deleted";
  state_reason: string;
  tenant_id: string;
  updated_at?: string;
  version: string;
  vm?: VmParams;
}

export interface WorkloadEvent {
  at?: string;
  attempt: number;
  from_state?: "pending" | "queued" | "provisioning" | "running" | "stopping" | "stopped" | "failed" | "deleting" | "deleted";
  note: boolean;
  reason: string;
  to_state?: "pending" | "queued" | "provisioning" | "running" | "stopping" | "stopped" | "failed" | "deleting" | "deleted";
}

export interface WorkloadExport {
  events: WorkloadEvent[];
  exported_at?: string;
  machine_name: string;
  output_dropped: string;
  output_logs: LogLine[];
  usage: UsageRecord[];
  workload?: Workload;
}

/** What each route answers to GET. */
export interface Get {
  '/v1/activity': ListActivityResponse;
  '/v1/catalog': Catalog;
  '/v1/enrolment-tokens': ListEnrolmentTokensResponse;
  '/v1/inference-keys': ListInferenceKeysResponse;
  '/v1/inference-limits': TenantInferenceLimits;
  '/v1/invites': ListInvitesResponse;
  '/v1/machines': ListMachinesResponse;
  '/v1/machines/{id}': Machine;
  '/v1/me': Me;
  '/v1/openapi.json': Record<string, unknown>;
  '/v1/quotas': ListQuotasResponse;
  '/v1/status': Status;
  '/v1/teams': ListTeamsResponse;
  '/v1/tokens': ListTokensResponse;
  '/v1/usage': ListUsageResponse;
  '/v1/usage/report': GetUsageReportResponse;
  '/v1/users': ListUsersResponse;
  '/v1/workloads': ListWorkloadsResponse;
  '/v1/workloads/{id}': Workload;
  '/v1/workloads/{id}/events': ListWorkloadEventsResponse;
  '/v1/workloads/{id}/export': WorkloadExport;
  '/v1/workloads/{id}/logs': ListWorkloadLogsResponse;
}

/** What each route answers to POST: the body it takes, and its answer. */
export interface Post {
  '/v1/enrolment-tokens': {
    body: {
      expires_at?: string;
      name: string;
      region?: string;
    };
    answer: CreateEnrolmentTokenResponse;
  };
  '/v1/inference-keys': {
    body: {
      all_endpoints?: boolean;
      endpoint_ids?: string[];
      limits?: InferenceLimitsInput;
      name: string;
    };
    answer: CreateInferenceKeyResponse;
  };
  '/v1/invites': {
    body: {
      email: string;
      expires_at?: string;
      role?: "owner" | "admin" | "member";
    };
    answer: CreateInviteResponse;
  };
  '/v1/invites/accept': {
    body: {
      display_name?: string;
      password: string;
      secret: string;
    };
    answer: AcceptInviteResponse;
  };
  '/v1/machines/{id}/revoke': {
    body: Record<string, never>;
    answer: Machine;
  };
  '/v1/me/password': {
    body: {
      current_password: string;
      new_password: string;
    };
    answer: ChangePasswordResponse;
  };
  '/v1/password-resets/accept': {
    body: {
      password: string;
      secret: string;
    };
    answer: ResetPasswordResponse;
  };
  '/v1/sessions': {
    body: {
      client?: "browser" | "cli";
      email: string;
      password: string;
    };
    answer: Session;
  };
  '/v1/teams': {
    body: {
      name: string;
    };
    answer: Team;
  };
  '/v1/tokens': {
    body: {
      expires_at?: string;
      name: string;
    };
    answer: CreateTokenResponse;
  };
  '/v1/users/{id}/password-reset': {
    body: Record<string, never>;
    answer: CreatePasswordResetResponse;
  };
  '/v1/workloads': {
    body: {
      endpoint?: EndpointParamsInput;
      fallback?: string[];
      fallback_after_s?: number;
      gpu_class: string;
      image: string;
      kind: "vm" | "notebook" | "endpoint";
      name: string;
      notebook?: NotebookParamsInput;
      region?: string;
      vm?: VmParamsInput;
    };
    answer: Workload;
  };
  '/v1/workloads/{id}/access': {
    body: Record<string, never>;
    answer: AccessGrant;
  };
  '/v1/workloads/{id}/start': {
    body: Record<string, never>;
    answer: Workload;
  };
  '/v1/workloads/{id}/stop': {
    body: Record<string, never>;
    answer: Workload;
  };
}

/** What each route answers to PATCH: the body it takes, and its answer. */
export interface Patch {
  '/v1/users/{id}': {
    body: {
      disabled?: boolean;
      role?: "owner" | "admin" | "member";
      team_id?: string;
    };
    answer: User;
  };
}

/** What each route answers to PUT: the body it takes, and its answer. */
export interface Put {
  '/v1/inference-limits': {
    body: {
      limits?: InferenceLimitsInput;
    };
    answer: TenantInferenceLimits;
  };
  '/v1/machines/{id}/trusted-users': {
    body: {
      user_ids?: string[];
    };
    answer: Machine;
  };
  '/v1/quotas': {
    body: {
      cpus?: number;
      gpu_class: string;
      limit?: number;
      memory_gib?: number;
      scope: "tenant" | "team" | "user";
      subject_id?: string;
    };
    answer: ListQuotasResponse;
  };
}

/** What each route answers to DELETE. */
export interface Delete {
  '/v1/enrolment-tokens/{id}': EnrolmentToken;
  '/v1/inference-keys/{id}': InferenceKey;
  '/v1/invites/{id}': Invite;
  '/v1/sessions/current': LogoutResponse;
  '/v1/teams/{id}': DeleteTeamResponse;
  '/v1/tokens/{id}': ApiToken;
  '/v1/users/{id}': RemoveUserResponse;
  '/v1/workloads/{id}': Workload;
}

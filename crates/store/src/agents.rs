//! What the agents' Sync stream asks of the store: who a certificate belongs to, what a machine
//! should run, and that it was seen.

use async_trait::async_trait;
use einsora_core::ids::{MachineId, WorkloadId};
use einsora_core::workload::Workload;
use time::OffsetDateTime;

use crate::{MachineCertificate, MachineRecord, MachineRegistration, StoreError};

/// Why and since when a machine is flagged (`AgentStore::flag_machine`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineFlag {
    /// The latest reason, a word of the controller's vocabulary.
    pub what: String,
    pub since: OffsetDateTime,
    pub last: OffsetDateTime,
}

#[async_trait]
pub trait AgentStore: Send + Sync {
    /// The machine whose certificate has this SHA-256, if that certificate was issued to it and
    /// is unexpired, and neither the certificate nor the machine is revoked.
    async fn machine_for_certificate(
        &self,
        machine: MachineId,
        fingerprint: &[u8; 32],
    ) -> Result<Option<MachineRecord>, StoreError>;

    /// Of these certificates' SHA-256s, those still good: issued, unexpired, and neither the
    /// certificate nor its machine revoked. One query per 500, however many streams ask (the
    /// controller's revocation sweep).
    async fn trusted_certificates(
        &self,
        fingerprints: &[[u8; 32]],
    ) -> Result<std::collections::HashSet<[u8; 32]>, StoreError>;

    /// The region's unrevoked machines, oldest first: what agent placement chooses from.
    async fn machines_in(
        &self,
        region: &einsora_core::region::Region,
    ) -> Result<Vec<MachineRecord>, StoreError>;

    /// The workloads placed on a machine that still exist, and those deleted while it was away
    /// that it hasn't removed yet ([`AgentStore::pend_removal`]): what its desired state is
    /// computed from, every time it is sent.
    async fn workloads_on(&self, machine: MachineId) -> Result<Vec<Workload>, StoreError>;

    /// Whether the machine is revoked (or unknown): it will never sync again.
    async fn machine_gone(&self, machine: MachineId) -> Result<bool, StoreError>;

    /// Remembers that `machine` must still remove `workload`, deleted while the machine was
    /// away (again: no change). Written before the workload moves to deleted.
    async fn pend_removal(
        &self,
        workload: WorkloadId,
        machine: MachineId,
    ) -> Result<(), StoreError>;

    /// The machine removed the workload: it is no longer in its desired state.
    async fn confirm_removal(
        &self,
        workload: WorkloadId,
        machine: MachineId,
    ) -> Result<(), StoreError>;

    /// Records what the machine's agent measured (label, OS, CPUs, memory, devices, drivers) on
    /// an unrevoked machine, leaving its identity, owner, region and sharing alone. Whether it
    /// was recorded.
    async fn record_inventory(&self, reg: &MachineRegistration) -> Result<bool, StoreError>;

    /// Records a certificate issued to an unrevoked machine (a renewal); whether it was.
    async fn add_machine_certificate(
        &self,
        machine: MachineId,
        certificate: &MachineCertificate,
    ) -> Result<bool, StoreError>;

    /// Retires (revokes) the machine's certificates issued no later than the one with this
    /// fingerprint, that one excepted: called once a stream presents it, so a renewed
    /// machine's previous certificate stops being accepted as soon as the new one is in use
    /// (one issued later, not used yet, stays). How many were retired.
    async fn retire_older_certificates(
        &self,
        machine: MachineId,
        fingerprint: &[u8; 32],
    ) -> Result<u64, StoreError>;

    /// Flags the machine for misbehaving on its stream, `what` being a word of the
    /// controller's vocabulary (never text an agent sent): the first time is kept, the latest
    /// word and time recorded.
    async fn flag_machine(
        &self,
        machine: MachineId,
        what: &str,
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;

    /// The machine's flag, if it was ever flagged.
    async fn machine_flag(&self, machine: MachineId) -> Result<Option<MachineFlag>, StoreError>;

    /// Records that the machine's agent was heard from (for its status; nothing else changes).
    async fn machine_seen(&self, machine: MachineId, at: OffsetDateTime) -> Result<(), StoreError>;

    /// Records how busy the machine's GPUs are (validated against its inventory), replacing
    /// the sample before.
    async fn record_gpu_usage(
        &self,
        machine: MachineId,
        gpus: &[einsora_core::machine::GpuSample],
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;
}

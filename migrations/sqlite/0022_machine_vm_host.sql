-- How a machine runs VMs, as its agent last said (SQLite flavour of
-- migrations/postgres/0022_machine_vm_host.sql): `kvm` or `tcg` (a word of einsora_core's
-- VmAccel), and at most how many at once its owner allows (EINSORA_VM_LIMIT). Both NULL on a
-- machine without a driver that runs VMs; vm_limit NULL where no limit was set.

ALTER TABLE machines ADD COLUMN vm_accel TEXT;
ALTER TABLE machines ADD COLUMN vm_limit INTEGER;

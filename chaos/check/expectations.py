"""Version-scoped expectations: what Ray does, release by release, and how we know.

Every claim whose expected outcome differs between Ray releases reads it here, never from an
inline version comparison in an experiment. One :class:`Expectation` per behaviour: the first
release that has it (``since``), what the experiments assert from then on (``then``), what the
releases before it do (``before``), and the evidence — which file of which release was read.

The boundaries were bisected over the cp311 releases in ``fixtures/ray-releases.txt`` by
reading each release's wheel (:data:`READ`): the Python sources where the behaviour lives in
Python, the strings of the shipped binaries (``_raylet.so``, ``gcs_server``, ``raylet``) where
it lives in C++. A release outside what was read is not guessed: asking about a release older
than the oldest one read, or one between the last release read without the behaviour and the
first read with it, raises :class:`NotChecked` (a harness error, *broken*, never *failed*).
Releases newer than the newest one read are held to ``then``: that is what an upgrade check
is for, and the run's environment says so (:func:`beyond_read`).

A behaviour difference is an expectation (:func:`expected`), not a skip. Only a feature that
does not exist in a release (:func:`applies` is False, e.g. the RocksDB GCS backend before its
first release) lets an experiment skip, with :func:`absent_reason` as the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from chaos.errors import ChaosError
from chaos.spec.releases import release_key, shipped

#: The releases whose wheels were read for every expectation below (cp311, manylinux2014).
READ: tuple[str, ...] = (
    "2.50.1",
    "2.51.0",
    "2.52.0",
    "2.53.0",
    "2.54.0",
    "2.55.1",
    "2.56.0",
    "2.56.1",
    "2.57.0",
    "2.59.0",
    "2.60.0",
)

#: The releases whose ``_raylet.so`` knob names were read for the reconnect-timeout expectations
#: (2.51.0 renamed the raylet and core-worker reconnect knobs).
RECONNECT_READ: tuple[str, ...] = (
    "2.50.1",
    "2.51.0",
    "2.51.1",
    "2.51.2",
    "2.52.0",
    "2.53.0",
    "2.54.0",
    "2.55.1",
    "2.59.0",
    "2.60.0",
)

#: The ``reason`` names of ``ObjectReconstructionFailedError`` the experiments provoke.
RETRIES_DISABLED = "OBJECT_UNRECONSTRUCTABLE_RETRIES_DISABLED"
MAX_ATTEMPTS_EXCEEDED = "OBJECT_UNRECONSTRUCTABLE_MAX_ATTEMPTS_EXCEEDED"
LINEAGE_EVICTED = "OBJECT_UNRECONSTRUCTABLE_LINEAGE_EVICTED"

#: ``raylet_rpc_server_reconnect_timeout_s``'s default where it exists (before 2.51.0: see
#: ``raylet_unavailable_backoff``): 2.50.1's owner logged "has been unavailable for more than
#: 60 seconds" with the knob unset.
RAYLET_RECONNECT_TIMEOUT_S = 60
#: ``core_worker_rpc_server_reconnect_timeout_s``'s default where it exists (before 2.51.0:
#: ``core_worker_unavailable_backoff``): 2.50.1's raylets logged "Core worker <ip> has been
#: unavailable for more than 60 seconds" with the knob unset.
CORE_WORKER_RECONNECT_TIMEOUT_S = 60


class NotChecked(ChaosError):
    """No evidence was read for this release: raychaos does not guess Ray's behaviour."""


@dataclass(frozen=True)
class Expectation:
    """One behaviour that depends on the Ray release."""

    name: str
    #: The first release where ``then`` holds.
    since: str
    #: What the experiments assert from ``since`` on (a class name, a message template, or a
    #: feature's description).
    then: str
    #: What the releases read before ``since`` do; "" when every release read has ``then``
    #: (``since`` is then the oldest release read, and older ones are not checked).
    before: str
    #: What was read, in which file of which release, to pin ``since``.
    evidence: str
    #: The releases whose sources were read for it, oldest first.
    read: tuple[str, ...] = field(default=READ)

    @property
    def floor(self) -> str:
        """The oldest release read: nothing older is established."""
        return min(self.read, key=release_key)

    @property
    def last_before(self) -> str | None:
        """The newest release read that does not have ``then`` (None: every one read has it)."""
        older = [v for v in self.read if release_key(v) < release_key(self.since)]
        return max(older, key=release_key) if older else None

    @property
    def pinned(self) -> bool:
        """``since`` is the first release: the release before it (or nothing) was read."""
        if self.last_before is None:
            return False  # ``since`` is merely the oldest release read
        known = shipped()
        earlier = [v for v in known if release_key(v) < release_key(self.since)]
        return bool(earlier) and max(earlier, key=release_key) == self.last_before

    def holds(self, version: str) -> bool:
        """``then`` holds on ``version`` (True) or ``before`` does (False).

        Raises :class:`NotChecked` for a release the evidence does not cover.
        """
        if release_key(version) >= release_key(self.since):
            return True
        last = self.last_before
        if release_key(version) < release_key(self.floor) or last is None:
            raise NotChecked(
                f"{self.name}: Ray {version} is older than every release read ({self.floor})",
                hint=f"read {self.name}'s evidence in that release and extend "
                "chaos/check/expectations.py (evidence: " + self.evidence + ")",
            )
        if release_key(version) > release_key(last):
            raise NotChecked(
                f"{self.name}: Ray {version} falls between {last} (read: before) and "
                f"{self.since} (read: then), and was not read",
                hint="read that release and pin the boundary in chaos/check/expectations.py",
            )
        return False

    def value(self, version: str) -> str:
        """``then`` or ``before``, whichever ``version`` shows."""
        return self.then if self.holds(version) else self.before


EXPECTATIONS: tuple[Expectation, ...] = (
    Expectation(
        name="actor_died_error",
        since="2.50.1",
        then="ActorDiedError",
        before="",
        evidence=(
            "python/ray/_private/serialization.py _deserialize_actor_died_error returns "
            "ActorDiedError (a RayActorError) for ErrorType ACTOR_DIED in every release read, "
            "2.50.1 to 2.60.0; python/ray/exceptions.py defines it in all of them. First "
            "release not pinned: before 2.50.1 not checked"
        ),
    ),
    Expectation(
        name="lost_object_reason",
        since="2.54.0",
        then="ObjectReconstructionFailedError carries .reason (an ErrorType)",
        before="no .reason attribute: the class name alone tells the cause",
        evidence=(
            "python/ray/exceptions.py: ObjectReconstructionFailedError.__init__(…, reason, "
            "reason_message) and REASON_MESSAGES first in 2.54.0; 2.53.0 has the "
            "reason-less ObjectReconstructionFailed{,MaxAttemptsExceeded,LineageEvicted}Error"
        ),
    ),
    Expectation(
        name="lost_retries_disabled_error",
        since="2.54.0",
        then="ObjectReconstructionFailedError",
        before="ObjectLostError",
        evidence=(
            "ray/core/generated/common_pb2.py: ErrorType OBJECT_UNRECONSTRUCTABLE_"
            "RETRIES_DISABLED first in 2.54.0 (absent in 2.53.0), raised as "
            "ObjectReconstructionFailedError by python/ray/_private/serialization.py (any "
            "OBJECT_UNRECONSTRUCTABLE_*). Before: a task with max_retries=0 owns a "
            "non-reconstructable output (src/ray/core_worker/task_manager.cc "
            "is_reconstructable = max_retries != 0) and object_recovery_manager.cc fails it "
            "with OBJECT_LOST, deserialised as plain ObjectLostError (2.50.1 serialization.py; "
            "the C++ read on GitHub is not tied to a release tag)"
        ),
    ),
    Expectation(
        name="lost_max_attempts_exceeded_error",
        since="2.54.0",
        then="ObjectReconstructionFailedError",
        before="ObjectReconstructionFailedMaxAttemptsExceededError",
        evidence=(
            "python/ray/_private/serialization.py: 2.53.0 maps ErrorType "
            "OBJECT_UNRECONSTRUCTABLE_MAX_ATTEMPTS_EXCEEDED to "
            "ObjectReconstructionFailedMaxAttemptsExceededError (python/ray/exceptions.py, "
            "an ObjectLostError without .reason); 2.54.0 removes that class and raises "
            "ObjectReconstructionFailedError(reason=…) for every OBJECT_UNRECONSTRUCTABLE_*"
        ),
    ),
    Expectation(
        name="lost_lineage_evicted_error",
        since="2.54.0",
        then="ObjectReconstructionFailedError",
        before="ObjectReconstructionFailedLineageEvictedError",
        evidence=(
            "python/ray/_private/serialization.py: 2.53.0 maps ErrorType "
            "OBJECT_UNRECONSTRUCTABLE_LINEAGE_EVICTED to "
            "ObjectReconstructionFailedLineageEvictedError (python/ray/exceptions.py, an "
            "ObjectLostError without .reason); 2.54.0 removes that class and raises "
            "ObjectReconstructionFailedError(reason=…) for every OBJECT_UNRECONSTRUCTABLE_*"
        ),
    ),
    Expectation(
        name="owner_died_location",
        since="2.56.0",
        then="owner node ID: {node_id}",
        before="at IP address {ip}",
        evidence=(
            "python/ray/exceptions.py OwnerDiedError.__str__: 'Owner worker ID: …, owner node "
            "ID: …, owner address: …' first in 2.56.0; 2.55.1 names only the owner worker's "
            "log files 'at IP address <owner ip>' (also present from 2.56.0 on)"
        ),
    ),
    Expectation(
        name="node_died_message",
        since="2.52.0",
        then="Node IP: {ip}",
        before="The node IP: {ip}",
        evidence=(
            "NodeDiedError text (ErrorType NODE_DIED, built by the core worker's task "
            "submitter, compiled into ray/_raylet.so): 2.52.0 has the format 'Task failed "
            "because the node it was running on is dead or unavailable. Node IP: %s, node ID: "
            "%s. …'; 2.50.1 and 2.51.0 have 'Task failed due to the node (where this task was "
            "running) was dead or unavailable.\\n\\nThe node IP: <ip>, node ID: <id>'. Both "
            "name the node id. 2.51.1 and 2.51.2 not read: first release within 2.51.1–2.52.0"
        ),
    ),
    Expectation(
        name="ray_nodes_death_record",
        since="2.50.1",
        then="ray.nodes() rows carry DeathReason (NodeDeathInfo.Reason) and DeathReasonMessage",
        before="",
        evidence=(
            "ray/_raylet.so of every release read (2.50.1 to 2.60.0) holds the Cython keys "
            "DeathReason and DeathReasonMessage of ray.nodes()' node table "
            "(python/ray/_private/state.py node_table → GlobalStateAccessor.get_node_table); "
            "the messages asserted are in gcs_server ('health check failed due to missing too "
            "many heartbeats') and raylet ('received SIGTERM') of each. First release not "
            "pinned: before 2.50.1 not checked"
        ),
    ),
    Expectation(
        name="raylet_unavailable_backoff",
        since="2.51.0",
        then=(
            "raylet_rpc_server_reconnect_timeout_base_s (1 s) doubling to _max_s (60 s): a "
            "call to an unreachable raylet is re-checked against the GCS within seconds"
        ),
        before=(
            "raylet_rpc_server_reconnect_timeout_s: the caller asks the GCS whether an "
            "unreachable raylet's node is dead only after that one wait (default 60 s)"
        ),
        evidence=(
            "ray/_raylet.so knob names: 2.50.1 has raylet_rpc_server_reconnect_timeout_s; "
            "2.51.0, 2.51.1, 2.51.2, 2.52.0, 2.53.0, 2.54.0, 2.55.1, 2.59.0 and 2.60.0 have "
            "raylet_rpc_server_reconnect_timeout_base_s/_max_s instead. The raylet client is a "
            "RetryableGrpcClient whose unavailable-timeout callback (raylet_client_pool.cc "
            "GetDefaultUnavailableTimeoutCallback) asks the GCS and disconnects a dead node's "
            "client, failing its pending RequestWorkerLease. Measured on 2.50.1 (TASK-05): the "
            "retry's lease went to the killed node's raylet; the owner logged 'Raylet <ip> has "
            "been unavailable for more than 60 seconds' 60.0 s after 'Will resubmit task', "
            "then 'Disconnecting raylet client because its node is dead' (retry done 60.9 s and "
            "60.8 s after the kill); with RAY_raylet_rpc_server_reconnect_timeout_s=15 it was "
            "done after 15.7 s (node DEAD at 6.0 s). Ray's own "
            "reconstruction tests set raylet_rpc_server_reconnect_timeout_s=0 'for reducing "
            "the retry time of RequestWorkerLease'"
        ),
        read=RECONNECT_READ,
    ),
    Expectation(
        name="core_worker_unavailable_backoff",
        since="2.51.0",
        then=(
            "core_worker_rpc_server_reconnect_timeout_base_s (1 s) doubling to _max_s (60 s): "
            "a raylet re-checks an unreachable owner within seconds"
        ),
        before=(
            "core_worker_rpc_server_reconnect_timeout_s: a raylet treats an unreachable owner "
            "as dead only after that one wait (default 60 s)"
        ),
        evidence=(
            "ray/_raylet.so knob names: 2.50.1 has core_worker_rpc_server_reconnect_timeout_s; "
            "2.51.0, 2.51.1, 2.51.2, 2.52.0, 2.53.0, 2.54.0, 2.55.1, 2.59.0 and 2.60.0 have "
            "core_worker_rpc_server_reconnect_timeout_base_s/_max_s instead. A raylet fetching "
            "a task's argument subscribes to the object's owner through its core-worker client "
            "pool (a RetryableGrpcClient). Measured on 2.50.1 (OBJ-05): the owner SIGKILLed, a "
            "dependent task on another node was still waiting 60 s later (GetTimeoutError); "
            "that node's raylet logged 'Core worker <ip> has been unavailable for more than 60 "
            "seconds', then 'Disconnecting core worker client because the worker is dead' and "
            "'Owner of object died' (the task failed 60.4 s after the kill); the driver's read "
            "after it waited another 60 s on its own node's raylet (120.4 s)"
        ),
        read=RECONNECT_READ,
    ),
    Expectation(
        name="owner_death_cause",
        since="2.51.0",
        then="OWNER_DIED",
        before="REF_DELETED",
        evidence=(
            "The GCS learns a non-detached actor's owner died two ways: the raylet's "
            "worker-exit report (GcsActorManager::OnWorkerDead: OWNER_DIED) and the failure of "
            "its WaitForActorRefDeleted long-poll to the owner (PollOwnerForActorRefDeleted: "
            "'Worker <id> failed, destroying actor child', GenActorRefDeletedCause). 2.50.1's "
            "gcs_server makes that poll a plain RPC, so its failure wins: the child died "
            "REF_DELETED in 10 of 10 owner SIGKILLs (gcs_server.out: the poll's failure 3 ms "
            "before 'Reporting worker exit'). From 2.51.0 (ray-project/ray#57116, 'Make "
            "WaitForActorRefDeleted RPC fault tolerant') the poll goes through a "
            "RetryableGrpcClient (ray/core/src/ray/gcs/gcs_server of 2.51.0, 2.52.0, 2.53.0, "
            "2.54.0, 2.55.1 and 2.60.0 holds its RetryableGrpcClient instantiations for "
            "WaitForActorRefDeleted; 2.50.1's none) and a retryable failure no longer "
            "destroys the child: OWNER_DIED in 6 of 6 on 2.60.0. Either way the child dies "
            "with its owner and is not restarted"
        ),
        read=("2.50.1", "2.51.0", "2.52.0", "2.53.0", "2.54.0", "2.55.1", "2.60.0"),
    ),
    Expectation(
        name="rocksdb_gcs",
        since="2.57.0",
        then="the GCS storage backend RAY_gcs_storage=rocksdb (RAY_gcs_storage_path)",
        before="no RocksDB backend: the GCS exits with 'Unsupported GCS storage type'",
        evidence=(
            "ray/core/src/ray/gcs/gcs_server links RocksDbStoreClient ('Failed to open RocksDB "
            "at', StorageType::ROCKSDB_PERSIST) first in 2.57.0, and python/ray/_private/"
            "node.py gains _is_rocksdb_gcs there; the 2.56.1 gcs_server knows only "
            "IN_MEMORY/REDIS_PERSIST and aborts on 'Unsupported GCS storage type: ' (so the "
            "head's raylet dies at boot)"
        ),
    ),
)

_BY_NAME: dict[str, Expectation] = {e.name: e for e in EXPECTATIONS}

#: ``ObjectReconstructionFailedError.reason`` → the expectation naming the class raised for it.
_LOST_BY_REASON: dict[str, str] = {
    RETRIES_DISABLED: "lost_retries_disabled_error",
    MAX_ATTEMPTS_EXCEEDED: "lost_max_attempts_exceeded_error",
    LINEAGE_EVICTED: "lost_lineage_evicted_error",
}


def expectation(name: str) -> Expectation:
    """The expectation called ``name`` (KeyError naming the known ones otherwise)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no expectation {name!r}; known: {', '.join(_BY_NAME)}") from None


def expected(name: str, version: str) -> str:
    """What ``name`` is on Ray ``version``: its ``then`` from ``since`` on, else ``before``."""
    return expectation(name).value(version)


def applies(name: str, version: str) -> bool:
    """``name``'s ``then`` holds on Ray ``version`` (the feature exists, the field is there)."""
    return expectation(name).holds(version)


def beyond_read(version: str) -> str | None:
    """What a result on Ray ``version`` should say when that release is newer than every
    release the expectations were read against (they then hold it to ``then``, the newest
    scope), else None. A local build (2.60.0+mycorp.1) counts as the release it patches."""
    newest = max((v for e in EXPECTATIONS for v in e.read), key=release_key)
    try:
        if release_key(Version(version).public) <= release_key(newest):
            return None
    except InvalidVersion:  # not a release raychaos ran (another plugin's parameter)
        return None
    return (
        f"Ray {version} is newer than every release the version expectations were read "
        f"against (newest read: {newest}): the newest scope is used"
    )


def absent_reason(name: str) -> str:
    """The skip reason for a release without ``name``: where it starts and how we know."""
    e = expectation(name)
    return f"{e.name} applies from Ray {e.since} ({e.evidence})"


def lost_object_error(reason: str, version: str) -> str:
    """The class a read of an object that cannot be reconstructed for ``reason`` raises."""
    try:
        name = _LOST_BY_REASON[reason]
    except KeyError:
        known = ", ".join(_LOST_BY_REASON)
        raise KeyError(f"no expectation for reason {reason!r}; known: {known}") from None
    return expected(name, version)

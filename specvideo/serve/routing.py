"""Prefix routing for the engine replicas: a Ray Serve ``RequestRouter`` that sends requests whose
prompts start alike to the same replica, so that replica's prompt cache keeps paying.

The entry passes each request's key (``forwarding.prefix_key``: a hash of the text leading its
prompt) as the first argument. Replicas are ranked by rendezvous hashing (highest of hash(key,
replica)), so a replica that dies or joins moves only its own share of the keys. Load breaks the
tie: when the preferred replica's known queue exceeds the least loaded one's by ``imbalance`` or
more, the least loaded replica takes the request (its prompt starts cold there). A replica that
refuses (its ``max_ongoing_requests`` reached) hands the request to the next rank. Requests without
a key go to the less loaded of all replicas. Importing this module needs Ray Serve.
"""

from __future__ import annotations

import hashlib

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica


def rendezvous(key: str, replica_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}|{replica_id}".encode(), digest_size=8).digest(), "big")


def rank(key: str, replica_ids: list[str]) -> list[str]:
    """Replica ids from the key's preferred replica down (the same order on every router)."""
    return sorted(replica_ids, key=lambda r: rendezvous(key, r), reverse=True)


class PrefixRouter(RequestRouter):
    def initialize_state(self, imbalance: int = 4) -> None:
        """imbalance: queued requests more than the least loaded replica's at which the preferred
        replica is passed over (default: one full batch of the default ``--max-batch``)."""
        self.imbalance = imbalance

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        key = _key(pending_request)
        if key is None or len(candidate_replicas) < 2:
            return [candidate_replicas]  # one rank: Serve probes them and takes the least loaded
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        order = [by_id[r] for r in rank(key, list(by_id))]
        load = {r.replica_id.unique_id: self.replica_queue_len_cache.get(r.replica_id) or 0 for r in order}
        least = min(order, key=lambda r: load[r.replica_id.unique_id])
        if load[order[0].replica_id.unique_id] - load[least.replica_id.unique_id] >= self.imbalance:
            order.remove(least)
            order.insert(0, least)
        return [[r] for r in order]


def _key(pending_request: PendingRequest | None) -> str | None:
    if pending_request is None or not pending_request.args:
        return None
    key = pending_request.args[0]
    return key if isinstance(key, str) and key else None

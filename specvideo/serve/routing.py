"""Prefix routing for the engine replicas: a Ray Serve ``RequestRouter`` that sends requests whose
prompts start alike to the same replica, so that replica's prompt cache keeps paying.

The entry passes each request's key (``forwarding.prefix_key``: a hash of the text leading its
prompt) as the first argument. A key seen recently goes back to its home replica. A new key gets
the replica that is home to the fewest of the ``recent`` keys, the tie broken by rendezvous
hashing (highest hash(key, replica)): consistent hashing with bounded loads (Mirrokni et al. 2018)
at the tightest bound, because a replica given more than its share of a team's files thrashes its
prompt cache, sized for its share, under cyclic use (hashing alone splits 8 files 4 and 4 over two
replicas only 27 % of the time). A replica that dies takes its homes with it; its keys find new ones.
Queue length breaks the tie: when the home's known queue exceeds the least loaded replica's by
``imbalance`` or more, the least loaded one takes the request (its prompt starts cold there). A
replica that refuses (its ``max_ongoing_requests`` reached) hands the request to the next in
rendezvous order. Requests without a key go to the less loaded of all replicas. Importing this
module needs Ray Serve.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict

from ray.serve.request_router import PendingRequest, RequestRouter, RunningReplica


def rendezvous(key: str, replica_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{key}|{replica_id}".encode(), digest_size=8).digest(), "big")


def rank(key: str, replica_ids: list[str]) -> list[str]:
    """Replica ids from the key's preferred replica down (the same order on every router)."""
    return sorted(replica_ids, key=lambda r: rendezvous(key, r), reverse=True)


def place(key: str, replica_ids: list[str], homes: dict[str, str]) -> str:
    """A new key's home: the replica home to the fewest keys of ``homes``, then the key's rendezvous
    favourite."""
    counts = Counter(r for r in homes.values() if r in replica_ids)
    return min(rank(key, replica_ids), key=lambda r: counts[r])  # min keeps the first of equals


class PrefixRouter(RequestRouter):
    def initialize_state(self, imbalance: int = 4, recent: int = 256) -> None:
        """imbalance: queued requests more than the least loaded replica's at which the home is
        passed over (default: one full batch of the default ``--max-batch``); recent: the keys
        whose homes are remembered (least recently seen forgotten first)."""
        self.imbalance, self.recent = imbalance, recent
        self.homes: OrderedDict[str, str] = OrderedDict()  # key -> replica id

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica], pending_request: PendingRequest | None = None
    ) -> list[list[RunningReplica]]:
        key = _key(pending_request)
        if key is None or len(candidate_replicas) < 2:
            return [candidate_replicas]  # one rank: Serve probes them and takes the least loaded
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        home = self.homes.get(key)
        if home not in by_id:
            home = place(key, list(by_id), self.homes)
        self.homes[key] = home
        self.homes.move_to_end(key)
        while len(self.homes) > self.recent:
            self.homes.popitem(last=False)
        order = [by_id[home]] + [by_id[r] for r in rank(key, list(by_id)) if r != home]
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

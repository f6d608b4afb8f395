"""A node of a running cluster: its plan, and the Ray node ids it has had."""

from __future__ import annotations

from dataclasses import dataclass, field

from chaos.spec.plan import NodePlan, Role
from chaos.spec.topology import NodeSpec


@dataclass
class Node:
    """One host of the cluster and what Ray calls it (the only mutable part: its ids)."""

    plan: NodePlan
    #: The node's current Ray node id; a restarted raylet registers under a new one.
    node_id: str | None = None
    #: Every Ray node id this host has had, oldest first.
    past_node_ids: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def role(self) -> Role:
        return self.plan.role

    @property
    def ip(self) -> str:
        return self.plan.ip

    @property
    def image(self) -> str:
        return self.plan.image

    @property
    def spec(self) -> NodeSpec | None:
        return self.plan.spec

    @property
    def ray_version(self) -> str | None:
        return self.plan.ray_version

    @property
    def expect_join(self) -> bool:
        return self.plan.expect_join

    def set_node_id(self, node_id: str) -> None:
        if node_id != self.node_id:
            if self.node_id:
                self.past_node_ids.append(self.node_id)
            self.node_id = node_id

"""Which image each node boots from: a team's image is derived, a skewed node keeps its own
release, an image of ours is used as it is (a fake backend: no Docker)."""

from __future__ import annotations

from chaos.cluster.boot import image_for
from chaos.spec.image_contract import ImageProbe
from chaos.spec.topology import ClusterSpec, NodeSpec


class Backend:
    def __init__(self, probe: ImageProbe | None) -> None:
        self.probe = probe
        self.asked: list[str] = []

    def node_image(self, image: str) -> ImageProbe | None:
        self.asked.append(f"derive {image}")
        return self.probe

    def ensure_image(self, ray_version: str, python: str) -> str:
        self.asked.append(f"build {ray_version}")
        return f"raychaos/ray:{ray_version}-py{python}"


TEAM = ImageProbe(
    image="mycorp/ray:next",
    node_image="raychaos/node:0123456789ab",
    ray="/usr/local/bin/ray",
    python="/usr/bin/python3",
    ray_version="2.60.0+mycorp.1",
    python_version="3.11.2",
    prefix_kind="prefix",
)


def test_a_team_image_boots_its_derived_node_image_on_the_release_it_holds() -> None:
    backend = Backend(TEAM)
    spec = ClusterSpec(image="mycorp/ray:next")
    got = image_for(spec, backend, spec.head)  # type: ignore[arg-type]
    assert got == ("2.60.0+mycorp.1", "raychaos/node:0123456789ab")
    assert backend.asked == ["derive mycorp/ray:next"]


def test_a_node_of_another_release_in_a_team_images_cluster_gets_that_release() -> None:
    backend = Backend(TEAM)
    skewed = NodeSpec(name="skewed", ray_version="2.59.0", expect_join=False)
    spec = ClusterSpec(image="mycorp/ray:next", workers=(skewed,))
    assert image_for(spec, backend, skewed) == ("2.59.0", "raychaos/ray:2.59.0-py3.11")  # type: ignore[arg-type]
    assert backend.asked == ["build 2.59.0"]


def test_an_image_of_ours_is_used_as_it_is() -> None:
    backend = Backend(None)
    node = NodeSpec(name="patched", image="raychaos/ray:2.60.0-py3.11.7")
    spec = ClusterSpec(workers=(node,))
    assert image_for(spec, backend, node) == ("2.60.0", "raychaos/ray:2.60.0-py3.11.7")  # type: ignore[arg-type]

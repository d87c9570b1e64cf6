"""ICI links and wraparound: the known answers for real slices."""

from __future__ import annotations

import pytest

from sharding_core.devices import parse_devices
from sharding_core.topology import topology


def _ici(devices: str, **kw: int) -> list[dict[str, object]]:
    return [link for link in topology(parse_devices(devices, **kw))["links"] if link["kind"] == "ici"]


@pytest.mark.parametrize(
    ("devices", "links", "wrap"),
    [
        ("tpu:v4:4x4x4", 192, 48),  # a full cube: a 3-D torus, 64 chips x 3 links
        ("tpu:v4:2x2x2", 12, 0),  # the edges of a cube, no wraparound
        ("tpu:v5e:4x4", 24, 0),
        ("tpu:v5e:16x16", 512, 32),  # both axes span 16 chips: a 2-D torus
        ("tpu:v5e:8x16", 240, 8),  # only the 16 axis wraps
    ],
)
def test_known_link_counts(devices: str, links: int, wrap: int) -> None:
    got = _ici(devices)
    assert len(got) == links
    assert sum(bool(link["wraparound"]) for link in got) == wrap


def test_v5e_8x16_wraps_only_the_16_axis() -> None:
    assert topology(parse_devices("tpu:v5e:8x16"))["wraparound"] == [False, True]
    assert {link["axis"] for link in _ici("tpu:v5e:8x16") if link["wraparound"]} == {1}


def test_links_join_neighbouring_chips() -> None:
    ds = parse_devices("tpu:v4:4x4x4")
    for link in _ici("tpu:v4:4x4x4"):
        a, b = ds.by_id[link["a"]].coords, ds.by_id[link["b"]].coords
        diff = sorted(abs(x - y) for x, y in zip(a, b, strict=True))
        assert diff == ([0, 0, 3] if link["wraparound"] else [0, 0, 1])


def test_cores_of_a_chip_are_linked_on_chip() -> None:
    topo = topology(parse_devices("tpu:v3:2x2"))
    on_chip = [link for link in topo["links"] if link["kind"] == "on_chip"]
    assert len(on_chip) == 4
    ds = parse_devices("tpu:v3:2x2")
    assert all(ds.by_id[link["a"]].coords == ds.by_id[link["b"]].coords for link in on_chip)


def test_multislice_links_stay_within_slices() -> None:
    ds = parse_devices("tpu:v5e:4x4", slices=2)
    topo = topology(ds)
    assert topo["slices"] == 2
    for link in topo["links"]:
        assert ds.by_id[link["a"]].slice_index == ds.by_id[link["b"]].slice_index
    assert len(topo["links"]) == 2 * 24


def test_gpu_hosts_are_nvlink_cliques() -> None:
    topo = topology(parse_devices("gpu:h100:2x8"))
    assert len(topo["links"]) == 2 * (8 * 7 // 2)
    assert [h["device_ids"] for h in topo["hosts"]] == [list(range(8)), list(range(8, 16))]

"""ICI links and wraparound: the known answers for real slices."""

from __future__ import annotations

import pytest

from sharding_core.devices import parse_devices
from sharding_core.errors import ShardingError
from sharding_core.mesh import MeshSpec, build_mesh
from sharding_core.topology import compare_orderings, groups_on_topology, hop_distance, mesh_on_topology, topology


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


# ---- the mesh on the topology: ring metrics checked by hand ----------------------------------------


def _axes(devices: str, shape: tuple[int, ...], **kw: object) -> dict[str, dict[str, object]]:
    ds = parse_devices(devices)
    names = tuple("xyz"[: len(shape)])
    result = mesh_on_topology(ds, build_mesh(ds, MeshSpec(shape, names, **kw)))  # type: ignore[arg-type]
    return {a["name"]: a for a in result["axes"]}


def test_v4_8_make_mesh_of_four_is_not_a_ring() -> None:
    # jax issue 20305: on a v4-8 (2x2x1), create_device_mesh((4,)) orders chips 0 2 1 3:
    # (0,0) -> (0,1) -> (1,0) -> (1,1) -> back to (0,0): hops 1, 2, 1, 2 — a zigzag, not a ring.
    x = _axes("tpu:v4:2x2x1", (4,))["x"]
    assert x["groups"] == [[0, 2, 1, 3]]
    assert x["hops"] == [[1, 2, 1, 2]]
    assert x["max_hop"] == 2 and x["mean_hop"] == 1.5 and not x["is_ring"]
    # The ring a person would draw on the 2x2 square: 0 1 3 2.
    ring = _axes("tpu:v4:2x2x1", (4,), order="devices", device_ids=(0, 1, 3, 2))["x"]
    assert ring["hops"] == [[1, 1, 1, 1]] and ring["is_ring"]


def test_v5e_tray_order_assumes_another_orientation() -> None:
    # JAX's 8-chip v5e tray ring (0 1 2 3 7 6 5 4) on libtpu's 2x4 coordinates zigzags across the
    # short side: every other hop is 2 links.
    x = _axes("tpu:v5e:2x4", (8,))["x"]
    assert x["groups"] == [[0, 1, 2, 3, 7, 6, 5, 4]]
    assert x["hops"] == [[1, 2, 1, 2, 1, 2, 1, 2]]
    assert not x["is_ring"] and x["groups_not_rings"] == 1


def test_v3_cores_of_a_chip_are_zero_hops_and_the_tray_is_a_ring() -> None:
    x = _axes("tpu:v3:2x2", (8,))["x"]
    assert x["groups"] == [[0, 1, 2, 3, 6, 7, 4, 5]]
    assert x["hops"] == [[0, 1, 0, 1, 0, 1, 0, 1]]  # core to core on a chip, then one link
    assert x["is_ring"]


def test_lines_without_wraparound_close_the_long_way() -> None:
    # v5e 4x4 has no wraparound: a group of 4 along an axis is a line whose closing hop is 3 links.
    axes = _axes("tpu:v5e:4x4", (4, 4))
    assert axes["y"]["groups"][0] == [0, 1, 2, 3] and axes["y"]["hops"][0] == [1, 1, 1, 3]
    assert axes["x"]["groups"][0] == [0, 4, 8, 12] and axes["x"]["max_hop"] == 3
    assert axes["x"]["crosses_hosts"] and axes["x"]["groups_crossing_hosts"] == 4
    # On the 16x16 torus the same 16-long axis wraps: the closing hop is a single link.
    wrapped = _axes("tpu:v5e:16x16", (16, 16))
    assert wrapped["y"]["hops"][0] == [1] * 16 and wrapped["y"]["is_ring"]


def test_non_contiguous_group_hops() -> None:
    # An explicit order whose groups skip chips: on v5e 4x4 (no wrap, id = x + 4y), mesh (2, 8) from
    # ids 0 2 4 ... puts chips (0,0) (2,0) (0,1) (2,1) (0,2) (2,2) (0,3) (2,3) in one group:
    # hops 2, 3, 2, 3, 2, 3, 2 and the closing (2,3) -> (0,0) = 2 + 3 = 5.
    ids = tuple(list(range(0, 16, 2)) + list(range(1, 16, 2)))
    y = _axes("tpu:v5e:4x4", (2, 8), order="devices", device_ids=ids)["y"]
    ds = parse_devices("tpu:v5e:4x4")
    group = y["groups"][0]
    assert group == [0, 2, 4, 6, 8, 10, 12, 14]
    by_hand = [
        abs(ds.by_id[a].coords[0] - ds.by_id[b].coords[0]) + abs(ds.by_id[a].coords[1] - ds.by_id[b].coords[1])
        for a, b in zip(group, group[1:] + group[:1], strict=True)
    ]
    assert y["hops"][0] == by_hand == [2, 3, 2, 3, 2, 3, 2, 5]
    assert y["max_hop"] == 5 and not y["is_ring"]


def test_pairs_count_one_link_and_single_member_axes_none() -> None:
    axes = _axes("tpu:v5e:2x2", (2, 2), order="iota")
    assert axes["x"]["groups"] == [[0, 2], [1, 3]] and axes["x"]["hops"] == [[1], [1]]
    # jax.make_mesh((2, 2)) on a 2x2 v5e reshapes the 4-chip ring 0 1 3 2, so its first axis pairs
    # diagonal chips (0 with 3, 1 with 2): two links apart. The hop table shows it.
    diagonal = _axes("tpu:v5e:2x2", (2, 2))
    assert diagonal["x"]["groups"] == [[0, 3], [1, 2]] and diagonal["x"]["hops"] == [[2], [2]]
    assert diagonal["y"]["hops"] == [[1], [1]]
    single = _axes("tpu:v5e:2x2", (1, 4))
    assert single["x"]["hops"] == [[]] * 4 and single["x"]["is_ring"]


def test_gpu_axes_across_hosts_use_the_network() -> None:
    axes = _axes("gpu:h100:2x4", (2, 4))
    assert axes["x"]["interconnect"] == "network" and axes["x"]["crosses_hosts"]
    assert axes["y"]["interconnect"] == "nvlink" and not axes["y"]["crosses_hosts"]


def test_multislice_axis_crosses_dcn() -> None:
    ds = parse_devices("tpu:v5e:2x2", slices=2)
    mesh = build_mesh(ds, MeshSpec((2, 4), ("dcn", "ici"), order="hybrid", dcn_shape=(2, 1)))
    axes = {a["name"]: a for a in mesh_on_topology(ds, mesh)["axes"]}
    assert axes["dcn"]["crosses_slices"] and axes["dcn"]["interconnect"] == "dcn"
    assert not axes["ici"]["crosses_slices"] and axes["ici"]["interconnect"] == "ici"


def test_hop_distance_agrees_with_the_vectorised_metrics() -> None:
    ds = parse_devices("tpu:v4:4x4x4")
    y = _axes("tpu:v4:4x4x4", (4, 16))["y"]
    for group, hops in zip(y["groups"], y["hops"], strict=True):
        pairs = zip(group, group[1:] + group[:1], strict=True)
        assert hops == [hop_distance(ds, ds.by_id[a], ds.by_id[b]) for a, b in pairs]


def test_orderings_side_by_side() -> None:
    rows = {r["order"]: r for r in compare_orderings(parse_devices("tpu:v5p:4x4x4"), (8, 8), ("x", "y"))}
    assert rows["make_mesh"]["error"]["code"] == "mesh_unplaceable"  # needs split physical axes
    assert rows["split"]["axes"][0]["name"] == "x" and "error" not in rows["split"]
    assert rows["iota"]["device_ids"][0][:2] == [0, 1]


def test_fabrics_join_slices_and_gpu_hosts() -> None:
    multi = topology(parse_devices("tpu:v5e:2x2", slices=2))
    members = [[100000, 100001, 100002, 100003], [200000, 200001, 200002, 200003]]
    assert multi["fabrics"] == [{"kind": "dcn", "joins": "slices", "members": members}]
    gpus = topology(parse_devices("gpu:h100:2x2"))
    assert gpus["fabrics"] == [{"kind": "network", "joins": "hosts", "members": [[0, 1], [2, 3]]}]
    assert topology(parse_devices("tpu:v5e:4x4"))["fabrics"] == []


def test_collective_groups_on_the_topology() -> None:
    # an all-reduce over the short axis of a v5e 2x4 mesh from iota order: pairs (0, 2), (1, 3)...
    ds = parse_devices("tpu:v5e:2x4")
    got = groups_on_topology(ds, [[0, 2], [1, 3], [4, 6], [5, 7]], "all-reduce over x")
    assert got["name"] == "all-reduce over x" and got["hops"] == [[1], [1], [1], [1]] and got["is_ring"]
    # the same devices visited diagonally: two links per hop
    diag = groups_on_topology(ds, [[0, 3], [1, 2]])
    assert diag["hops"] == [[2], [2]] and diag["max_hop"] == 2 and not diag["is_ring"]
    # equal to what mesh_on_topology reports for the same groups of a mesh axis
    axis = _axes("tpu:v5e:4x4", (4, 4))["x"]
    again = groups_on_topology(parse_devices("tpu:v5e:4x4"), axis["groups"])
    assert again["hops"] == axis["hops"] and again["crosses_hosts"] == axis["crosses_hosts"]


@pytest.mark.parametrize("groups", [[], [[]], [[0, 1], [2]], [[0, 99]]])
def test_bad_groups_are_explained(groups: list[list[int]]) -> None:
    with pytest.raises(ShardingError) as e:
        groups_on_topology(parse_devices("cpu:8"), groups)
    assert e.value.code == "bad_devices"

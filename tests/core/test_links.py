"""The interconnects of the catalog (``data/links``): the slugs scenarios name, bandwidth
per direction and latency with their sources, and a catalog built without links still
knows the shipped ones."""

from __future__ import annotations

import pytest

from simulations.core.catalog import builtin_catalog, catalog_from_records
from simulations.core.errors import SpecError
from simulations.core.spec import LinkKind, LinkSpec

SLUGS = (
    "nvlink3",
    "nvlink4",
    "nvlink5",
    "pcie4-x16",
    "pcie5-x16",
    "infinity-fabric",
    "infiniband-ndr",
    "ethernet-100g",
    "ethernet-400g",
)
#: Google TPU inter-chip interconnects: bandwidth published, latency not (0, sourced as such).
ICI_SLUGS = ("ici-v5e", "ici-v6e")


@pytest.mark.parametrize("slug", SLUGS)
def test_every_issue_link_is_in_the_catalog_with_sourced_numbers(slug: str) -> None:
    link = builtin_catalog().link(slug)
    assert link.slug == slug and link.name
    assert link.bw_gbps > 0 and link.latency_us > 0
    assert link.sources["bw_gbps"].strip() and link.sources["latency_us"].strip()


def test_link_bandwidths_are_per_direction_halves_of_the_vendors_totals() -> None:
    cat = builtin_catalog()
    # NVLink totals count both directions: 600 / 900 / 1800 GB/s per GPU.
    assert [cat.link(s).bw_gbps for s in ("nvlink3", "nvlink4", "nvlink5")] == [300, 450, 900]
    # 400 Gb/s ports carry 50 GB/s each way; 100 Gb/s 12.5 GB/s.
    assert cat.link("infiniband-ndr").bw_gbps == cat.link("ethernet-400g").bw_gbps == 50
    assert cat.link("ethernet-100g").bw_gbps == 12.5
    assert cat.link("pcie5-x16").bw_gbps == 2 * cat.link("pcie4-x16").bw_gbps


def test_an_unknown_link_is_refused_naming_the_link_field() -> None:
    with pytest.raises(SpecError) as err:
        builtin_catalog().link("nvlink9")
    assert err.value.field == "link"


def test_a_catalog_built_from_other_records_keeps_the_shipped_links() -> None:
    cat = catalog_from_records()
    assert set(cat.links) == {*SLUGS, *ICI_SLUGS}
    extra = catalog_from_records(
        links=[{"slug": "toy-link", "name": "Toy", "kind": "ethernet", "bw_gbps": 1.0}]
    )
    assert extra.link("toy-link").bw_gbps == 1.0 and "nvlink4" in extra.links


def test_a_link_record_with_a_bad_number_is_refused_naming_its_slug() -> None:
    with pytest.raises(SpecError) as err:
        LinkSpec(LinkKind.NVLINK, bw_gbps=-1.0, slug="broken")
    assert err.value.field == "broken.bw_gbps"


@pytest.mark.parametrize(("slug", "bidirectional_per_chip"), [("ici-v5e", 400), ("ici-v6e", 800)])
def test_tpu_ici_links_carry_half_the_published_bidirectional_per_chip_figure(
    slug: str, bidirectional_per_chip: float
) -> None:
    link = builtin_catalog().link(slug)
    assert link.kind is LinkKind.ICI and link.name
    # Google's figure counts both directions over all 4 ICI ports of a chip.
    assert link.bw_gbps == bidirectional_per_chip / 2
    assert f"{bidirectional_per_chip} GBps" in link.sources["bw_gbps"]
    assert "4" in link.sources["bw_gbps"] and "per direction" in link.sources["bw_gbps"]


@pytest.mark.parametrize("slug", ICI_SLUGS)
def test_an_unpublished_ici_latency_is_zero_and_says_so(slug: str) -> None:
    link = builtin_catalog().link(slug)
    assert link.latency_us == 0
    assert link.sources["latency_us"].startswith("NOT PUBLISHED")

"""Labels: the lattice, its join, its provenance tags and who may read what."""

from __future__ import annotations

import itertools

import pytest

from actionspace.policy import PUBLIC_TRUSTED, Label, Principal, may_read
from actionspace.policy.labels import CONFIDENTIALITY, Integrity

INTEGRITY: tuple[Integrity, ...] = ("trusted", "untrusted")
READERS: list[frozenset[str] | None] = [None, frozenset(), frozenset({"a"}), frozenset({"a", "b"})]
ALL = [
    Label(confidentiality=c, integrity=i, readers=r)
    for c, i, r in itertools.product(CONFIDENTIALITY, INTEGRITY, READERS)
]


def test_join_takes_the_highest_confidentiality() -> None:
    assert Label(confidentiality="internal").join(Label(confidentiality="secret")).confidentiality == "secret"
    assert Label(confidentiality="secret").join(Label(confidentiality="public")).confidentiality == "secret"
    assert Label(confidentiality="internal").join(Label()).confidentiality == "internal"


def test_untrusted_wins_a_join() -> None:
    assert Label(integrity="untrusted").join(Label()).integrity == "untrusted"
    assert Label().join(Label(integrity="untrusted")).integrity == "untrusted"
    assert Label().join(Label()).integrity == "trusted"


def test_reader_sets_intersect_and_none_means_anyone() -> None:
    ab = Label(readers=frozenset({"a", "b"}))
    bc = Label(readers=frozenset({"b", "c"}))
    assert ab.join(bc).readers == frozenset({"b"})
    assert ab.join(Label()).readers == frozenset({"a", "b"})
    assert Label().join(bc).readers == frozenset({"b", "c"})
    assert Label().join(Label()).readers is None


def test_bottom_is_the_identity_of_join_and_join_is_a_semilattice() -> None:
    assert Label.bottom() is PUBLIC_TRUSTED
    for x in ALL:
        assert x.join(PUBLIC_TRUSTED) == x
        assert PUBLIC_TRUSTED.join(x) == x
        assert x.join(x) == x
        for y in ALL:
            j = x.join(y)
            assert j == y.join(x)
            assert x.flows_to(j)
            assert y.flows_to(j)
            for z in ALL[::5]:
                assert x.join(y).join(z) == x.join(y.join(z))


def test_flows_to_is_the_lattice_order() -> None:
    assert Label().flows_to(Label(confidentiality="secret"))
    assert not Label(confidentiality="secret").flows_to(Label(confidentiality="internal"))
    assert not Label(integrity="untrusted").flows_to(Label())
    assert Label().flows_to(Label(integrity="untrusted"))
    assert Label(readers=frozenset({"a", "b"})).flows_to(Label(readers=frozenset({"a"})))
    assert not Label(readers=frozenset({"a"})).flows_to(Label(readers=frozenset({"a", "b"})))
    assert not Label(readers=frozenset({"a"})).flows_to(Label())
    assert Label().flows_to(Label(readers=frozenset({"a"})))
    for x in ALL:
        for y in ALL:
            assert x.flows_to(y) == (x.join(y) == y)


def test_labels_round_trip_through_provenance_tags_and_dicts() -> None:
    for x in ALL:
        assert Label.from_tags(x.tags(), x.integrity) == x
        assert Label.from_dict(x.to_dict()) == x
    assert Label.from_tags(()) == PUBLIC_TRUSTED
    assert Label.from_tags(("internal", "secret", "public")).confidentiality == "secret"
    assert Label.from_tags(("bogus",), "untrusted") == Label(integrity="untrusted")
    assert Label(readers=frozenset({"b", "a"})).tags() == ("public", "reader:a", "reader:b")


def test_bad_label_values_are_refused() -> None:
    with pytest.raises(ValueError, match="confidentiality"):
        Label(confidentiality="top")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="integrity"):
        Label(integrity="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="collection"):
        Label(readers="alice")  # type: ignore[arg-type]
    assert Label(readers=["a", "b"]).readers == frozenset({"a", "b"})  # type: ignore[arg-type]


def test_label_properties_and_text() -> None:
    secret = Label(confidentiality="secret", integrity="untrusted", readers=frozenset({"b", "a"}))
    assert secret.secret and secret.untrusted and secret.rank == 2
    assert not Label().secret and not Label().untrusted and Label().rank == 0
    assert Label(confidentiality="internal").rank == 1
    assert str(secret) == "secret/untrusted{a,b}"
    assert str(Label()) == "public/trusted"


def test_only_cleared_viewers_may_read_secret_or_reader_restricted_values() -> None:
    secret = Label(confidentiality="secret")
    mine = Label(confidentiality="internal", readers=frozenset({"alice"}))
    cleared = Principal(id="ops", scopes=("labels:secret",))
    nobody = Principal(id="bob", scopes=("read:*",))
    alice = Principal(id="alice")
    assert may_read(Label(confidentiality="internal"), None)
    assert not may_read(secret, None)
    assert not may_read(secret, nobody)
    assert may_read(secret, cleared)
    assert may_read(mine, alice)
    assert not may_read(mine, nobody)
    assert not may_read(mine, cleared)  # labels:secret does not cover internal data of named readers
    assert may_read(mine, Principal(id="ops", scopes=("labels:internal",)))
    assert may_read(Label(confidentiality="secret", readers=frozenset({"alice"})), alice)

"""RFC 22 idsets and RFC 29 hostlists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluxsched_py.ids import Hostlist, HostlistError, IdSet, IdSetError
from fluxsched_py.limits import MAX_ID

# -- RFC 22 -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, canonical",
    [
        ("", ""),
        ("0", "0"),
        ("1,2,3,5,6,42", "1-3,5-6,42"),
        ("[1-3,5-6,42]", "1-3,5-6,42"),
        ("5,1,3,2", "1-3,5"),
        ("1,1,2", "1-2"),
        ("0-1023", "0-1023"),
    ],
)
def test_idset_string_is_ascending_and_compressed(text, canonical):
    assert IdSet.parse(text).encode() == canonical


@given(
    st.one_of(
        st.integers(0, 1 << 70),
        st.sets(st.integers(0, 600), min_size=40, max_size=300),
        st.tuples(st.integers(1, 40), st.integers(0, 40)),
    )
)
def test_idset_runs_are_the_maximal_runs_of_ids(x):
    """One run (a single id, or lo..hi) takes a shortcut; every mask gives the
    runs of its set bits, whether they are few (peeled off with integer
    operations: 70-bit masks) or many (read from the mask as a string: sets
    of 40-300 ids among 600, most with over 32 runs)."""
    if isinstance(x, (set, frozenset)):
        x = sum(1 << i for i in x)
    mask = x if isinstance(x, int) else ((1 << x[0]) - 1) << x[1]
    ids = sorted(i for i in range(mask.bit_length()) if mask >> i & 1)
    expect = []
    for i in ids:
        if expect and expect[-1][1] == i - 1:
            expect[-1] = (expect[-1][0], i)
        else:
            expect.append((i, i))
    assert list(IdSet.from_mask(mask).runs()) == expect


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "01", "1,,2", "1-2-3", "[1", "1.5", str(MAX_ID + 1)])
def test_idset_rejects_malformed_strings(text):
    with pytest.raises(IdSetError) as e:
        IdSet.parse(text)
    assert repr(text) in str(e.value)


def test_idset_algebra():
    a, b = IdSet.parse("0-7"), IdSet.parse("4-11")
    assert str(a | b) == "0-11"
    assert str(a & b) == "4-7"
    assert str(a - b) == "0-3"
    assert str(a ^ b) == "0-3,8-11"
    assert IdSet.parse("5-6") <= a and not b <= a
    assert len(a) == 8 and 7 in a and 8 not in a
    assert a.first() == 0 and b.last() == 11
    assert str(b.lowest(3)) == "4-6" and str(b.highest(3)) == "9-11"


ids = st.frozensets(st.integers(min_value=0, max_value=5000), max_size=200)


@given(ids)
def test_idset_round_trips_through_its_string(members):
    s = IdSet(members)
    assert set(IdSet.parse(s.encode())) == set(members)
    assert IdSet.parse(s.encode(brackets=True)) == s


@given(ids, ids)
def test_idset_algebra_agrees_with_python_sets(x, y):
    a, b = IdSet(x), IdSet(y)
    assert set(a | b) == x | y
    assert set(a & b) == x & y
    assert set(a - b) == x - y
    assert len(a) == len(x)


# -- RFC 29 -----------------------------------------------------------------

RFC29_VECTORS = [
    ("", []),
    ("foox,fooy,fooz", ["foox", "fooy", "fooz"]),
    ("[1-3,5-6]", ["1", "2", "3", "5", "6"]),
    ("foo[1-5]", ["foo1", "foo2", "foo3", "foo4", "foo5"]),
    ("foo[0-4]-eth2", ["foo0-eth2", "foo1-eth2", "foo2-eth2", "foo3-eth2", "foo4-eth2"]),
    ("foo1,foo1,foo1", ["foo1", "foo1", "foo1"]),
    ("[00-02]", ["00", "01", "02"]),
    ("[00-2]", ["00", "01", "02"]),
    ("foo[1,1,2,1]", ["foo1", "foo1", "foo2", "foo1"]),
    ("n[005,4,11-13]", ["n005", "n004", "n011", "n012", "n013"]),
]


@pytest.mark.parametrize("text, hosts", RFC29_VECTORS)
def test_hostlist_rfc29_test_vectors(text, hosts):
    assert list(Hostlist.parse(text)) == hosts


def test_hostlist_multi_range_brackets_expand_as_a_product():
    hl = Hostlist.parse("n[1-3,7]-ib[0-1]")
    assert list(hl)[:4] == ["n1-ib0", "n1-ib1", "n2-ib0", "n2-ib1"]
    assert len(hl) == 8
    assert list(Hostlist.parse(str(hl))) == list(hl)


@pytest.mark.parametrize(
    "hosts, text",
    [
        (["foo1", "foo2", "foo3", "fooi"], "foo[1-3],fooi"),
        (["foo1", "fooi", "foo2", "foo3"], "foo1,fooi,foo[2-3]"),
        (["pi3", "pi0", "pi1", "pi2", "pi4"], "pi[3,0-2,4]"),
        (["foo0-eth2", "foo1-eth2"], "foo[0-1]-eth2"),
        (["foo-1a-2", "foo-1a-3"], "foo-1a-[2-3]"),
        (["n007", "n008", "n009", "n010"], "n[007-010]"),
        (["14636"], "14636"),
    ],
)
def test_hostlist_encodes_compressed_and_keeps_order(hosts, text):
    assert Hostlist(hosts).encode() == text


@pytest.mark.parametrize(
    "text", ["[]", "foo[]", "foo[", "foo[1,3", "foo[[1,3]", "foo]", "foo[x-y]", "foo[0-1,2--5]", "foo[3-1]", "a b"]
)
def test_hostlist_rejects_malformed_strings(text):
    with pytest.raises(HostlistError):
        Hostlist.parse(text)


def test_hostlist_refuses_absurd_sizes():
    with pytest.raises(HostlistError, match="more than"):
        Hostlist.parse("foo[0-99999999]")
    with pytest.raises(HostlistError, match="more than"):
        Hostlist.parse("a[0-9999]b[0-9999]")


name_chars = st.sampled_from("abcxyz-_.0123456789")
hostnames = st.text(name_chars, min_size=1, max_size=8)


@given(st.lists(hostnames, max_size=60))
def test_hostlist_round_trips_through_its_string(hosts):
    hl = Hostlist(hosts)
    assert list(Hostlist.parse(hl.encode())) == hosts


@given(st.lists(st.integers(min_value=0, max_value=300), max_size=80), st.sampled_from(["node", "n", "rack1-n", ""]))
def test_hostlist_numeric_runs_round_trip(numbers, prefix):
    hosts = [f"{prefix}{n}" for n in numbers]
    text = Hostlist(hosts).encode()
    assert list(Hostlist.parse(text)) == hosts
    if hosts and numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(hosts) > 1:
        assert text == f"{prefix}[{numbers[0]}-{numbers[-1]}]"

"""Behaviour of kubedra.api.semver against SemVer 2.0.0 and blang/semver v4."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubedra.api.semver import Semver, SemverError, is_valid_semver

VALID = [
    "0.0.0",
    "1.2.3",
    "10.20.30",
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-0.3.7",
    "1.0.0-x.7.z.92",
    "1.0.0-x-y-z.--",
    "1.0.0-alpha+001",
    "1.0.0+20130313144700",
    "1.0.0-beta+exp.sha.5114f85",
    "1.0.0+21AF26D3----117B344092BD",
    "1.0.0-0A.is.legal",
    "18446744073709551615.0.0",
]

# text -> start of blang's error message
INVALID = [
    ("", "Version string empty"),
    ("1", "No Major.Minor.Patch elements found"),
    ("1.2", "No Major.Minor.Patch elements found"),
    ("v1.2.3", 'Invalid character(s) found in major number "v1"'),
    ("1.x.3", 'Invalid character(s) found in minor number "x"'),
    ("1.2.3.4", 'Invalid character(s) found in patch number "3.4"'),
    ("01.2.3", 'Major number must not contain leading zeroes "01"'),
    ("1.02.3", 'Minor number must not contain leading zeroes "02"'),
    ("1.2.03", 'Patch number must not contain leading zeroes "03"'),
    ("1.2.", 'strconv.ParseUint: parsing "": invalid syntax'),
    ("1.2.3-", "Prerelease is empty"),
    ("1.2.3-a..b", "Prerelease is empty"),
    ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ("1.2.3-a_b", 'Invalid character(s) found in prerelease "a_b"'),
    ("1.2.3+", "Build meta data is empty"),
    ("1.2.3+a..b", "Build meta data is empty"),
    ("1.2.3+a$", 'Invalid character(s) found in build meta data "a$"'),
    (" 1.2.3", 'Invalid character(s) found in major number " 1"'),
    ("18446744073709551616.0.0", "strconv.ParseUint: parsing"),
]


@pytest.mark.parametrize("text", VALID)
def test_valid_strict(text: str) -> None:
    assert str(Semver.parse(text)) == text
    assert is_valid_semver(text)


@pytest.mark.parametrize(("text", "message"), INVALID)
def test_invalid_strict(text: str, message: str) -> None:
    with pytest.raises(SemverError) as info:
        Semver.parse(text)
    assert str(info.value).startswith(message)
    if not text.startswith("18446744073709551616"):  # the regex has no uint64 bound
        assert not is_valid_semver(text)


@pytest.mark.parametrize("text", ["1.2.3\n", "1.2.3-\u0661", "\u0661.2.3", "1.2.3+b\n"])
def test_validator_rejects_trailing_newline_and_unicode_digits(text: str) -> None:
    assert not is_valid_semver(text)


def test_fields_and_identifier_types() -> None:
    version = Semver.parse("1.2.3-rc.11.x-1+build.007")
    assert (version.major, version.minor, version.patch) == (1, 2, 3)
    assert version.pre == ("rc", 11, "x-1")
    assert version.build == ("build", "007")
    assert repr(version) == "Semver('1.2.3-rc.11.x-1+build.007')"


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("v1.2.3", "1.2.3"),
        ("1", "1.0.0"),
        ("v1", "1.0.0"),
        ("1.2", "1.2.0"),
        ("v01.002.0003", "1.2.3"),
        ("00.0.0", "0.0.0"),
        ("1.2.03-rc.1+b", "1.2.3-rc.1+b"),
        ("1.2.00-rc", "1.2.0-rc"),
    ],
)
def test_normalize(text: str, normalized: str) -> None:
    assert str(Semver.parse(text, normalize=True)) == normalized


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.2-rc", "short version cannot contain PreRelease/Build meta data"),
        ("1+build", "short version cannot contain PreRelease/Build meta data"),
        ("1.2-rc.1", 'Invalid character(s) found in minor number "2-rc"'),
        ("vv1.2.3", "Invalid character(s) found in major number"),
        (" 1.2.3", "Invalid character(s) found in major number"),
        ("1.2.3-01", "Numeric PreRelease version must not contain leading zeroes"),
        ("", 'strconv.ParseUint: parsing "": invalid syntax'),  # padded to ".0.0"
    ],
)
def test_normalize_still_rejects(text: str, message: str) -> None:
    with pytest.raises(SemverError) as info:
        Semver.parse(text, normalize=True)
    assert str(info.value).startswith(message)


def test_semver_org_precedence_chain() -> None:
    chain = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "2.0.0",
    ]
    versions = [Semver.parse(text) for text in chain]
    for lower, higher in itertools.pairwise(versions):
        assert lower < higher
        assert higher > lower
        assert lower.compare(higher) == -1
        assert higher.compare(lower) == 1
    assert sorted(reversed(versions)) == versions


def test_numeric_components_compare_numerically() -> None:
    assert Semver.parse("1.10.0") > Semver.parse("1.9.0")
    assert Semver.parse("1.0.0-2") < Semver.parse("1.0.0-10")
    assert Semver.parse("1.0.0-10") < Semver.parse("1.0.0-a")  # numeric before alphanumeric
    assert Semver.parse("1.0.0-B") < Semver.parse("1.0.0-a")  # ASCII order


def test_build_metadata_is_ignored_for_order_equality_and_hash() -> None:
    a, b = Semver.parse("1.0.0+a"), Semver.parse("1.0.0+b.2")
    assert a == b
    assert a.compare(b) == 0
    assert hash(a) == hash(b)
    assert a <= b and a >= b
    assert str(a) != str(b)
    assert Semver.parse("1.0.0") != "1.0.0"


def test_immutable() -> None:
    version = Semver.parse("1.2.3")
    with pytest.raises(AttributeError):
        version.major = 2  # type: ignore[misc]


# --- properties -------------------------------------------------------------------------

_numbers = st.integers(0, 2**64 - 1)
_alnum_ids = st.from_regex(r"[0-9]*[A-Za-z-][0-9A-Za-z-]*", fullmatch=True).filter(
    lambda s: len(s) <= 12
)
_pre_ids = st.lists(st.integers(0, 10**6) | _alnum_ids, max_size=4).map(tuple)
_build_ids = st.lists(st.from_regex(r"[0-9A-Za-z-]{1,8}", fullmatch=True), max_size=3).map(tuple)
versions = st.builds(Semver, _numbers, _numbers, _numbers, _pre_ids, _build_ids)
small_versions = st.builds(
    Semver,
    st.integers(0, 2),
    st.integers(0, 2),
    st.integers(0, 2),
    st.lists(st.integers(0, 3) | st.sampled_from(["a", "b", "1a"]), max_size=2).map(tuple),
)


@given(versions)
def test_round_trip(version: Semver) -> None:
    text = str(version)
    assert is_valid_semver(text)
    again = Semver.parse(text)
    assert again == version
    assert (again.pre, again.build) == (version.pre, version.build)
    assert str(again) == text


@given(small_versions, small_versions)
def test_ordering_is_antisymmetric(a: Semver, b: Semver) -> None:
    assert a.compare(b) == -b.compare(a)
    assert (a < b) == (b > a)
    assert (a == b) == (a.compare(b) == 0)
    if a == b:
        assert hash(a) == hash(b)


@given(small_versions, small_versions, small_versions)
def test_ordering_is_transitive(a: Semver, b: Semver, c: Semver) -> None:
    if a <= b and b <= c:
        assert a <= c

"""RFC 6962/9162 hashing, proofs, verifiers: known answers, the oracle, mutations."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tlogkit import aics_tlog

from intentusnet.tlog.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    fold_perfect,
    inclusion_proof,
    leaf_hash,
    subtree_hash,
    verify_consistency,
    verify_inclusion,
)

# The Certificate Transparency test vectors: eight leaves and the root of
# every prefix, from transparency-dev/merkle (testonly/constants.go, and the
# proofs in proof/verify_test.go), the Go implementation behind CT and
# Trillian.
LEAVES = [
    bytes.fromhex(h)
    for h in [
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    ]
]
ROOTS = [
    bytes.fromhex(h)
    for h in [
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]
# (index, size, proof): indexes count from 0 here (the Go file's from 1).
INCLUSION = [
    (0, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (5, 8, ["bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]),
    (1, 5, ["6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (0, 1, []),
]  # fmt: skip
# (old size, new size, proof)
CONSISTENCY = [
    (1, 8, ["96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
            "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"]),
    (6, 8, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (2, 5, ["5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"]),
    (6, 7, ["0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"]),
    (1, 1, []),
]  # fmt: skip


def in_memory(leaves: list[bytes]) -> Callable[[int, int], bytes]:
    """The complete-subtree hashes of ``leaves``, for the generators."""
    hashes = [leaf_hash(leaf) for leaf in leaves]
    return lambda start, height: fold_perfect(hashes[start : start + (1 << height)])


def root(leaves: list[bytes]) -> bytes:
    """The root of ``leaves``."""
    return subtree_hash(0, len(leaves), in_memory(leaves))


@pytest.mark.parametrize("size", range(9))
def test_roots_match_the_ct_vectors(size: int) -> None:
    """Each prefix's root is as in transparency-dev/merkle's testonly/constants.go."""
    assert root(LEAVES[:size]) == ROOTS[size]


def test_the_empty_root_is_the_hash_of_nothing() -> None:
    """The empty tree's root is SHA-256 of the empty string."""
    assert ROOTS[0] == EMPTY_ROOT


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_inclusion_proofs_match_the_ct_vectors(index, size, proof) -> None:
    """Audit paths are transparency-dev/merkle's (proof/verify_test.go), and verify."""
    expected = [bytes.fromhex(h) for h in proof]
    assert inclusion_proof(index, size, in_memory(LEAVES[:size])) == expected
    assert verify_inclusion(
        leaf_hash(LEAVES[index]), index, size, expected, ROOTS[size]
    )


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_consistency_proofs_match_the_ct_vectors(old, new, proof) -> None:
    """Consistency proofs are transparency-dev/merkle's (verify_test.go), and verify."""
    expected = [bytes.fromhex(h) for h in proof]
    assert consistency_proof(old, new, in_memory(LEAVES[:new])) == expected
    assert verify_consistency(old, new, ROOTS[old], ROOTS[new], expected)


def _leaves(size: int) -> list[bytes]:
    return [f"leaf {i}".encode() for i in range(size)]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 700), data=st.data())
def test_roots_and_proofs_agree_with_aics_tlog(size: int, data: st.DataObject) -> None:
    """Roots and proofs equal the oracle's, and each side verifies the other's."""
    oracle = aics_tlog()
    leaves = _leaves(size)
    tree = oracle.MerkleTree(leaves)
    hashes = in_memory(leaves)
    index = data.draw(st.integers(0, size - 1), label="index")
    old = data.draw(st.integers(0, size), label="old size")
    assert root(leaves) == tree.root()
    assert root(leaves[:old]) == tree.root(old)
    ours = inclusion_proof(index, size, hashes)
    theirs = tree.inclusion_proof(index, size)
    assert ours == theirs
    assert verify_inclusion(leaf_hash(leaves[index]), index, size, theirs, tree.root())
    assert oracle.verify_inclusion(
        leaf_hash(leaves[index]), index, size, ours, root(leaves)
    )
    ours = consistency_proof(old, size, hashes)
    theirs = tree.consistency_proof(old, size)
    assert ours == theirs
    assert verify_consistency(old, size, tree.root(old), tree.root(), theirs)
    assert oracle.verify_consistency(old, size, root(leaves[:old]), root(leaves), ours)


def _flip(proof: list[bytes], at: int) -> list[bytes]:
    changed = list(proof)
    changed[at] = bytes([changed[at][0] ^ 1]) + changed[at][1:]
    return changed


# A size one off is not in the corpus: it can leave the path's shape as it was
# (see the test after it), so only the root can tell, and a root is tied to its
# size by the checkpoint's signature, not by the path.
def inclusion_mutations(
    index: int,
    size: int,
    proof: list[bytes],
    leaf: bytes,
    head: bytes,
    other: list[bytes],
) -> list[tuple[str, tuple[bytes, int, int, list[bytes], bytes]]]:
    """Every wrong claim made from one true inclusion proof: (what, arguments)."""
    cases = [
        ("index + 1", (leaf, index + 1, size, proof, head)),
        ("index - 1", (leaf, index - 1, size, proof, head)),
        ("index ^ 2", (leaf, index ^ 2, size, proof, head)),
        ("index = size", (leaf, size, size, proof, head)),
        ("index > size", (leaf, size + 5, size, proof, head)),
        ("size 0", (leaf, index, 0, proof, head)),
        ("size * 2", (leaf, index, size * 2, proof, head)),
        ("size // 2", (leaf, index, size // 2, proof, head)),
        ("other leaf", (leaf_hash(b"not the leaf"), index, size, proof, head)),
        ("empty root", (leaf, index, size, proof, EMPTY_ROOT)),
        ("short leaf", (leaf[:31], index, size, proof, head)),
        ("extended", (leaf, index, size, [*proof, head], head)),
        ("extended by empty", (leaf, index, size, [*proof, b""], head)),
        ("preceded", (leaf, index, size, [head, *proof], head)),
        ("proof for another size", (leaf, index, size, other, head)),
    ]
    if proof:
        cases.append(("truncated", (leaf, index, size, proof[:-1], head)))
        cases.append(("first dropped", (leaf, index, size, proof[1:], head)))
        cases += [
            (f"bit flipped in {i}", (leaf, index, size, _flip(proof, i), head))
            for i in range(len(proof))
        ]
    if len(proof) > 1:
        swapped = [proof[1], proof[0], *proof[2:]]
        cases.append(("swapped", (leaf, index, size, swapped, head)))
    return [
        (what, args)
        for what, args in cases
        if not _is_same(args, index, size, proof, leaf, head)
    ]


def _is_same(args, index, size, proof, leaf, head) -> bool:
    # index - 1 at 0, or index ^ 2 equal to index etc. are not mutations
    return args == (leaf, index, size, proof, head)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 1000])
def test_inclusion_verifiers_reject_every_mutation(size: int) -> None:
    """Both verifiers reject each wrong index, size, leaf, root or path."""
    oracle = aics_tlog()
    leaves = _leaves(size + 1)
    hashes = in_memory(leaves)
    head = root(leaves[:size])
    for index in sorted(
        {0, 1 % size, size // 2, size - 2 if size > 1 else 0, size - 1}
    ):
        proof = inclusion_proof(index, size, hashes)
        other = inclusion_proof(index, size + 1, hashes)
        leaf = leaf_hash(leaves[index])
        assert verify_inclusion(leaf, index, size, proof, head)
        for what, args in inclusion_mutations(index, size, proof, leaf, head, other):
            if args[1] < 0:
                continue  # an index below 0 is no leaf (the oracle takes ints too)
            assert not verify_inclusion(*args), (what, index)
            assert not oracle.verify_inclusion(*args), (what, index)


def consistency_mutations(
    old: int, new: int, proof: list[bytes], roots: list[bytes], other: list[bytes]
) -> list[tuple[str, tuple[int, int, bytes, bytes, list[bytes]]]]:
    """Every wrong claim made from one true consistency proof: (what, arguments)."""
    r1, r2 = roots[old], roots[new]
    cases = [
        ("old + 1", (old + 1, new, r1, r2, proof)),
        ("old - 1", (old - 1, new, r1, r2, proof)),
        ("old ^ 2", (old ^ 2, new, r1, r2, proof)),
        ("new * 2", (old, new * 2, r1, r2, proof)),
        ("old > new", (new, old, r2, r1, proof)),
        ("old 0", (0, new, r1, r2, proof)),
        ("old root of another size", (old, new, roots[old - 1], r2, proof)),
        ("new root of another size", (old, new, r1, roots[new - 1], proof)),
        ("swapped roots", (old, new, r2, r1, proof)),
        ("empty proof", (old, new, r1, r2, [])),
        ("extended by the old root", (old, new, r1, r2, [*proof, r1])),
        ("extended by the new root", (old, new, r1, r2, [*proof, r2])),
        ("extended by empty", (old, new, r1, r2, [*proof, b""])),
        ("preceded by the old root", (old, new, r1, r2, [r1, *proof])),
        ("preceded by its first", (old, new, r1, r2, [proof[0], *proof])),
        ("truncated", (old, new, r1, r2, proof[:-1])),
        ("first dropped", (old, new, r1, r2, proof[1:])),
        ("proof for another size", (old, new, r1, r2, other)),
    ]
    cases += [
        (f"bit flipped in {i}", (old, new, r1, r2, _flip(proof, i)))
        for i in range(len(proof))
    ]
    if len(proof) > 1:
        swapped = [proof[1], proof[0], *proof[2:]]
        cases.append(("swapped", (old, new, r1, r2, swapped)))
    same = (old, new, r1, r2, proof)
    return [(what, args) for what, args in cases if args != same]


@pytest.mark.parametrize(
    ("old", "new"),
    [(1, 2), (1, 8), (2, 5), (3, 7), (4, 8), (6, 7), (7, 8), (255, 256), (256, 257),
     (100, 1000), (512, 1000), (999, 1000)],
)  # fmt: skip
def test_consistency_verifiers_reject_every_mutation(old: int, new: int) -> None:
    """Both verifiers reject each wrong size, root or path of a true proof."""
    oracle = aics_tlog()
    leaves = _leaves(new + 1)
    hashes = in_memory(leaves)
    roots = [root(leaves[:n]) for n in range(new + 2)]
    proof = consistency_proof(old, new, hashes)
    other = consistency_proof(old, new + 1, hashes)
    assert verify_consistency(old, new, roots[old], roots[new], proof)
    for what, args in consistency_mutations(old, new, proof, roots, other):
        if args[0] < 0:
            continue
        assert not verify_consistency(*args), what
        assert not oracle.verify_consistency(*args), what


def test_consistency_edges() -> None:
    """Equal sizes need equal roots and no proof; an old size 0 needs the empty root."""
    r = root(_leaves(3))
    assert verify_consistency(3, 3, r, r, [])
    assert not verify_consistency(3, 3, r, EMPTY_ROOT, [])
    assert not verify_consistency(3, 3, r, r, [r])
    assert verify_consistency(0, 3, EMPTY_ROOT, r, [])
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert not verify_consistency(0, 3, r, r, [])
    assert not verify_consistency(0, 3, EMPTY_ROOT, r, [r])
    assert not verify_consistency(3, 0, r, EMPTY_ROOT, [])
    assert not verify_consistency(3, 5, r[:31], r, [r])


def test_generators_refuse_impossible_proofs() -> None:
    """No audit path for a leaf past the tree, no consistency proof backwards."""
    hashes = in_memory(_leaves(4))
    for index, size in [(4, 4), (0, 0), (-1, 4)]:
        with pytest.raises(ValueError, match="not in a tree"):
            inclusion_proof(index, size, hashes)
    with pytest.raises(ValueError, match="no consistency proof"):
        consistency_proof(4, 3, hashes)


def test_a_path_alone_does_not_pin_the_size() -> None:
    """Leaf 0 of 3 and of 4 take the same steps: the signed checkpoint pins the size."""
    leaves = _leaves(4)
    proof = inclusion_proof(0, 3, in_memory(leaves))
    head = root(leaves[:3])
    assert verify_inclusion(leaf_hash(leaves[0]), 0, 4, proof, head)
    assert not verify_inclusion(leaf_hash(leaves[0]), 0, 4, proof, root(leaves))

"""Merkle tree hashing, proofs and their verifiers (RFC 6962 / RFC 9162, SHA-256).

A leaf's hash is ``SHA-256(0x00 || leaf)``, an inner node's
``SHA-256(0x01 || left || right)``; the tree over ``n`` leaves splits at the
largest power of two below ``n`` (RFC 9162 §2.1.1). The generators
(:func:`inclusion_proof`, :func:`consistency_proof`) follow the RFC's
definitions of ``PATH`` and ``PROOF`` (§2.1.3.1, §2.1.4.1) over a
:data:`PerfectHash`: where the hashes come from (a list in memory, the log's
tiles on disk) is the caller's. The verifiers
(:func:`verify_inclusion`, :func:`verify_consistency`) are the RFC's
verification algorithms (§2.1.3.2, §2.1.4.2), step by step, and share nothing
with the generators but the two hash functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from hashlib import sha256
from typing import Final, TypeAlias

__all__ = [
    "EMPTY_ROOT",
    "HASH_SIZE",
    "PerfectHash",
    "consistency_proof",
    "fold_perfect",
    "inclusion_proof",
    "leaf_hash",
    "node_hash",
    "subtree_hash",
    "verify_consistency",
    "verify_inclusion",
]

HASH_SIZE: Final = 32
#: The root of the tree with no leaves: SHA-256 of nothing (RFC 9162 §2.1.1).
EMPTY_ROOT: Final = sha256(b"").digest()

#: ``perfect(start, height)``: the hash of the complete subtree over leaves
#: ``start .. start + 2**height``, ``start`` a multiple of ``2**height``.
PerfectHash: TypeAlias = Callable[[int, int], bytes]


def leaf_hash(leaf: bytes) -> bytes:
    """The hash of one leaf: ``SHA-256(0x00 || leaf)``."""
    return sha256(b"\x00" + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """The hash of an inner node: ``SHA-256(0x01 || left || right)``."""
    return sha256(b"\x01" + left + right).digest()


def fold_perfect(hashes: Sequence[bytes]) -> bytes:
    """The root of a complete subtree whose ``2**h`` lowest hashes are given."""
    level = list(hashes)
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def _split(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n >= 2``)."""
    return 1 << ((n - 1).bit_length() - 1)


def subtree_hash(start: int, end: int, perfect: PerfectHash) -> bytes:
    """``MTH(D[start:end])``, built from the complete subtrees it holds."""
    n = end - start
    if n <= 0:
        return EMPTY_ROOT
    if n & (n - 1) == 0 and start % n == 0:
        return perfect(start, n.bit_length() - 1)
    k = _split(n)
    return node_hash(
        subtree_hash(start, start + k, perfect), subtree_hash(start + k, end, perfect)
    )


def inclusion_proof(index: int, size: int, perfect: PerfectHash) -> list[bytes]:
    """``PATH(index, D[0:size])``, the audit path of leaf ``index`` (§2.1.3.1).

    Raises:
        ValueError: ``index`` is not a leaf of a tree of ``size`` leaves.
    """
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of {size} leaves")
    path: list[bytes] = []
    start, end = 0, size
    # PATH recurses into the half holding the leaf and appends the other
    # half's hash on the way back: walk down, then reverse.
    while end - start > 1:
        k = _split(end - start)
        if index < start + k:
            path.append(subtree_hash(start + k, end, perfect))
            end = start + k
        else:
            path.append(subtree_hash(start, start + k, perfect))
            start += k
    path.reverse()
    return path


def consistency_proof(
    old_size: int, new_size: int, perfect: PerfectHash
) -> list[bytes]:
    """``PROOF(old_size, D[0:new_size])`` (§2.1.4.1); empty for 0 or equal sizes.

    Raises:
        ValueError: not ``0 <= old_size <= new_size``.
    """
    if not 0 <= old_size <= new_size:
        raise ValueError(
            f"no consistency proof from {old_size} leaves to {new_size} leaves"
        )
    if old_size in (0, new_size):
        return []
    proof: list[bytes] = []
    m, start, end, whole = old_size, 0, new_size, True
    # SUBPROOF(m, D[start:end], whole), walked down; the hashes it appends on
    # the way back up are collected and reversed.
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            proof.append(subtree_hash(start + k, end, perfect))
            end = start + k
        else:
            proof.append(subtree_hash(start, start + k, perfect))
            m, start, whole = m - k, start + k, False
    if not whole:
        proof.append(subtree_hash(start, end, perfect))
    proof.reverse()
    return proof


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether ``proof`` shows leaf hash ``leaf`` at ``index`` under ``root``.

    RFC 9162 §2.1.3.2, step by step. Every hash must be 32 bytes.
    """
    if not 0 <= index < size:  # step 1
        return False
    if len(leaf) != HASH_SIZE or len(root) != HASH_SIZE:
        return False
    fn, sn = index, size - 1  # step 2
    r = leaf  # step 3
    for p in proof:  # step 4
        if sn == 0 or len(p) != HASH_SIZE:  # 4a
            return False
        if fn & 1 or fn == sn:  # 4b
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1  # 4c
        sn >>= 1
    return sn == 0 and r == root  # step 5


def verify_consistency(
    old_size: int,
    new_size: int,
    old_root: bytes,
    new_root: bytes,
    proof: Sequence[bytes],
) -> bool:
    """Whether ``proof`` shows the old tree is a prefix of the new one.

    The old tree is (``old_size``, ``old_root``), the new (``new_size``,
    ``new_root``).

    RFC 9162 §2.1.4.2, step by step, for ``0 < old_size < new_size``. The
    edges the RFC leaves to the caller: equal sizes need equal roots and an
    empty proof; an old size of 0 needs the empty tree's root and an empty
    proof; a smaller new size never holds. Every hash must be 32 bytes.
    """
    if not 0 <= old_size <= new_size:
        return False
    if len(old_root) != HASH_SIZE or len(new_root) != HASH_SIZE:
        return False
    if old_size == 0:
        return not proof and old_root == EMPTY_ROOT
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof or any(len(c) != HASH_SIZE for c in proof):  # step 1
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # step 2
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1  # step 3
    while fn & 1:  # step 4
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]  # step 5
    for c in path[1:]:  # step 6
        if sn == 0:  # 6a
            return False
        if fn & 1 or fn == sn:  # 6b
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1  # 6c
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0  # step 7

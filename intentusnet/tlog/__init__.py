"""The transparency log over closed records (DESIGN §12; being built).

``merkle``: RFC 6962 / 9162 hashing, proofs and their verifiers. ``leaf``: the
bytes of one leaf. ``note`` and ``checkpoint``: C2SP signed notes and
checkpoints. ``tiles``: C2SP tile paths and entry bundles. ``log``: the
:class:`~intentusnet.tlog.log.TileLog` on disk. This folder sits beside
``record/`` and below ``store/``: it imports ``record/`` (keys) and nothing
above it.
"""

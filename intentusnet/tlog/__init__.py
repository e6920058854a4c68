"""The transparency log over closed records (DESIGN §12).

``merkle``: RFC 6962 / 9162 hashing, proofs and their verifiers. ``leaf``: the
bytes of one leaf. ``note`` and ``checkpoint``: C2SP signed notes and
checkpoints. ``tiles``: C2SP tile paths and entry bundles. ``log``: the
:class:`~intentusnet.tlog.log.TileLog` on disk. ``index``: execution id ->
leaves, a cache beside the tiles. ``cadence`` and ``sequencer``: leaves queued
as records close, appended in batches by a background thread. ``audit``: a
log checked against its key, remembered checkpoints and the records.
``cosignature`` and ``witness``: C2SP witness cosignatures, the witness that
makes them, and the log's request for one. This
folder sits beside ``record/`` and below ``store/``: it imports ``record/``
(keys) and nothing above it.
"""

"""The execution record as it lies on disk (DESIGN §4).

``model``: the record's types. ``format``: sealed lines, the hash chain and the
schema version. ``reader``: the one reader, from bytes to a record.
``verify``: a line-by-line report of a record's bytes. ``fingerprint``: what
an execution did, as one hash.
"""

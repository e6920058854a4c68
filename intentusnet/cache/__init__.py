"""The replay cache: earlier records answering equal envelopes (DESIGN §7).

``replay_cache``: ``ReplayCache``. ``policy``: what may be cached and served.
``entry``: a cached answer. ``disk``: the diskcache tier. ``flight``: single
flight. ``callrouter``: routing a plain call as an intent, shared by
``@cached`` (``cached``) and the httpx transport. ``seams``: what the cache
needs from a store beyond ``ExecutionStore`` (a hit journal, a usage index,
flights shared across processes).
"""

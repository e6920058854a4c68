"""Steps inside agents, and the debugging loop built on them.

``step``: the ``@step`` decorator and ``ctx.step``. ``session``: numbering,
recording and serving one execution's steps. ``cassette``: a record's steps,
served in a re-run. ``rerun``: routing a record again against its cassette.
``diff`` and ``explain``: comparing records and finding a failure's root cause.
``view``: the steps of a record, as the tools read them.
"""

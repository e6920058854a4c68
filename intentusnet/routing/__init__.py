"""The router: agents, deterministic strategies, and the recorder it drives.

``seams`` holds the Protocols through which the router uses the parts above
it (the response cache, the step session), so it never imports them.
"""

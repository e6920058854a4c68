"""IntentusNet over HTTP: the client, remote agents and the agent service.

``client``: ``IntentusClient`` and its async twin. ``wire``: the JSON forms
they exchange. ``remote``: ``RemoteAgent``. ``agent_app``: an agent as an
HTTP service. ``problem``: RFC 9457 problem details.
"""

from .remote import RemotePool as RemotePool
from .remote import close_pools as close_pools

__all__ = ["RemotePool", "close_pools"]

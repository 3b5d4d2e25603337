"""The Letta engine: a projection of the log into one Letta agent per checkpoint
(``projection``), kept current by a runner thread (``projections.engines.runner``), read only when chosen
(``engine``), and the server-side details (``server``)."""

from projections.engines.letta.engine import LettaEngine
from projections.engines.letta.projection import LettaProjection
from projections.engines.letta.server import agent_cursor, delete_agent, make_client

__all__ = ["LettaEngine", "LettaProjection", "agent_cursor", "delete_agent", "make_client"]

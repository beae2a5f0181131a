"""The HTTP service: app (create_app), service (the shared Service), routes and explorer (endpoints),
schemas (request and response bodies), guard (API key, limits, errors), batching (the one worker), static/
(the explorer page).

    app = create_app(bertscope.load(), settings=ServerSettings(api_key="secret"))
"""

from .app import create_app
from .service import Service
from .settings import ServerSettings

__all__ = ["create_app", "ServerSettings", "Service"]

"""threadline's HTTP server: LangGraph Server's API over threadline graphs.

Install with ``pip install 'threadline[server]'`` and start with ``threadline serve``. This
package's top level imports nothing from FastAPI, so the CLI can read a config file without the
server's dependencies; ``threadline.server.app.create_app`` builds the ASGI application.
"""

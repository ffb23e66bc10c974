"""Serve l4's event-triggered deployments without the CLI: ``python deployments/serve.py``.

Same as ``l4 serve`` (see flows/serve.py); PREFECT_API_URL must point at a running server.
"""

from flows.serve import serve

if __name__ == "__main__":
    serve()

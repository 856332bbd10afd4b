"""The fabric's live view in a browser: a read-only HTTP server (server.py), its JSON (view.py), one static page."""

"""``odradek console``: a small web UI that looks at a broker as a client does.

Topics with partitions, offsets, sizes and configs; a partition's log dir and size; consumer
groups with members and lag; a message browser by offset or timestamp (text, JSON or hex);
produce / consume rates; create a topic and reset a group's offsets, each after a preview.

Layers: the console imports :mod:`odradek.client` (the async face) and :mod:`odradek.protocol`
only. :mod:`.app` is the HTTP side (Starlette), :mod:`.views` what each page shows,
:mod:`.records` how record bytes are rendered, :mod:`.rates` the rate sampler, :mod:`.server`
binds the socket and runs uvicorn. The pages are plain HTML, CSS and one small script each in
``static/``, shipped in the package (no CDN, no build step). Starlette and uvicorn come with the
``console`` extra (``pip install 'odradek[console]'``).
"""

from __future__ import annotations

__all__ = ["create_app", "serve"]


def __getattr__(name: str) -> object:
    # lazy: `import odradek.console` must not need Starlette until the app is built
    if name == "create_app":
        from odradek.console.app import create_app

        return create_app
    if name == "serve":
        from odradek.console.server import serve

        return serve
    raise AttributeError(name)
